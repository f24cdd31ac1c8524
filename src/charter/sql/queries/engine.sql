-- actor_for_key --
-- The actor a public key belongs to, with the key's and the actor's standing.
SELECT a.id, a.roles, k.retired_at, a.disabled_at
FROM charter.actor_keys k
JOIN charter.actors a ON a.id = k.actor_id
WHERE k.public_key = %(public_key)s

-- current_workflow_version --
-- The version deployed last at a path, and its revision.
SELECT version, revision
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
-- A process row, with the workflow revision its last event was decided under.
SELECT p.id, p.workflow_path, p.state, p.data, p.head_hash, p.seq, p.parent_id,
       p.parent_event_hash, p.created_at, p.updated_at,
       (SELECT e.workflow_revision FROM charter.events e WHERE e.hash = p.head_hash)
FROM charter.processes p
WHERE p.id = %(id)s

-- child_processes --
-- The processes a process spawned.
SELECT p.id, p.workflow_path, p.state, p.data, p.head_hash, p.seq, p.parent_id,
       p.parent_event_hash, p.created_at, p.updated_at,
       (SELECT e.workflow_revision FROM charter.events e WHERE e.hash = p.head_hash)
FROM charter.processes p
WHERE p.parent_id = %(id)s
ORDER BY p.created_at, p.id

-- insert_process --
-- A new process row before its first event; nothing back if the id is taken.
INSERT INTO charter.processes (id, workflow_path, state, data, parent_id, parent_event_hash,
                               created_at, updated_at)
VALUES (%(id)s, %(workflow_path)s, %(state)s, %(data)s, %(parent_id)s, %(parent_event_hash)s,
        coalesce(%(now)s, now()), coalesce(%(now)s, now()))
ON CONFLICT (id) DO NOTHING
RETURNING id

-- create_process --
-- A new process row before its first event, sent without waiting for the answer: a taken
-- id refuses it with the primary key's unique violation when the transaction is answered.
INSERT INTO charter.processes (id, workflow_path, state, data, parent_id, parent_event_hash,
                               created_at, updated_at)
VALUES (%(id)s, %(workflow_path)s, %(state)s, %(data)s, NULL, NULL,
        coalesce(%(now)s, now()), coalesce(%(now)s, now()))

-- process_events --
-- A process's events in order, each with its exact canonical envelope text.
SELECT process_id, seq, hash, envelope::text, signature, kind, workflow_version, received_at,
       actor_id, actor_roles, workflow_revision
FROM charter.events
WHERE process_id = %(process_id)s
ORDER BY seq

-- event_by_hash --
-- One event by its hash.
SELECT process_id, seq, hash, envelope::text, signature, kind, workflow_version, received_at,
       actor_id, actor_roles, workflow_revision
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

