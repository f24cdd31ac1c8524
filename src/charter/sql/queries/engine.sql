-- actor_for_key --
-- The actor a public key belongs to, with the key's and the actor's standing.
SELECT a.id, a.roles, k.retired_at, a.disabled_at
FROM charter.actor_keys k
JOIN charter.actors a ON a.id = k.actor_id
WHERE k.public_key = %(public_key)s

-- current_workflow_version --
-- The version deployed last at a path.
SELECT version
FROM charter.workflow_deployments
WHERE path = %(path)s
ORDER BY revision DESC
LIMIT 1

-- workflow_definition --
-- A definition's exact canonical text by version.
SELECT definition::text
FROM charter.workflow_definitions
WHERE version = %(version)s

-- lock_process --
-- A process row, locked until the transaction ends: events on one process serialize here.
-- NO KEY UPDATE (the id never changes) leaves foreign-key checks of work rows that point
-- at the process unblocked, so a stalled event cannot stall every worker's claims.
SELECT id, workflow_path, state, data, head_hash, seq, parent_id, parent_event_hash,
       created_at, updated_at
FROM charter.processes
WHERE id = %(id)s
FOR NO KEY UPDATE

-- get_process --
-- A process row.
SELECT id, workflow_path, state, data, head_hash, seq, parent_id, parent_event_hash,
       created_at, updated_at
FROM charter.processes
WHERE id = %(id)s

-- child_processes --
-- The processes a process spawned.
SELECT id, workflow_path, state, data, head_hash, seq, parent_id, parent_event_hash,
       created_at, updated_at
FROM charter.processes
WHERE parent_id = %(id)s
ORDER BY created_at, id

-- insert_process --
-- A new process row before its first event; nothing back if the id is taken.
INSERT INTO charter.processes (id, workflow_path, state, data, parent_id, parent_event_hash,
                               created_at, updated_at)
VALUES (%(id)s, %(workflow_path)s, %(state)s, %(data)s, %(parent_id)s, %(parent_event_hash)s,
        coalesce(%(now)s, now()), coalesce(%(now)s, now()))
ON CONFLICT (id) DO NOTHING
RETURNING id

-- insert_event --
-- Append an event; the chain trigger checks that it extends the head.
INSERT INTO charter.events (process_id, seq, hash, prev_hash, kind, envelope, signature, actor,
                            actor_id, actor_roles, action, workflow_path, workflow_version,
                            cause_hash, received_at)
VALUES (%(process_id)s, %(seq)s, %(hash)s, %(prev_hash)s, %(kind)s, %(envelope)s::json,
        %(signature)s, %(actor)s, %(actor_id)s, %(actor_roles)s, %(action)s, %(workflow_path)s,
        %(workflow_version)s, %(cause_hash)s, coalesce(%(now)s, now()))

-- advance_process --
-- Move a process onto its new head with its new state and data.
UPDATE charter.processes
SET state = %(state)s, data = %(data)s, head_hash = %(head_hash)s, seq = %(seq)s,
    updated_at = coalesce(%(now)s, now())
WHERE id = %(id)s

-- cancel_schedules --
-- Cancel the live rows of schedule ids on a process (by `cancel`, or replaced), with a
-- NOTIFY hint for each (delivered at commit).
WITH cancelled AS (
    UPDATE charter.scheduled_actions
    SET status = 'cancelled', cancelled_at = coalesce(%(now)s, now()),
        cancelled_by_event_hash = %(event_hash)s, cancel_reason = %(reason)s
    WHERE process_id = %(process_id)s
      AND schedule_id = ANY (%(schedule_ids)s)
      AND status IN ('active', 'claimed')
    RETURNING id, process_id, workflow_path, action_name, run_at
)
SELECT id, pg_notify('scheduled_actions_changed', json_build_object(
    'id', id, 'process_id', process_id, 'workflow_path', workflow_path,
    'action_name', action_name,
    'run_at', to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'kind', 'scheduled_action', 'op', 'cancelled')::text)
