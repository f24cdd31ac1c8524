-- begin_snapshot --
-- The first statement of a verification read: one consistent, read-only snapshot, so a
-- process row and its events are seen as of the same commit.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- verification_events --
-- Every column of a process's events in seq order, each with its exact envelope text.
SELECT process_id, seq, hash, prev_hash, kind, envelope::text, signature, actor, actor_id,
       actor_roles, action, workflow_path, workflow_version, cause_hash, received_at,
       workflow_revision
FROM charter.events
WHERE process_id = %(process_id)s
ORDER BY seq

-- verification_events_by_hash --
-- Events by hash (the causes of spawn geneses), with every column.
SELECT process_id, seq, hash, prev_hash, kind, envelope::text, signature, actor, actor_id,
       actor_roles, action, workflow_path, workflow_version, cause_hash, received_at,
       workflow_revision
FROM charter.events
WHERE hash = ANY (%(hashes)s)

-- verification_definitions --
-- Workflow definitions by version, as their exact canonical text.
SELECT version, definition::text
FROM charter.workflow_definitions
WHERE version = ANY (%(versions)s)

-- all_process_ids --
-- Every process id, oldest first (what `charter verify --all` walks).
SELECT id
FROM charter.processes
ORDER BY created_at, id

-- verification_actor_keys --
-- Every key an actor holds or held, oldest first (retired keys still verify what they signed).
SELECT public_key, added_at, retired_at
FROM charter.actor_keys
WHERE actor_id = %(actor_id)s
ORDER BY added_at, public_key

-- personal_lint_events --
-- One page of the events of the processes at a path whose action is one of `actions`,
-- in (process_id, seq) order after the given pair (the events primary key keeps each
-- page one index range), with the exact text of each envelope's `input`.
SELECT e.process_id, e.seq, e.action, e.hash, (e.envelope -> 'input')::text
FROM charter.events e
JOIN charter.processes p ON p.id = e.process_id
WHERE p.workflow_path = %(path)s
  AND e.action = ANY (%(actions)s)
  AND (e.process_id, e.seq) > (%(after_process)s, %(after_seq)s)
ORDER BY e.process_id, e.seq
LIMIT %(limit)s
