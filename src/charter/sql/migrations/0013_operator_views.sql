-- The operator views (docs/operator.md): indexes for the newest-first process list and hints
-- for the live stream.

-- GET /v1/processes pages newest first by (updated_at, id). Without this index a page of
-- 100,000 processes sorts them all. It costs the engine its HOT updates of process rows
-- (updated_at changes with every event): bench/operator_api.py measures what that costs.
CREATE INDEX processes_recent ON charter.processes (updated_at, id);

-- The workflow filter pages in the same order; this replaces processes_workflow, whose
-- every use (equality on workflow_path) this index serves as well.
CREATE INDEX processes_workflow_recent ON charter.processes (workflow_path, updated_at, id);
DROP INDEX charter.processes_workflow;

-- `q` (id prefix) and the CLI's unique-prefix resolution: LIKE 'prefix%' can use a
-- btree only with pattern operators under a non-C collation.
CREATE INDEX processes_id_prefix ON charter.processes (id text_pattern_ops);

-- The global timer and queue views page by (time, id) with an optional status filter.
CREATE INDEX scheduled_actions_by_time ON charter.scheduled_actions (run_at, id);
CREATE INDEX automation_queue_by_time ON charter.automation_queue (queued_at, id);

-- Run changes as hints for GET /v1/stream: a run changes status a few times in its
-- life, so one NOTIFY per status change is cheap. Ids only (docs/architecture.md); the
-- principal lets the stream show a run only to its owner.
CREATE FUNCTION charter.notify_run_changed_v1() RETURNS trigger
LANGUAGE plpgsql SET search_path = charter, pg_temp AS $$
BEGIN
    PERFORM pg_notify('charter_runs', json_build_object(
        'id', NEW.id, 'automation_id', NEW.automation_id, 'status', NEW.status,
        'principal', NEW.principal)::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER runs_changed AFTER INSERT OR UPDATE OF status ON charter.runs
FOR EACH ROW EXECUTE FUNCTION charter.notify_run_changed_v1();

-- Work rows that fail or record an error: the engine already hints new and cancelled
-- rows, and a fired row appends an event; a failure is the one change an operator
-- would not see. Only the (rare) error path notifies, so the worker's claims and
-- successes stay free of NOTIFY's commit lock.
CREATE FUNCTION charter.notify_work_failed_v1() RETURNS trigger
LANGUAGE plpgsql SET search_path = charter, pg_temp AS $$
BEGIN
    PERFORM pg_notify('charter_work_failed', json_build_object(
        'kind', CASE TG_TABLE_NAME WHEN 'scheduled_actions' THEN 'scheduled_action'
                                   ELSE 'auto_action' END,
        'id', NEW.id, 'process_id', NEW.process_id, 'workflow_path', NEW.workflow_path,
        'action_name', NEW.action_name, 'status', NEW.status)::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER scheduled_actions_failed AFTER UPDATE ON charter.scheduled_actions
FOR EACH ROW
WHEN (NEW.last_attempt_result IN ('failed', 'transient_error')
      AND NEW.last_attempt_at IS DISTINCT FROM OLD.last_attempt_at)
EXECUTE FUNCTION charter.notify_work_failed_v1();
CREATE TRIGGER automation_queue_failed AFTER UPDATE ON charter.automation_queue
FOR EACH ROW
WHEN (NEW.last_attempt_result IN ('failed', 'transient_error')
      AND NEW.last_attempt_at IS DISTINCT FROM OLD.last_attempt_at)
EXECUTE FUNCTION charter.notify_work_failed_v1();

-- Trigger functions run whoever fires the trigger; nobody calls them directly.
REVOKE EXECUTE ON FUNCTION charter.notify_run_changed_v1() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.notify_work_failed_v1() FROM PUBLIC;