FROM cancelled

-- insert_scheduled_action --
-- A scheduled action with its provenance.
INSERT INTO charter.scheduled_actions (id, schedule_id, process_id, workflow_path,
    action_name, action_data, run_at, interval, until_ts, max_count, created_event_hash,
    created_by_action, created_by_actor, created_at)
VALUES (%(id)s, %(schedule_id)s, %(process_id)s, %(workflow_path)s, %(action_name)s,
        %(action_data)s, %(run_at)s, %(interval)s, %(until_ts)s, %(max_count)s, %(event_hash)s,
        %(action)s, %(actor)s, coalesce(%(now)s, now()))

-- insert_auto_work --
-- Queue an automatic action, once per (process, action, causing event); with an error
-- (its data does not render, the cascade limit is reached) it is written failed at once.
INSERT INTO charter.automation_queue (id, process_id, workflow_path, action_name, action_data,
    reason, available_state, queued_by_event_hash, queued_by_action, queued_by_actor, queued_at,
    cascade_depth, cascade_origin_event_hash,
    status, completed_at, last_attempt_at, last_attempt_result, last_error)
SELECT %(id)s, %(process_id)s, %(workflow_path)s, %(action_name)s, %(action_data)s, %(reason)s,
       %(available_state)s, %(event_hash)s, %(action)s, %(actor)s, t.now,
       %(cascade_depth)s, %(cascade_origin)s,
       CASE WHEN e.error IS NULL THEN 'pending' ELSE 'failed' END,
       CASE WHEN e.error IS NULL THEN NULL ELSE t.now END,
       CASE WHEN e.error IS NULL THEN NULL ELSE t.now END,
       CASE WHEN e.error IS NULL THEN NULL ELSE 'failed' END,
       e.error
FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) t,
     (SELECT %(error)s::text AS error) e
ON CONFLICT (process_id, action_name, queued_by_event_hash) DO NOTHING

-- log --
-- Append a system log row.
INSERT INTO charter.system_log (level, kind, code, process_id, actor, action, event_hash,
                                message, detail, at)
VALUES (%(level)s, %(kind)s, %(code)s, %(process_id)s, %(actor)s, %(action)s, %(event_hash)s,
        %(message)s, %(detail)s, coalesce(%(now)s, now()))

-- notify --
-- A wake-up hint, delivered when the transaction commits.
SELECT pg_notify(%(channel)s, %(payload)s)

-- process_events --
-- A process's events in order, each with its exact canonical envelope text.
SELECT process_id, seq, hash, envelope::text, signature, kind, workflow_version, received_at,
       actor_id, actor_roles
FROM charter.events
WHERE process_id = %(process_id)s
ORDER BY seq

-- event_by_hash --
-- One event by its hash.
SELECT process_id, seq, hash, envelope::text, signature, kind, workflow_version, received_at,
       actor_id, actor_roles
FROM charter.events
WHERE hash = %(hash)s

-- process_work --
-- A process's scheduled actions and queue rows, newest first.
SELECT 'scheduled' AS lane, to_jsonb(s) AS row
FROM charter.scheduled_actions s
WHERE s.process_id = %(process_id)s
UNION ALL
SELECT 'queue', to_jsonb(q)
FROM charter.automation_queue q
WHERE q.process_id = %(process_id)s

-- insert_definition --
-- Store a definition under its content hash; nothing happens if it is already stored.
INSERT INTO charter.workflow_definitions (version, definition, created_at)
VALUES (%(version)s, %(definition)s::json, coalesce(%(now)s, now()))
ON CONFLICT (version) DO NOTHING

-- insert_deployment --
-- Deploy a version at a path as its next revision (a concurrent deploy clashes on the key).
INSERT INTO charter.workflow_deployments (path, revision, version, deployed_by, deployed_at)
SELECT %(path)s, coalesce(max(revision), 0) + 1, %(version)s, %(deployed_by)s,
       coalesce(%(now)s, now())
