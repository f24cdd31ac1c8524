-- insert_automation --
-- Create an automation owned by a principal.
INSERT INTO charter.automations (principal, target, name, enabled, created_at, updated_at)
VALUES (%(principal)s, %(target)s, %(name)s, %(enabled)s,
        coalesce(%(now)s, now()), coalesce(%(now)s, now()))
RETURNING *

-- list_automations --
-- A principal's automations (everyone's when everyone is true), oldest first,
-- after a (created_at, id) cursor.
SELECT * FROM charter.automations
WHERE (%(everyone)s OR principal = %(principal)s)
  AND (%(after_created)s::timestamptz IS NULL
       OR (created_at, id) > (%(after_created)s, %(after_id)s::uuid))
ORDER BY created_at, id
LIMIT %(limit)s

-- get_automation --
-- One automation, if it belongs to the principal (any one when everyone is true).
SELECT * FROM charter.automations WHERE id = %(id)s AND (%(everyone)s OR principal = %(principal)s)

-- lock_automation --
-- One automation of the principal's (anyone's, for everyone), locked for a
-- read-modify-write.
SELECT * FROM charter.automations
WHERE id = %(id)s AND (%(everyone)s OR principal = %(principal)s)
FOR UPDATE

-- update_automation --
-- Replace an automation's mutable fields (the caller read and locked it first).
UPDATE charter.automations
SET name = %(name)s, target = %(target)s, enabled = %(enabled)s,
    updated_at = coalesce(%(now)s, now())
WHERE id = %(id)s AND (%(everyone)s OR principal = %(principal)s)
RETURNING *

-- delete_automation --
-- Delete an automation with its triggers and plan; its runs stay as history.
DELETE FROM charter.automations
WHERE id = %(id)s AND (%(everyone)s OR principal = %(principal)s)
RETURNING id

-- insert_schedule --
-- Add a schedule trigger to an automation of the principal's (anyone's, for everyone).
INSERT INTO charter.schedule_triggers (automation_id, cron, timezone, next_run_at,
                                       remaining_occurrences, created_at, updated_at)
SELECT a.id, %(cron)s, %(timezone)s, %(next_run_at)s, %(remaining_occurrences)s,
       coalesce(%(now)s, now()), coalesce(%(now)s, now())
FROM charter.automations a
WHERE a.id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)
RETURNING *

-- list_schedules --
-- An automation's schedule triggers, oldest first.
SELECT s.* FROM charter.schedule_triggers s
JOIN charter.automations a ON a.id = s.automation_id
WHERE s.automation_id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)
ORDER BY s.created_at, s.id

-- lock_schedule --
-- One schedule trigger of an automation of the principal's (anyone's, for everyone),
-- locked for an update.
SELECT s.* FROM charter.schedule_triggers s
JOIN charter.automations a ON a.id = s.automation_id
WHERE s.id = %(id)s AND s.automation_id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)
FOR UPDATE OF s

-- update_schedule --
-- Replace a schedule trigger's mutable fields (the caller read and locked it first).
UPDATE charter.schedule_triggers
SET cron = %(cron)s, timezone = %(timezone)s, next_run_at = %(next_run_at)s,
    remaining_occurrences = %(remaining_occurrences)s, enabled = %(enabled)s,
    updated_at = coalesce(%(now)s, now())
WHERE id = %(id)s
RETURNING *

-- delete_schedule --
-- Remove a schedule trigger of an automation of the principal's (anyone's, for everyone).
DELETE FROM charter.schedule_triggers s
USING charter.automations a
WHERE s.id = %(id)s AND s.automation_id = %(automation_id)s
  AND a.id = s.automation_id AND (%(everyone)s OR a.principal = %(principal)s)
RETURNING s.id

-- insert_webhook --
-- Add a webhook trigger; the secret goes in and never comes back out.
INSERT INTO charter.webhook_triggers (automation_id, source, event, secret, created_at, updated_at)
SELECT a.id, %(source)s, %(event)s, %(secret)s,
       coalesce(%(now)s, now()), coalesce(%(now)s, now())
FROM charter.automations a
WHERE a.id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)
RETURNING id, automation_id, source, event, enabled, created_at, updated_at

-- list_webhooks --
-- An automation's webhook triggers without their secrets, oldest first.
SELECT w.id, w.automation_id, w.source, w.event, w.enabled, w.created_at, w.updated_at
FROM charter.webhook_triggers w
JOIN charter.automations a ON a.id = w.automation_id
WHERE w.automation_id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)
ORDER BY w.created_at, w.id

-- lock_webhook --
-- One webhook trigger (without its secret) of the principal's (anyone's, for
-- everyone), locked for an update.
SELECT w.id, w.automation_id, w.source, w.event, w.enabled, w.created_at, w.updated_at
FROM charter.webhook_triggers w
JOIN charter.automations a ON a.id = w.automation_id
WHERE w.id = %(id)s AND w.automation_id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)
FOR UPDATE OF w

-- update_webhook --
-- Replace a webhook trigger's fields; a NULL secret keeps the stored one.
UPDATE charter.webhook_triggers
SET source = %(source)s, event = %(event)s, enabled = %(enabled)s,
    secret = coalesce(%(secret)s, secret), updated_at = coalesce(%(now)s, now())
WHERE id = %(id)s
RETURNING id, automation_id, source, event, enabled, created_at, updated_at

-- delete_webhook --
-- Remove a webhook trigger of an automation of the principal's (anyone's, for everyone).
DELETE FROM charter.webhook_triggers w
USING charter.automations a
WHERE w.id = %(id)s AND w.automation_id = %(automation_id)s
  AND a.id = w.automation_id AND (%(everyone)s OR a.principal = %(principal)s)
RETURNING w.id

-- put_plan --
-- Set the one plan of an automation of the principal's (anyone's, for everyone),
-- replacing any before it.
INSERT INTO charter.plans (automation_id, version, steps, allowlist, limits, updated_at)
SELECT a.id, %(version)s, %(steps)s, %(allowlist)s, %(limits)s, coalesce(%(now)s, now())
FROM charter.automations a
WHERE a.id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)
ON CONFLICT (automation_id) DO UPDATE
SET version = EXCLUDED.version, steps = EXCLUDED.steps, allowlist = EXCLUDED.allowlist,
    limits = EXCLUDED.limits, updated_at = EXCLUDED.updated_at
RETURNING *

-- get_plan --
-- The plan of an automation of the principal's (anyone's, for everyone), if it has one.
SELECT p.* FROM charter.plans p
JOIN charter.automations a ON a.id = p.automation_id
WHERE p.automation_id = %(automation_id)s AND (%(everyone)s OR a.principal = %(principal)s)

-- delete_plan --
-- Remove the plan of an automation of the principal's (anyone's, for everyone).
DELETE FROM charter.plans p
USING charter.automations a
WHERE p.automation_id = %(automation_id)s
  AND a.id = p.automation_id AND (%(everyone)s OR a.principal = %(principal)s)
RETURNING p.automation_id
