-- The log's tables no longer reference charter.events by foreign key, for their cost.
--
-- Each foreign-key check takes FOR KEY SHARE on the referenced event row: a row lock
-- written to the event's heap page and the WAL for every event, once in the commit path
-- (the queue row) and once more in the sequencer's batch (the entry row). Neither key
-- guards anything the sequencer does not check itself, more strictly:
--
-- - a queue row is logged only when `log_pending_batch` finds its events row, agreeing on
--   process, seq and prev, with a hash that recomputes from the envelope text; any other
--   row halts the log with `log_queue_forged` (tests/integration/test_log_queue_checks.py);
-- - an entry row is written only for a queue row that passed that check, by the one role
--   that may insert entries, in the transaction that dequeues it.
--
-- Deleting a logged event (a superuser with triggers off) is what the log exists to
-- reveal: `verify --log` reports it as `log_truncated` whether or not a key objected.
ALTER TABLE charter.log_pending DROP CONSTRAINT log_pending_event_hash_fkey;
ALTER TABLE charter.log_entries DROP CONSTRAINT log_entries_event_hash_fkey;
