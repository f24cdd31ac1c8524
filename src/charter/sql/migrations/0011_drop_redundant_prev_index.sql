-- UNIQUE (process_id, prev_hash) is redundant (a constraint is kept only
-- where a test shows it is needed; tests/integration/test_triggers.py shows it is not). Two events of one
-- process naming the same predecessor would need the same seq: the chain trigger lets
-- an event in only at head seq + 1 with prev = the head, the head guard ties the head's
-- seq to the event it names, and hashes are unique, so a second event with that prev
-- gets that same seq, and the primary key (process_id, seq) refuses it — racing
-- transactions included. The index was the largest of the events table (random inserts
-- into a 64-character key for every event); verification still finds a fork made with
-- the triggers switched off.
ALTER TABLE charter.events DROP CONSTRAINT events_process_id_prev_hash_key;
