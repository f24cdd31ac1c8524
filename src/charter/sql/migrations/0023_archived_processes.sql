-- Archival of finished processes (docs/lifecycle.md, "Archival"): a process that has
-- rested long enough in a final state leaves the hot tables for a verified export bundle,
-- and a tombstone says where it went.
--
-- The append-only guards stay for everyone but `charter.archive_process`, a SECURITY
-- DEFINER function that removes one process's rows, and only while it runs: it sets
-- `charter.archiving` to the process id for its own transaction, and the guards let a
-- DELETE of that process's rows through. No component role holds DELETE on these tables,
-- so the setting opens nothing to them.

CREATE TABLE charter.archived_processes (
    process_id text PRIMARY KEY,
    workflow_path text NOT NULL,
    state text NOT NULL,
    seq integer NOT NULL CHECK (seq >= 1),
    head_hash text NOT NULL CHECK (head_hash ~ '^[0-9a-f]{64}$'),
    bundle_sha256 text NOT NULL CHECK (bundle_sha256 ~ '^[0-9a-f]{64}$'),
    -- Where the bundle was written, relative to the archive directory: <yyyy>/<mm>/<id>.json
    bundle_path text NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    archived_by text NOT NULL
);
CREATE INDEX archived_processes_workflow ON charter.archived_processes (workflow_path, process_id);

CREATE FUNCTION charter.archiving(p_process text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('charter.archiving', true), '') = p_process
$$;

-- A DELETE of an archived process's rows, while charter.archive_process runs; nothing else.
-- TG_ARGV[0] names the column that holds the row's process id.
CREATE FUNCTION charter.delete_only_archiving() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF charter.archiving(to_jsonb(OLD) ->> TG_ARGV[0]) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'CHA01',
        MESSAGE = format('%s rows are never deleted: a finished process leaves through '
                         'charter archive run', TG_TABLE_NAME);
END
$$;

DROP TRIGGER events_append_only ON charter.events;
CREATE TRIGGER events_no_update BEFORE UPDATE ON charter.events
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER events_no_delete BEFORE DELETE ON charter.events
    FOR EACH ROW EXECUTE FUNCTION charter.delete_only_archiving('process_id');

DROP TRIGGER automation_firings_append_only ON charter.automation_firings;
CREATE TRIGGER automation_firings_no_update BEFORE UPDATE ON charter.automation_firings
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER automation_firings_no_delete BEFORE DELETE ON charter.automation_firings
    FOR EACH ROW EXECUTE FUNCTION charter.delete_only_archiving('process_id');

DROP TRIGGER automation_queue_no_delete ON charter.automation_queue;
CREATE TRIGGER automation_queue_no_delete BEFORE DELETE ON charter.automation_queue
    FOR EACH ROW EXECUTE FUNCTION charter.delete_only_archiving('process_id');

DROP TRIGGER scheduled_actions_no_delete ON charter.scheduled_actions;
CREATE TRIGGER scheduled_actions_no_delete BEFORE DELETE ON charter.scheduled_actions
    FOR EACH ROW EXECUTE FUNCTION charter.delete_only_archiving('process_id');

CREATE OR REPLACE FUNCTION charter.guard_process_head() RETURNS trigger
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF charter.archiving(OLD.id) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'CHA01', MESSAGE = 'processes are never deleted';
    END IF;
    IF NEW.id <> OLD.id OR NEW.workflow_path <> OLD.workflow_path
       OR NEW.parent_id IS DISTINCT FROM OLD.parent_id
       OR NEW.parent_event_hash IS DISTINCT FROM OLD.parent_event_hash
       OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA04',
            MESSAGE = format('process %s: id, workflow, parent and created_at never change', OLD.id);
    END IF;
    IF NEW.seq <> OLD.seq OR NEW.head_hash IS DISTINCT FROM OLD.head_hash THEN
        IF NEW.seq <= OLD.seq OR NOT EXISTS (
            SELECT 1 FROM charter.events e
            WHERE e.process_id = NEW.id AND e.seq = NEW.seq AND e.hash = NEW.head_hash
        ) THEN
            RAISE EXCEPTION USING
                ERRCODE = 'CHA03',
                MESSAGE = format('process %s: the head must move forward onto its latest event', OLD.id);
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION charter.guard_disclosure() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM charter.events e
                   WHERE e.hash = OLD.event_hash AND charter.archiving(e.process_id)) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'CHA01',
            MESSAGE = 'event_disclosures rows are never deleted: erase them with charter:erase';
    END IF;
    IF NEW.event_hash <> OLD.event_hash OR NEW.pointer <> OLD.pointer
       OR NEW.digest <> OLD.digest THEN
        RAISE EXCEPTION USING ERRCODE = 'CHA04',
            MESSAGE = 'a disclosure''s event, pointer and digest never change';
    END IF;
    IF OLD.disclosure IS NULL OR NEW.disclosure IS NOT NULL OR NEW.erased_by IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CHA01',
            MESSAGE = 'a disclosure changes only once, from its text to erased';
    END IF;
    RETURN NEW;
END
$$;

