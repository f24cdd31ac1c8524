-- The transparency log's database side (docs/transparency-log.md).
-- Every accepted event is queued for the sequencer in the transaction that accepts it;
-- the sequencer appends it to the log files (the truth) and records what it logged here
-- (a cache: verifiers never read these tables).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'charter_sequencer') THEN
        BEGIN
            CREATE ROLE charter_sequencer NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT charter_sequencer TO %I', current_user);
    END IF;
END
$$;
GRANT USAGE ON SCHEMA charter TO charter_sequencer;

-- The queue: one small row per accepted event, deleted once the event is logged. A row
-- stays until it is logged, so a late commit is never skipped (no cursor, no xid horizon).
CREATE TABLE charter.log_pending (
    event_hash text PRIMARY KEY REFERENCES charter.events (hash),
    process_id text NOT NULL,
    seq integer NOT NULL,
    prev_hash text,
    -- The insert's wall time, not the transaction's: event n+1 of a process is inserted
    -- only after n's transaction committed, so per-process order follows this column.
    queued_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX log_pending_order ON charter.log_pending (queued_at, process_id, seq);
-- Rows are short-lived: vacuum the churn early.
ALTER TABLE charter.log_pending SET (autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000);

-- The queue fills only once a log exists: a deployment without one must not grow a table
-- no one drains. The sequencer switches it on when it first leads
-- (enable_log_queue_v1); its one row says since when.
CREATE TABLE charter.log_queue_on (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    since timestamptz NOT NULL DEFAULT now()
);

-- Filled by a statement trigger on events, so every path that accepts events (one event
-- or apply_writes_v1's batches) queues them with one INSERT ... SELECT per statement.
-- Each statement reads the switch afresh (READ COMMITTED), so an insert that waited for
-- enable_log_queue_v1's lock sees it on.
CREATE FUNCTION charter.queue_logged_events_v1() RETURNS trigger
LANGUAGE plpgsql SET search_path = charter, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM charter.log_queue_on) THEN
        INSERT INTO charter.log_pending (event_hash, process_id, seq, prev_hash)
        SELECT hash, process_id, seq, prev_hash FROM accepted;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_queue_for_log AFTER INSERT ON charter.events
    REFERENCING NEW TABLE AS accepted
    FOR EACH STATEMENT EXECUTE FUNCTION charter.queue_logged_events_v1();

-- Switch the queue on (once; later calls return 0): every event accepted so far that is
-- neither logged nor queued is queued, in received order, so the log holds every process
-- from seq 1 whenever it is switched on. The SHARE lock waits for transactions that are
-- inserting events and holds new inserts until this commits: none falls between the
-- backfill and the switch.
CREATE FUNCTION charter.enable_log_queue_v1() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
DECLARE
    v_queued bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM charter.log_queue_on) THEN
        RETURN 0;
    END IF;
    LOCK TABLE charter.events IN SHARE MODE;
    LOCK TABLE charter.log_queue_on IN EXCLUSIVE MODE;  -- two first leaders: one backfills
    IF EXISTS (SELECT 1 FROM charter.log_queue_on) THEN
        RETURN 0;
    END IF;
    INSERT INTO charter.log_pending (event_hash, process_id, seq, prev_hash, queued_at)
    SELECT e.hash, e.process_id, e.seq, e.prev_hash, e.received_at
    FROM charter.events e
    WHERE NOT EXISTS (SELECT 1 FROM charter.log_entries l WHERE l.event_hash = e.hash)
      AND NOT EXISTS (SELECT 1 FROM charter.log_pending q WHERE q.event_hash = e.hash);
    GET DIAGNOSTICS v_queued = ROW_COUNT;
    INSERT INTO charter.log_queue_on DEFAULT VALUES;
    RETURN v_queued;
END
$$;

-- What the sequencer logged: leaf index → event (a cache of the entry bundles).
CREATE TABLE charter.log_entries (
    idx bigint PRIMARY KEY CHECK (idx >= 0),
    event_hash text NOT NULL UNIQUE REFERENCES charter.events (hash),
    process_id text NOT NULL,
    seq integer NOT NULL CHECK (seq >= 1),
    UNIQUE (process_id, seq)
);

-- Every checkpoint the sequencer signed: the log state (size, root, note) as of each batch.
CREATE TABLE charter.log_checkpoints (
    size bigint PRIMARY KEY CHECK (size >= 0),
    root text NOT NULL CHECK (root ~ '^[0-9a-f]{64}$'),
    note text NOT NULL,
    witnessed boolean NOT NULL,
    signed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER log_entries_append_only BEFORE UPDATE OR DELETE ON charter.log_entries
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER log_entries_no_truncate BEFORE TRUNCATE ON charter.log_entries
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER log_checkpoints_append_only BEFORE UPDATE OR DELETE ON charter.log_checkpoints
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER log_checkpoints_no_truncate BEFORE TRUNCATE ON charter.log_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER log_pending_no_truncate BEFORE TRUNCATE ON charter.log_pending
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

REVOKE ALL ON charter.log_pending, charter.log_entries, charter.log_checkpoints,
    charter.log_queue_on FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.queue_logged_events_v1() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.enable_log_queue_v1() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION charter.enable_log_queue_v1() TO charter_sequencer;
-- No one changes the switch by hand: only the function above turns it on.
CREATE TRIGGER log_queue_on_forever BEFORE UPDATE OR DELETE ON charter.log_queue_on
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER log_queue_on_no_truncate BEFORE TRUNCATE ON charter.log_queue_on
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

-- The engine only queues (through its inserts of events); everyone reads.
GRANT INSERT ON charter.log_pending TO charter_engine;
GRANT SELECT ON charter.log_pending, charter.log_entries, charter.log_checkpoints,
    charter.log_queue_on TO charter_engine, charter_worker, charter_reader, charter_sequencer;
-- The sequencer reads what it checks, dequeues what it logged, records the log and its halts.
GRANT SELECT ON charter.events, charter.processes, charter.schema_migrations TO charter_sequencer;
GRANT DELETE ON charter.log_pending TO charter_sequencer;
GRANT INSERT ON charter.log_entries, charter.log_checkpoints, charter.system_log
    TO charter_sequencer;

-- The log's read scope: GET /v1/log/ (unless CHARTER_LOG_PUBLIC=1).
ALTER TABLE charter.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_scopes_check CHECK (
    cardinality(scopes) >= 1
    AND scopes <@ ARRAY[
        'automations:read', 'automations:write', 'runs:read', 'runs:execute',
        'processes:read', 'workflows:write', 'actors:write', 'log:read', '*'
    ]::text[]
);
