-- Traces (docs/operations.md): a run carries the W3C trace context of the span that admitted it
-- (a webhook delivery's request, a manual trigger's, a cron admission's new trace), so
-- the machine's step spans continue that trace. NULL when tracing was off at admission.
ALTER TABLE charter.runs ADD COLUMN traceparent text
    CONSTRAINT runs_traceparent_form
    CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');

-- Part of the run's identity, like its trigger: set at admission, never changed.
CREATE OR REPLACE FUNCTION charter.guard_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION USING ERRCODE = 'CHA01', MESSAGE = 'runs are permanent history';
    END IF;
    IF NEW.id <> OLD.id OR NEW.automation_id <> OLD.automation_id
       OR NEW.trigger_id IS DISTINCT FROM OLD.trigger_id OR NEW.trigger_kind <> OLD.trigger_kind
       OR NEW.principal <> OLD.principal OR NEW.target <> OLD.target
       OR NEW.plan <> OLD.plan OR NEW.input <> OLD.input
       OR NEW.dedupe_key IS DISTINCT FROM OLD.dedupe_key
       OR NEW.scheduled_for IS DISTINCT FROM OLD.scheduled_for
       OR NEW.traceparent IS DISTINCT FROM OLD.traceparent
       OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA04',
            MESSAGE = format('run %s: its plan snapshot and identity are immutable', OLD.id);
    END IF;
    IF OLD.status IN ('completed', 'failed') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA04', MESSAGE = format('run %s is %s: finished runs never change', OLD.id, OLD.status);
    END IF;
    RETURN NEW;
END
$$;