-- cancel_migrated_work --
-- A migration's cancellations (docs/dsl.md, "Migration"), recorded as an action's
-- `cancel` records them: the live schedules it lists, and every live scheduled action or
-- queue row of the process whose action is not among the current definition's actions.
-- One row back: the wake-up hints of the rows it cancelled, as apply_writes_v1 returns them.
WITH scheduled AS (
    UPDATE charter.scheduled_actions
    SET status = 'cancelled', cancelled_at = coalesce(%(now)s::timestamptz, now()),
        cancelled_by_event_hash = %(event_hash)s,
        cancel_reason = CASE WHEN action_name = ANY (%(actions)s::text[])
                             THEN %(listed_reason)s ELSE %(orphan_reason)s END
    WHERE process_id = %(process_id)s
      AND status IN ('active', 'claimed')
      AND (schedule_id = ANY (%(schedule_ids)s::text[])
           OR action_name <> ALL (%(actions)s::text[]))
    RETURNING id, process_id, workflow_path, action_name, run_at
), queued AS (
    UPDATE charter.automation_queue
    SET status = 'cancelled', cancelled_at = coalesce(%(now)s::timestamptz, now()),
        cancelled_by_event_hash = %(event_hash)s, cancel_reason = %(orphan_reason)s
    WHERE process_id = %(process_id)s
      AND status IN ('pending', 'claimed')
      AND action_name <> ALL (%(actions)s::text[])
    RETURNING id, process_id, workflow_path, action_name
)
SELECT coalesce((SELECT jsonb_agg(jsonb_build_array('scheduled_actions_changed',
                     jsonb_build_object('id', id, 'process_id', process_id,
                         'workflow_path', workflow_path, 'action_name', action_name,
                         'run_at', to_char(run_at AT TIME ZONE 'UTC',
                                           'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                         'kind', 'scheduled_action', 'op', 'cancelled')::text))
                 FROM scheduled), '[]'::jsonb)
    || coalesce((SELECT jsonb_agg(jsonb_build_array('automation_queue_changed',
                     jsonb_build_object('id', id, 'process_id', process_id,
                         'workflow_path', workflow_path, 'action_name', action_name,
                         'kind', 'auto_action', 'op', 'cancelled')::text))
                 FROM queued), '[]'::jsonb)

-- insert_definition --
-- Store a definition under its content hash; nothing happens if it is already stored.
INSERT INTO charter.workflow_definitions (version, definition, created_at)
VALUES (%(version)s, %(definition)s::json, coalesce(%(now)s, now()))
ON CONFLICT (version) DO NOTHING

-- insert_deployment --
-- Deploy a version at a path as its next revision (a concurrent deploy clashes on the key),
-- unless it is the path's current version already: then no row (nothing changed).
INSERT INTO charter.workflow_deployments (path, revision, version, deployed_by,
    deployed_by_token, deployed_at, allow_stranding, migration_map)
SELECT %(path)s, coalesce(max(revision), 0) + 1, %(version)s, %(deployed_by)s,
       %(deployed_by_token)s,
       coalesce(%(now)s, now()), %(allow_stranding)s, %(migration_map)s::jsonb
FROM charter.workflow_deployments
WHERE path = %(path)s
HAVING (array_agg(version ORDER BY revision DESC))[1] IS DISTINCT FROM %(version)s
RETURNING revision, deployed_at

-- current_deployment --
-- The deployment that is current at a path (its newest revision).
SELECT revision, deployed_at, deployed_by, deployed_by_token, allow_stranding,
       migration_map::text
FROM charter.workflow_deployments
WHERE path = %(path)s
ORDER BY revision DESC
LIMIT 1

-- list_workflows --
-- Each path's current deployment and how many revisions it has.
SELECT DISTINCT ON (path) path, revision, version, deployed_at, deployed_by, deployed_by_token,
       allow_stranding, migration_map::text
FROM charter.workflow_deployments
ORDER BY path, revision DESC

-- workflow_revisions --
-- Every deployment of a path, newest first.
SELECT path, revision, version, deployed_at, deployed_by, deployed_by_token,
       allow_stranding, migration_map::text
FROM charter.workflow_deployments
WHERE path = %(path)s
ORDER BY revision DESC

-- workflow_state_counts --
-- How many processes at a path are in each state, by the revision their last event was
-- decided under (the head event: its seq is the process's), newest revision first. The
-- states are ordered bytewise, whatever the database's collation.
SELECT e.workflow_revision, p.state, count(*)
FROM charter.processes p
JOIN charter.events e ON e.process_id = p.id AND e.seq = p.seq
WHERE p.workflow_path = %(path)s
GROUP BY e.workflow_revision, p.state
ORDER BY e.workflow_revision DESC, p.state COLLATE "C"

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
-- Scheduled actions a batch fires, as scheduled_work_for_firing reads one, held for this
-- transaction by the engine (hold_scheduled_v1: a row another transaction is changing
-- is not returned).
SELECT s.*, s.run_at <= coalesce(%(now)s::timestamptz, now()) AS due,
       (SELECT f.event_hash FROM charter.automation_firings f
        WHERE f.work_id = s.id AND f.occurrence = s.run_at) AS fired_event
FROM charter.hold_scheduled_v1(%(ids)s::uuid[]) s

-- batch_queue_work --
-- Queue rows a batch fires, as queue_work_for_firing reads one, held likewise.
SELECT q.*, true AS due,
       (SELECT f.event_hash FROM charter.automation_firings f
        WHERE f.work_id = q.id AND f.occurrence = q.queued_at) AS fired_event
FROM charter.hold_queue_v1(%(ids)s::uuid[]) q

-- apply_writes --
-- Every queued write of one or more events, in order, as one statement (migration 0012).
SELECT charter.apply_writes_v1(%(ops)s::jsonb)

-- send_hints --
-- Wake-up hints, sent after the commit of what they announce (engine/hints.py).
SELECT pg_notify(channel, payload)
FROM unnest(%(channels)s::text[], %(payloads)s::text[]) AS h(channel, payload)

-- insert_disclosures --
-- The personal values of one v2 event, beside it (migration 0022); sent after the event.
INSERT INTO charter.event_disclosures (event_hash, pointer, digest, disclosure)
SELECT %(event_hash)s, d.pointer, d.digest, d.disclosure
FROM jsonb_to_recordset(%(disclosures)s::jsonb) AS d(pointer text, digest text, disclosure text)

-- event_disclosures --
-- The disclosures of a process's events, present or erased, in event then pointer order.
SELECT d.event_hash, d.pointer, d.digest, d.disclosure, d.erased_by
FROM charter.event_disclosures d JOIN charter.events e ON e.hash = d.event_hash
WHERE e.process_id = %(process_id)s
ORDER BY e.seq, d.pointer

-- erase_disclosures --
-- A charter:erase event's values, changed from text to erased (migration 0022): the count.
SELECT charter.erase_disclosures(%(event_hash)s, %(targets)s::jsonb)

-- legal_hold --
-- Whether a process is under legal hold: the later of its charter:hold and charter:release.
SELECT action = 'charter:hold'
FROM charter.events
WHERE process_id = %(process_id)s AND action IN ('charter:hold', 'charter:release')
ORDER BY seq DESC
LIMIT 1
