-- log_try_leader --
-- Try to become the one sequencer: a session advisory lock held for as long as the
-- dedicated connection lives (a standby retries; the lock frees when the leader dies).
SELECT pg_try_advisory_lock(hashtext('charter.log'))

-- log_enable_queue --
-- Switch the queue on (the first leader does; later calls queue nothing and return 0):
-- every event not yet logged or queued is queued first (migration 0016).
SELECT charter.enable_log_queue_v1()

-- log_pending_batch --
-- The oldest queued events, each with whether its events row is genuine: the row exists,
-- names the same process, seq and prev, and its hash recomputes from the envelope text.
SELECT p.event_hash, p.process_id, p.seq, p.prev_hash,
       coalesce(e.process_id = p.process_id AND e.seq = p.seq
                AND e.prev_hash IS NOT DISTINCT FROM p.prev_hash
                AND e.hash = encode(sha256(convert_to(e.envelope::text, 'UTF8')), 'hex'),
                false) AS genuine,
       extract(epoch FROM clock_timestamp() - p.queued_at)::float8 AS age_s
FROM charter.log_pending p
LEFT JOIN charter.events e ON e.hash = p.event_hash
ORDER BY p.queued_at, p.process_id, p.seq
LIMIT %(limit)s

-- log_db_size --
-- How many entries the database recorded as logged (max(idx) + 1).
SELECT coalesce(max(idx) + 1, 0) FROM charter.log_entries

-- log_events_by_hash --
-- The events of logged entries, by hash (reconciling after a crash).
SELECT hash, process_id, seq FROM charter.events WHERE hash = ANY (%(hashes)s)

-- log_record_entries --
-- Record logged entries (idx, event hash, process, seq), one row each. The arrays go in
-- binary (%b): the text format quotes every element through a regex in Python.
INSERT INTO charter.log_entries (idx, event_hash, process_id, seq)
SELECT * FROM unnest(%(idx)b::bigint[], %(hashes)b::text[], %(process_ids)b::text[],
                     %(seqs)b::integer[])

-- log_dequeue --
-- Remove logged (or already-logged, re-offered) events from the queue.
DELETE FROM charter.log_pending WHERE event_hash = ANY (%(hashes)b::text[])

-- log_record_checkpoint --
-- Record a signed checkpoint (a crash may make a restart record it a second time).
INSERT INTO charter.log_checkpoints (size, root, note, witnessed)
VALUES (%(size)s, %(root)s, %(note)s, %(witnessed)s)
ON CONFLICT (size) DO NOTHING

-- log_record_halt --
-- Say in the system log why the sequencer stopped.
INSERT INTO charter.system_log (level, kind, code, message, detail)
VALUES ('error', 'log.halted', %(code)s, %(message)s, %(detail)s)

-- log_pending_count --
-- How many events wait for the log, and the age of the oldest in seconds.
SELECT count(*), coalesce(extract(epoch FROM clock_timestamp() - min(queued_at)), 0)::float8
FROM charter.log_pending

-- log_chain_of --
-- One process's events as the log check needs them: seq, hash, when received.
SELECT seq, hash, received_at FROM charter.events WHERE process_id = %(process_id)s ORDER BY seq

-- log_chains --
-- Every process's events as the log check needs them, process by process.
SELECT process_id, seq, hash, received_at FROM charter.events ORDER BY process_id, seq

-- log_index_of --
-- The leaf index the sequencer recorded for an event (a cache: the route checks the
-- entry in the bundle and the proof is checked against the signed root).
SELECT idx FROM charter.log_entries WHERE event_hash = %(event_hash)s

-- log_checkpoint_note --
-- The signed note of the checkpoint of a given size (a cache: the reader checks it).
SELECT note FROM charter.log_checkpoints WHERE size = %(size)s

-- log_entries_of --
-- One process's recorded entries, newest seq first (a cache: the export checks each
-- against the entry bundle before proving it).
SELECT seq, event_hash, idx FROM charter.log_entries WHERE process_id = %(process_id)s
ORDER BY seq DESC
