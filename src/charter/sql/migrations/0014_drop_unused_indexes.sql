-- Indexes no query or invariant needs (docs/schema.md, "Every index, and what needs it").
-- Each costs an entry per row it covers and, once larger than a checkpoint interval
-- touches, a full-page image in the WAL for the first entry on each page: measured by
-- bench/growth.py at 1 M events, events_actor alone cost 0.57 full-page images per event.
--
-- events_actor: no query selects events by actor. It would serve the foreign key
-- events.actor -> actor_keys.public_key only when a key row is deleted or its public key
-- changed, and guard_actor_keys forbids both.
DROP INDEX charter.events_actor;
-- events_cause: it would serve the self-referencing foreign key only if an event were
-- deleted, which events_append_only forbids; children are found through
-- processes.parent_id (processes_parent).
DROP INDEX charter.events_cause;
-- automation_queue_pending: every claim orders by coalesce(not_before, queued_at), which
-- automation_queue_claimable serves; nothing reads queued_at alone for pending rows.
DROP INDEX charter.automation_queue_pending;
-- automation_queue_process: process_work's `process_id = …` is served by the unique
-- (process_id, action_name, queued_by_event_hash) index, whose leading column it is.
DROP INDEX charter.automation_queue_process;
