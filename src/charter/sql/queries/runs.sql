-- admit_run --
-- Admit one run with an immutable snapshot of the automation's plan; nothing back when
-- the occurrence was already admitted, the automation is paused or it has no plan.
INSERT INTO charter.runs (automation_id, trigger_id, trigger_kind, principal, target, plan,
                          input, dedupe_key, scheduled_for, traceparent, created_at)
SELECT a.id, %(trigger_id)s, %(trigger_kind)s, a.principal, a.target,
       jsonb_build_object('version', p.version, 'steps', p.steps,
                          'allowlist', p.allowlist, 'limits', p.limits),
       %(input)s, %(dedupe_key)s, %(scheduled_for)s, %(traceparent)s, coalesce(%(now)s, now())
FROM charter.automations a
JOIN charter.plans p ON p.automation_id = a.id
WHERE a.id = %(automation_id)s AND a.enabled
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING *

-- get_run --
-- One run, if it belongs to the principal (any run when everyone is true).
SELECT * FROM charter.runs WHERE id = %(id)s AND (%(everyone)s OR principal = %(principal)s)

-- list_runs --
-- A principal's runs (everyone's when everyone is true), newest first, after a
-- (created_at, id) cursor.
SELECT * FROM charter.runs
WHERE (%(everyone)s OR principal = %(principal)s)
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(automation_id)s::uuid IS NULL OR automation_id = %(automation_id)s)
  AND (%(before_created)s::timestamptz IS NULL
       OR (created_at, id) < (%(before_created)s, %(before_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s

-- run_steps --
-- A run's step journal in plan order.
SELECT * FROM charter.run_steps WHERE run_id = %(run_id)s ORDER BY position

-- cancel_run --
-- Fail a pending or running run of the principal's (anyone's, for everyone) at an
-- operator's request; a machine holding its lease is refused from its next call on
-- (those check status = 'running').
UPDATE charter.runs
SET status = 'failed', error = %(error)s, finished_at = coalesce(%(now)s, now()),
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, retry_at = NULL
WHERE id = %(id)s AND (%(everyone)s OR principal = %(principal)s)
  AND status IN ('pending', 'running')
RETURNING *
