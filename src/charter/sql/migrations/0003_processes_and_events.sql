-- Processes, their hash-chained events, and the system log (docs/wire-format.md).

CREATE TABLE charter.processes (
    id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    workflow_path text NOT NULL,
    state text NOT NULL,
    data jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(data) = 'object'),
    -- The head: hash and seq of the latest event; a process row is written first
    -- (seq 0, no head) and advanced by each event in the same transaction.
    head_hash text CHECK (head_hash ~ '^[0-9a-f]{64}$'),
    seq integer NOT NULL DEFAULT 0 CHECK (seq >= 0),
    parent_id text REFERENCES charter.processes (id),
    parent_event_hash text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((seq = 0) = (head_hash IS NULL)),
    CHECK ((parent_id IS NULL) = (parent_event_hash IS NULL))
);
CREATE INDEX processes_parent ON charter.processes (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX processes_workflow ON charter.processes (workflow_path);

-- `envelope` is the exact RFC 8785 text that was signed (json keeps text verbatim,
-- jsonb would not), so `hash` is checked against it by the database itself.
CREATE TABLE charter.events (
    process_id text NOT NULL REFERENCES charter.processes (id),
    seq integer NOT NULL CHECK (seq >= 1),
    hash text NOT NULL UNIQUE CHECK (hash ~ '^[0-9a-f]{64}$'),
    prev_hash text CHECK (prev_hash ~ '^[0-9a-f]{64}$'),
    kind text NOT NULL CHECK (kind IN ('action', 'spawn')),
    envelope json NOT NULL,
    signature text CHECK (signature ~ '^[0-9a-f]{128}$'),
    actor text NOT NULL REFERENCES charter.actor_keys (public_key),
    -- Who the key belonged to and the roles it held when the engine decided: the
    -- context a replay needs to re-check the rules in force at decision time.
    actor_id text NOT NULL,
    actor_roles text[] NOT NULL,
    action text NOT NULL,
    workflow_path text NOT NULL,
    workflow_version text NOT NULL REFERENCES charter.workflow_definitions (version),
    cause_hash text REFERENCES charter.events (hash),
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (process_id, seq),
    -- Races are decided by constraints: one event per position, one child per parent hash.
    UNIQUE (process_id, prev_hash),
    CONSTRAINT hash_is_envelope_hash
        CHECK (hash = encode(sha256(convert_to(envelope::text, 'UTF8')), 'hex')),
    CHECK ((seq = 1) = (prev_hash IS NULL)),
    -- Only a spawn genesis is unsigned, and it always names its cause.
    CHECK ((kind = 'spawn') = (signature IS NULL)),
    CHECK ((kind = 'spawn') = (cause_hash IS NOT NULL)),
    CHECK (kind = 'action' OR seq = 1)
);
CREATE INDEX events_cause ON charter.events (cause_hash) WHERE cause_hash IS NOT NULL;
CREATE INDEX events_actor ON charter.events (actor);

ALTER TABLE charter.processes
    ADD CONSTRAINT processes_parent_event FOREIGN KEY (parent_event_hash)
    REFERENCES charter.events (hash) DEFERRABLE INITIALLY DEFERRED;

-- An event must extend its process head exactly: next seq, prev = current head.
-- Custom plans: a generic plan cached while the tables were empty would keep
-- scanning them sequentially as they grow (seen on freshly created databases).
CREATE FUNCTION charter.event_extends_head() RETURNS trigger
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    head_seq integer;
    head text;
BEGIN
    SELECT p.seq, p.head_hash INTO head_seq, head
    FROM charter.processes p WHERE p.id = NEW.process_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA02',
            MESSAGE = format('event for unknown process %s', NEW.process_id);
    END IF;
    IF NEW.seq <> head_seq + 1 OR NEW.prev_hash IS DISTINCT FROM head THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA02',
            MESSAGE = format(
                'event %s of process %s does not extend its head (head seq %s, hash %s)',
                NEW.seq, NEW.process_id, head_seq, coalesce(head, 'none')
            );
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER events_extend_head BEFORE INSERT ON charter.events
    FOR EACH ROW EXECUTE FUNCTION charter.event_extends_head();
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON charter.events
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON charter.events
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

-- A process head only moves forward, onto an event that exists; identity is fixed.
CREATE FUNCTION charter.guard_process_head() RETURNS trigger
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
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
CREATE TRIGGER processes_guard BEFORE UPDATE OR DELETE ON charter.processes
    FOR EACH ROW EXECUTE FUNCTION charter.guard_process_head();
CREATE TRIGGER processes_no_truncate BEFORE TRUNCATE ON charter.processes
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

-- Diagnostics for operators and auditors: accepted and rejected events, worker
-- attempts. Append-only like events; not process state.
CREATE TABLE charter.system_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    level text NOT NULL DEFAULT 'info' CHECK (level IN ('info', 'warning', 'error')),
    kind text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_.]*$'),
    code text,
    process_id text,
    actor text,
    action text,
    event_hash text,
    message text NOT NULL DEFAULT '',
    detail jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object')
);
CREATE INDEX system_log_process ON charter.system_log (process_id, id) WHERE process_id IS NOT NULL;
CREATE INDEX system_log_at ON charter.system_log (at);

CREATE TRIGGER system_log_append_only BEFORE UPDATE OR DELETE ON charter.system_log
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER system_log_no_truncate BEFORE TRUNCATE ON charter.system_log
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();