-- Whether a process is under legal hold: the later of its charter:hold and charter:release.
CREATE FUNCTION charter.held(p_process text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((
        SELECT e.action = 'charter:hold' FROM charter.events e
        WHERE e.process_id = p_process AND e.action IN ('charter:hold', 'charter:release')
        ORDER BY e.seq DESC LIMIT 1
    ), false)
$$;

-- Why a process may not leave the hot tables now; NULL when it may. Its own row is
-- expected locked by the caller.
CREATE FUNCTION charter.archive_blocker(p_process text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM charter.processes c WHERE c.parent_id = p_process)
            THEN 'it has a child process'
        WHEN EXISTS (SELECT 1 FROM charter.scheduled_actions s
                     WHERE s.process_id = p_process AND s.status IN ('active', 'claimed'))
            THEN 'it has a live scheduled action'
        WHEN EXISTS (SELECT 1 FROM charter.automation_queue q
                     WHERE q.process_id = p_process AND q.status IN ('pending', 'claimed'))
            THEN 'it has a pending automatic action'
        WHEN charter.held(p_process) THEN 'it is under legal hold'
        WHEN EXISTS (SELECT 1 FROM charter.log_pending l WHERE l.process_id = p_process)
            THEN 'an event of it is not in the transparency log yet'
    END
$$;

-- Remove a finished process whose bundle was written and verified, leaving a tombstone.
-- NULL when it is gone; otherwise why it stays (moved on since the bundle, or blocked).
CREATE FUNCTION charter.archive_process(
    p_process text, p_head text, p_seq integer, p_bundle_sha256 text, p_bundle_path text,
    p_by text
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
DECLARE
    row charter.processes;
    blocker text;
BEGIN
    SELECT * INTO row FROM charter.processes WHERE id = p_process FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'there is no such process';
    END IF;
    IF row.head_hash IS DISTINCT FROM p_head OR row.seq <> p_seq THEN
        RETURN format('it moved on to seq %s since the bundle was written', row.seq);
    END IF;
    blocker := charter.archive_blocker(p_process);
    IF blocker IS NOT NULL THEN
        RETURN blocker;
    END IF;
    PERFORM set_config('charter.archiving', p_process, true);
    DELETE FROM charter.event_disclosures d USING charter.events e
        WHERE e.hash = d.event_hash AND e.process_id = p_process;
    DELETE FROM charter.automation_firings WHERE process_id = p_process;
    DELETE FROM charter.automation_queue WHERE process_id = p_process;
    DELETE FROM charter.scheduled_actions WHERE process_id = p_process;
    DELETE FROM charter.events WHERE process_id = p_process;
    DELETE FROM charter.processes WHERE id = p_process;
    INSERT INTO charter.archived_processes
        (process_id, workflow_path, state, seq, head_hash, bundle_sha256, bundle_path, archived_by)
    VALUES (p_process, row.workflow_path, row.state, row.seq, row.head_hash,
            p_bundle_sha256, p_bundle_path, p_by);
    PERFORM set_config('charter.archiving', '', true);
    RETURN NULL;
END
$$;

-- The processes at a path that may be archived: in one of `p_states`, their last event
-- before `p_rested_before`, nothing holding them back; oldest first.
CREATE FUNCTION charter.archive_candidates(
    p_path text, p_states text[], p_rested_before timestamptz, p_limit integer
) RETURNS TABLE (process_id text, seq integer, head_hash text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    SELECT p.id, p.seq, p.head_hash
    FROM charter.processes p
    WHERE p.workflow_path = p_path AND p.state = ANY (p_states) AND p.seq >= 1
      AND p.updated_at <= p_rested_before
      AND charter.archive_blocker(p.id) IS NULL
    ORDER BY p.updated_at, p.id
    LIMIT p_limit
$$;

-- A tombstone stays as it was written, until `charter archive restore` brings its process
-- back (charter.forget_tombstone, with the restored rows in the same transaction).
CREATE FUNCTION charter.guard_tombstone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND coalesce(current_setting('charter.restoring', true), '') = OLD.process_id THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'CHA01',
        MESSAGE = 'an archived process''s tombstone never changes: restore the process instead';
END
$$;
CREATE TRIGGER archived_processes_guard BEFORE UPDATE OR DELETE ON charter.archived_processes
    FOR EACH ROW EXECUTE FUNCTION charter.guard_tombstone();
CREATE TRIGGER archived_processes_no_truncate BEFORE TRUNCATE ON charter.archived_processes
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

REVOKE EXECUTE ON FUNCTION charter.archive_process(text, text, integer, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION charter.archive_process(text, text, integer, text, text, text) TO charter_engine;
REVOKE EXECUTE ON FUNCTION charter.archive_candidates(text, text[], timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION charter.archive_candidates(text, text[], timestamptz, integer)
    TO charter_engine, charter_reader;
REVOKE EXECUTE ON FUNCTION charter.delete_only_archiving() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.archiving(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.held(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.archive_blocker(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.guard_tombstone() FROM PUBLIC;
GRANT SELECT ON charter.archived_processes
    TO charter_engine, charter_reader, charter_worker, charter_sequencer;
