-- Governed migration (`charter:migrate`, docs/dsl.md): a migration cancels the queued
-- automatic actions a new definition no longer has, recorded as a cancelled schedule is —
-- its status, when, by which event and why — so the queue gains the same columns.

ALTER TABLE charter.automation_queue
    ADD COLUMN cancelled_at timestamptz,
    ADD COLUMN cancelled_by_event_hash text REFERENCES charter.events (hash),
    ADD COLUMN cancel_reason text;

ALTER TABLE charter.automation_queue DROP CONSTRAINT automation_queue_status_check;
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_status_check
    CHECK (status IN ('pending', 'claimed', 'completed', 'skipped', 'failed', 'cancelled'));
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_cancelled_when
    CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL));

-- The engine cancels queue rows as it cancels schedules; nothing else of a row changes.
GRANT UPDATE (status, cancelled_at, cancelled_by_event_hash, cancel_reason)
    ON charter.automation_queue TO charter_engine;