FROM charter.workflow_deployments
WHERE path = %(path)s
RETURNING revision, deployed_at

-- list_workflows --
-- Each path's current deployment and how many revisions it has.
SELECT DISTINCT ON (path) path, revision, version, deployed_at, deployed_by
FROM charter.workflow_deployments
ORDER BY path, revision DESC

-- workflow_revisions --
-- Every deployment of a path, newest first.
SELECT path, revision, version, deployed_at, deployed_by
FROM charter.workflow_deployments
WHERE path = %(path)s
ORDER BY revision DESC

-- scheduled_work_for_firing --
-- The scheduled action an event fires (for the provenance check at fire time), whether
-- its occurrence is due by the engine's clock, and the event that already fired that
-- occurrence, if one did.
SELECT s.*, s.run_at <= coalesce(%(now)s::timestamptz, now()) AS due,
       (SELECT f.event_hash FROM charter.automation_firings f
        WHERE f.work_id = s.id AND f.occurrence = s.run_at) AS fired_event
FROM charter.scheduled_actions s WHERE s.id = %(id)s

-- queue_work_for_firing --
-- The automatic-action queue row an event fires, and the event that already fired it.
SELECT q.*, true AS due,
       (SELECT f.event_hash FROM charter.automation_firings f
        WHERE f.work_id = q.id AND f.occurrence = q.queued_at) AS fired_event
FROM charter.automation_queue q WHERE q.id = %(id)s

-- transaction_now --
-- The database's clock for this transaction (what coalesce(now, now()) writes).
SELECT now()

-- insert_firing --
-- Record that a work occurrence fired; a second event for it violates the primary key.
INSERT INTO charter.automation_firings (work_id, kind, occurrence, process_id, event_hash,
                                        fired_at)
VALUES (%(work_id)s, %(kind)s, %(occurrence)s, %(process_id)s, %(event_hash)s,
        coalesce(%(now)s, now()))

-- cascade_chain --
-- The actions of a process's events from the one that began an automatic cascade on.
SELECT action FROM charter.events
WHERE process_id = %(process_id)s
  AND seq >= (SELECT seq FROM charter.events
             WHERE hash = %(origin)s AND process_id = %(process_id)s)
ORDER BY seq

-- batch_processes --
-- The processes a batch of automated events fires on, locked as lock_process locks one
-- (the worker's claim already holds them: this never waits for another transaction).
SELECT id, workflow_path, state, data, head_hash, seq, parent_id, parent_event_hash,
       created_at, updated_at
FROM charter.processes
WHERE id = ANY (%(ids)s)
ORDER BY id
FOR NO KEY UPDATE

-- batch_workflow_versions --
-- The version deployed last at each of several paths.
SELECT DISTINCT ON (path) path, version
FROM charter.workflow_deployments
WHERE path = ANY (%(paths)s)
ORDER BY path, revision DESC

-- batch_scheduled_work --
-- Scheduled actions a batch fires, as scheduled_work_for_firing reads one.
SELECT s.*, s.run_at <= coalesce(%(now)s::timestamptz, now()) AS due,
       (SELECT f.event_hash FROM charter.automation_firings f
        WHERE f.work_id = s.id AND f.occurrence = s.run_at) AS fired_event
FROM charter.scheduled_actions s WHERE s.id = ANY (%(ids)s::uuid[])

-- batch_queue_work --
-- Queue rows a batch fires, as queue_work_for_firing reads one.
SELECT q.*, true AS due,
       (SELECT f.event_hash FROM charter.automation_firings f
        WHERE f.work_id = q.id AND f.occurrence = q.queued_at) AS fired_event
FROM charter.automation_queue q WHERE q.id = ANY (%(ids)s::uuid[])
