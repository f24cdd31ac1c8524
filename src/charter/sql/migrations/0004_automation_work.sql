-- Durable automation work the engine materializes (docs/automation.md):
-- scheduled actions and the automatic-action queue, with provenance and leases.

CREATE TABLE charter.scheduled_actions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    schedule_id text NOT NULL CHECK (length(schedule_id) BETWEEN 1 AND 128),
    process_id text NOT NULL REFERENCES charter.processes (id),
    workflow_path text NOT NULL,
    action_name text NOT NULL,
    action_data jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(action_data) = 'object'),
    run_at timestamptz NOT NULL,
    -- After a transient failure the same occurrence waits until then; run_at (the
    -- occurrence, and the recurrence grid) stays as it was.
    not_before timestamptz,
    -- The `every` duration as written in the workflow (e.g. '1y'); NULL for one-shots.
    interval text,
    until_ts timestamptz,
    max_count integer CHECK (max_count >= 1),
    fire_count integer NOT NULL DEFAULT 0 CHECK (fire_count >= 0),
    status text NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'claimed', 'cancelled', 'exhausted', 'skipped', 'failed')),
    -- Provenance: the event that scheduled this row.
    created_event_hash text NOT NULL REFERENCES charter.events (hash),
    created_by_action text NOT NULL,
    created_by_actor text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz,
    cancelled_by_event_hash text REFERENCES charter.events (hash),
    cancel_reason text,
    -- Diagnostics written by the worker's bookkeeping functions.
    last_attempt_at timestamptz,
    last_attempt_result text
        CHECK (last_attempt_result IN ('accepted', 'skipped', 'failed', 'transient_error')),
    last_attempt_error text,
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_fired_at timestamptz,
    last_fired_event_hash text REFERENCES charter.events (hash),
    -- Lease: who holds the row, until when, under which token.
    claimed_by text,
    claimed_at timestamptz,
    lease_expires_at timestamptz,
    lease_token uuid,
    -- A claimed row holds a lease; a row cancelled while claimed keeps who held it.
    CONSTRAINT scheduled_actions_claim_has_lease CHECK (
        status <> 'claimed'
        OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL AND lease_token IS NOT NULL)
    ),
    CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL))
);
-- One live row per schedule id and process; finished rows are kept as history.
CREATE UNIQUE INDEX scheduled_actions_one_live
    ON charter.scheduled_actions (process_id, schedule_id) WHERE status IN ('active', 'claimed');
CREATE INDEX scheduled_actions_due
    ON charter.scheduled_actions ((coalesce(not_before, run_at))) WHERE status = 'active';
CREATE INDEX scheduled_actions_leases
    ON charter.scheduled_actions (lease_expires_at) WHERE status = 'claimed';
CREATE INDEX scheduled_actions_process ON charter.scheduled_actions (process_id);

CREATE TABLE charter.automation_queue (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    process_id text NOT NULL REFERENCES charter.processes (id),
    workflow_path text NOT NULL,
    action_name text NOT NULL,
    action_data jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(action_data) = 'object'),
    status text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'claimed', 'completed', 'skipped', 'failed')),
    reason text NOT NULL,
    available_state text,
    -- Provenance: the event after which the action became available.
    queued_by_event_hash text NOT NULL REFERENCES charter.events (hash),
    queued_by_action text NOT NULL,
    queued_by_actor text NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT now(),
    claimed_at timestamptz,
    -- After a transient failure the row waits until then before it is claimed again.
    not_before timestamptz,
    completed_at timestamptz,
    fired_event_hash text REFERENCES charter.events (hash),
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error text,
    last_attempt_at timestamptz,
    last_attempt_result text
        CHECK (last_attempt_result IN ('accepted', 'skipped', 'failed', 'transient_error')),
    claimed_by text,
    lease_expires_at timestamptz,
    lease_token uuid,
    -- A claimed row holds a lease; a row cancelled while claimed keeps who held it.
    CONSTRAINT automation_queue_claim_has_lease CHECK (
        status <> 'claimed'
        OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL AND lease_token IS NOT NULL)
    ),
    -- Deduplicated on (process, action, causing event).
    UNIQUE (process_id, action_name, queued_by_event_hash)
);
CREATE INDEX automation_queue_pending ON charter.automation_queue (queued_at) WHERE status = 'pending';
CREATE INDEX automation_queue_leases
    ON charter.automation_queue (lease_expires_at) WHERE status = 'claimed';
CREATE INDEX automation_queue_process ON charter.automation_queue (process_id);

-- Work rows are statused, never deleted (nothing is deleted, edited or reordered).
CREATE TRIGGER scheduled_actions_no_delete BEFORE DELETE ON charter.scheduled_actions
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER scheduled_actions_no_truncate BEFORE TRUNCATE ON charter.scheduled_actions
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER automation_queue_no_delete BEFORE DELETE ON charter.automation_queue
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER automation_queue_no_truncate BEFORE TRUNCATE ON charter.automation_queue
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();
