-- plan_state_counts --
-- How many processes of a workflow path are in each state.
SELECT state, count(*)
FROM charter.processes
WHERE workflow_path = %(path)s
GROUP BY state

-- plan_processes_in_states --
-- A page of the processes of a path in the given states, by id, after a cursor.
SELECT id, state
FROM charter.processes
WHERE workflow_path = %(path)s
  AND state = ANY (%(states)s::text[])
  AND id > %(after)s
ORDER BY id
LIMIT %(limit)s

-- plan_live_work_counts --
-- The live work of a path's processes by kind, action and the process's state: active or
-- claimed schedules, pending or claimed queue rows (what would still fire).
SELECT 'scheduled' AS kind, s.action_name, p.state, count(*)
FROM charter.scheduled_actions s
JOIN charter.processes p ON p.id = s.process_id
WHERE s.workflow_path = %(path)s AND s.status IN ('active', 'claimed')
GROUP BY s.action_name, p.state
UNION ALL
SELECT 'queue', q.action_name, p.state, count(*)
FROM charter.automation_queue q
JOIN charter.processes p ON p.id = q.process_id
WHERE q.workflow_path = %(path)s AND q.status IN ('pending', 'claimed')
GROUP BY q.action_name, p.state

-- plan_live_work_page --
-- A page of the live work whose (kind, action, process state) is one of the given
-- triples, by process id then work id, after a cursor.
WITH chosen AS (
    SELECT * FROM unnest(%(kinds)s::text[], %(actions)s::text[], %(states)s::text[])
        AS c(kind, action_name, state)
), work AS (
    SELECT 'scheduled' AS kind, s.id::text AS work_id, s.process_id, s.action_name,
           s.schedule_id, p.state
    FROM charter.scheduled_actions s
    JOIN charter.processes p ON p.id = s.process_id
    WHERE s.workflow_path = %(path)s AND s.status IN ('active', 'claimed')
    UNION ALL
    SELECT 'queue', q.id::text, q.process_id, q.action_name, NULL, p.state
    FROM charter.automation_queue q
    JOIN charter.processes p ON p.id = q.process_id
    WHERE q.workflow_path = %(path)s AND q.status IN ('pending', 'claimed')
)
SELECT w.kind, w.work_id, w.process_id, w.action_name, w.schedule_id, w.state
FROM work w
JOIN chosen c USING (kind, action_name, state)
WHERE (w.process_id, w.work_id) > (%(after_process)s, %(after_work)s)
ORDER BY w.process_id, w.work_id
LIMIT %(limit)s

-- plan_event_pairs --
-- Each (workflow version, action) the events of a path's processes were decided under.
SELECT DISTINCT workflow_version, action
FROM charter.events
WHERE workflow_path = %(path)s

-- plan_changed_spans --
-- For each process of a path with an event of the given (version, action) pairs: the
-- first such event (seq and action), the last one's seq, and whether any of them is of a
-- pair marked as reshaping.
SELECT e.process_id,
       min(e.seq),
       (array_agg(e.action ORDER BY e.seq))[1],
       max(e.seq),
       bool_or(c.reshapes)
FROM charter.events e
JOIN unnest(%(versions)s::text[], %(actions)s::text[], %(reshapes)s::boolean[])
  AS c(workflow_version, action, reshapes)
  USING (workflow_version, action)
WHERE e.workflow_path = %(path)s
GROUP BY e.process_id
ORDER BY e.process_id

-- plan_histories --
-- The events of the given processes up to the given seq of each, in seq order, with what
-- a replay needs, and each process's parent.
SELECT e.process_id, p.parent_id, e.seq, e.kind, e.hash, e.envelope::text, e.actor_id,
       e.actor, e.actor_roles
FROM unnest(%(ids)s::text[], %(upto)s::integer[]) AS u(id, upto)
JOIN charter.processes p ON p.id = u.id
JOIN charter.events e ON e.process_id = u.id AND e.seq <= u.upto
ORDER BY e.process_id, e.seq

-- plan_definitions --
-- The definitions of the given versions, as JSON text.
SELECT version, definition::text
FROM charter.workflow_definitions
WHERE version = ANY (%(versions)s::text[])

-- plan_snapshot --
-- The first statement of a plan's own transaction: every read sees one snapshot.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY
