-- archive_candidates --
-- The processes at a path whose retention ran out, with nothing holding them (0023).
SELECT process_id, seq, head_hash
FROM charter.archive_candidates(%(path)s, %(states)s::text[], %(before)s, %(limit)s)

-- archive_process --
-- Remove one process's rows and leave its tombstone; NULL, or why it stays.
SELECT charter.archive_process(%(id)s, %(head)s, %(seq)s, %(sha256)s, %(path)s, %(by)s)

-- tombstone --
-- An archived process's tombstone.
SELECT process_id, workflow_path, state, seq, head_hash, bundle_sha256, bundle_path,
       archived_at, archived_by
FROM charter.archived_processes
WHERE process_id = %(id)s

-- tombstones --
-- Archived processes, by id after a cursor, optionally of one workflow.
SELECT process_id, workflow_path, state, seq, head_hash, bundle_sha256, bundle_path,
       archived_at, archived_by
FROM charter.archived_processes
WHERE process_id > %(after)s
  AND (%(workflow)s::text IS NULL OR workflow_path = %(workflow)s::text)
ORDER BY process_id
LIMIT %(limit)s
