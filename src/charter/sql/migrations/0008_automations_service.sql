-- The automations service (docs/automations.md): automations with cron and webhook
-- triggers and one plan; the durable run ledger with leases and a step journal;
-- machines that authenticate with DPoP.

CREATE TABLE charter.automations (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Who owns it (the API token's principal); principals see only their own.
    principal text NOT NULL,
    -- The machine target that executes its runs.
    target text NOT NULL CHECK (target ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    enabled boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX automations_by_principal ON charter.automations (principal, created_at, id);

CREATE TABLE charter.schedule_triggers (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    automation_id uuid NOT NULL REFERENCES charter.automations (id) ON DELETE CASCADE,
    cron text NOT NULL CHECK (length(cron) BETWEEN 9 AND 200),
    timezone text NOT NULL CHECK (length(timezone) BETWEEN 1 AND 64),
    -- The next local occurrence, as an instant; admission advances it.
    next_run_at timestamptz NOT NULL,
    -- NULL: unbounded; otherwise occurrences left (0 = done).
    remaining_occurrences integer CHECK (remaining_occurrences >= 0),
    enabled boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedule_triggers_due ON charter.schedule_triggers (next_run_at)
    WHERE enabled AND (remaining_occurrences IS NULL OR remaining_occurrences > 0);
CREATE INDEX schedule_triggers_by_automation ON charter.schedule_triggers (automation_id);

CREATE TABLE charter.webhook_triggers (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    automation_id uuid NOT NULL REFERENCES charter.automations (id) ON DELETE CASCADE,
    source text NOT NULL CHECK (length(source) BETWEEN 1 AND 200),
    -- NULL matches every event of the source.
    event text CHECK (length(event) BETWEEN 1 AND 200),
    -- Write-only: the API never returns it and only the engine role may read it, to
    -- verify Standard Webhooks signatures.
    secret text NOT NULL CHECK (secret ~ '^whsec_[A-Za-z0-9+/=]{16,}$'),
    enabled boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_triggers_by_source ON charter.webhook_triggers (source, event);
CREATE INDEX webhook_triggers_by_automation ON charter.webhook_triggers (automation_id);

-- Zero or one plan per automation: {"version": 1, "steps": [...]} plus allowlist, limits.
CREATE TABLE charter.plans (
    automation_id uuid PRIMARY KEY REFERENCES charter.automations (id) ON DELETE CASCADE,
    version integer NOT NULL CHECK (version = 1),
    steps jsonb NOT NULL CHECK (jsonb_typeof(steps) = 'array' AND jsonb_array_length(steps) >= 1),
    allowlist jsonb,
    limits jsonb,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The durable run ledger: the offline queue. A run keeps an immutable snapshot of the
-- plan it was admitted with; history outlives its automation (no foreign key).
CREATE TABLE charter.runs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    automation_id uuid NOT NULL,
    trigger_id uuid,
    trigger_kind text NOT NULL CHECK (trigger_kind IN ('schedule', 'webhook', 'manual')),
    principal text NOT NULL,
    target text NOT NULL,
    status text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'completed', 'failed')),
    plan jsonb NOT NULL CHECK (jsonb_typeof(plan) = 'object'),
    input jsonb NOT NULL DEFAULT '{}',
    -- One run per trigger occurrence: 'cron:<trigger>:<instant>' or 'webhook:<trigger>:<id>'.
    dedupe_key text UNIQUE,
    scheduled_for timestamptz,
    lease_owner text,
    lease_token uuid,
    lease_expires_at timestamptz,
    retry_at timestamptz,
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    output jsonb,
    error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    CONSTRAINT runs_running_has_lease CHECK (
        status <> 'running'
        OR (lease_owner IS NOT NULL AND lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
    ),
    CONSTRAINT runs_finished_when_done CHECK (
        (status IN ('completed', 'failed')) = (finished_at IS NOT NULL)
    )
);
CREATE INDEX runs_claimable ON charter.runs (target, (coalesce(retry_at, created_at)))
    WHERE status = 'pending';
CREATE INDEX runs_by_principal ON charter.runs (principal, created_at, id);
CREATE INDEX runs_by_automation ON charter.runs (automation_id, created_at, id);
CREATE INDEX runs_leases ON charter.runs (lease_expires_at) WHERE status = 'running';

-- A run's identity and snapshot never change; finished runs never change at all.
CREATE FUNCTION charter.guard_run() RETURNS trigger
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
CREATE TRIGGER runs_guard BEFORE UPDATE OR DELETE ON charter.runs
    FOR EACH ROW EXECUTE FUNCTION charter.guard_run();
CREATE TRIGGER runs_no_truncate BEFORE TRUNCATE ON charter.runs
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

-- The step journal: one row per (run, step); a completed step is never invoked again.
CREATE TABLE charter.run_steps (
    run_id uuid NOT NULL REFERENCES charter.runs (id),
    step_id text NOT NULL CHECK (length(step_id) BETWEEN 1 AND 128),
    position integer NOT NULL CHECK (position >= 0),
    status text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    -- Stable per run-step pair: every retry of the step presents the same key.
    idempotency_key text NOT NULL,
    output jsonb,
    error text,
    attempts integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (run_id, step_id),
    UNIQUE (run_id, position),
    CHECK ((status = 'completed') = (output IS NOT NULL AND finished_at IS NOT NULL))
);

CREATE FUNCTION charter.guard_run_step() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION USING ERRCODE = 'CHA01', MESSAGE = 'the step journal is permanent';
    END IF;
    IF OLD.status = 'completed' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA04',
            MESSAGE = format('step %s of run %s is completed: it never runs again', OLD.step_id, OLD.run_id);
    END IF;
    IF NEW.run_id <> OLD.run_id OR NEW.step_id <> OLD.step_id OR NEW.position <> OLD.position
       OR NEW.idempotency_key <> OLD.idempotency_key THEN
        RAISE EXCEPTION USING ERRCODE = 'CHA04', MESSAGE = 'a journal row keeps its identity and key';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER run_steps_guard BEFORE UPDATE OR DELETE ON charter.run_steps
    FOR EACH ROW EXECUTE FUNCTION charter.guard_run_step();
CREATE TRIGGER run_steps_no_truncate BEFORE TRUNCATE ON charter.run_steps
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

-- Machines execute runs for a target; each proves possession of its key with DPoP.
CREATE TABLE charter.machines (
    id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    target text NOT NULL CHECK (target ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    principal text NOT NULL,
    -- RFC 7638 JWK thumbprint (base64url SHA-256) of the machine's public key.
    thumbprint text NOT NULL UNIQUE CHECK (thumbprint ~ '^[A-Za-z0-9_-]{43}$'),
    public_jwk jsonb NOT NULL CHECK (jsonb_typeof(public_jwk) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz
);
CREATE INDEX machines_by_target ON charter.machines (target);

-- DPoP proofs seen, so each `jti` is used once (RFC 9449 §11.1); pruned after expiry.
CREATE TABLE charter.dpop_proofs (
    jti text PRIMARY KEY CHECK (length(jti) BETWEEN 16 AND 200),
    machine_id text NOT NULL,
    seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX dpop_proofs_expiry ON charter.dpop_proofs (expires_at);

REVOKE ALL ON charter.automations, charter.schedule_triggers, charter.webhook_triggers,
    charter.plans, charter.runs, charter.run_steps, charter.machines, charter.dpop_proofs
FROM PUBLIC;

-- The API (engine role) administers automations and machines, admits and leases runs.
GRANT SELECT, INSERT, UPDATE, DELETE ON charter.automations, charter.schedule_triggers,
    charter.webhook_triggers, charter.plans TO charter_engine;
GRANT SELECT, INSERT, UPDATE ON charter.runs, charter.run_steps, charter.machines TO charter_engine;
GRANT SELECT, INSERT, DELETE ON charter.dpop_proofs TO charter_engine;

-- Readers see configuration and history, never webhook secrets.
GRANT SELECT ON charter.automations, charter.schedule_triggers, charter.plans, charter.runs,
    charter.run_steps, charter.machines TO charter_reader, charter_worker;
GRANT SELECT (id, automation_id, source, event, enabled, created_at, updated_at)
    ON charter.webhook_triggers TO charter_reader, charter_worker;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA charter FROM PUBLIC;
