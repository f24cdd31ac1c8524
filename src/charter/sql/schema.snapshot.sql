-- Charter schema snapshot, rendered from the catalogs by `charter db schema`.
-- Do not edit: tests/migration checks that migrating from zero reproduces it.

-- schema charter: USAGE TO charter_engine, USAGE TO charter_reader, USAGE TO charter_sequencer, USAGE TO charter_worker


CREATE TABLE charter.actor_keys (
    public_key text NOT NULL,
    actor_id text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    retired_at timestamp with time zone
);
ALTER TABLE charter.actor_keys ADD CONSTRAINT actor_keys_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES actors(id);
ALTER TABLE charter.actor_keys ADD CONSTRAINT actor_keys_check CHECK (((retired_at IS NULL) OR (retired_at >= added_at)));
ALTER TABLE charter.actor_keys ADD CONSTRAINT actor_keys_pkey PRIMARY KEY (public_key);
ALTER TABLE charter.actor_keys ADD CONSTRAINT actor_keys_public_key_check CHECK ((public_key ~ '^[0-9a-f]{64}$'::text));
CREATE UNIQUE INDEX actor_keys_one_active ON charter.actor_keys USING btree (actor_id) WHERE (retired_at IS NULL);
CREATE TRIGGER actor_keys_guard BEFORE DELETE OR UPDATE ON charter.actor_keys FOR EACH ROW EXECUTE FUNCTION guard_actor_keys();
CREATE TRIGGER actor_keys_no_truncate BEFORE TRUNCATE ON charter.actor_keys FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.actor_keys TO charter_engine;
GRANT SELECT ON charter.actor_keys TO charter_engine;
GRANT SELECT ON charter.actor_keys TO charter_reader;
GRANT SELECT ON charter.actor_keys TO charter_worker;
GRANT UPDATE (retired_at) ON charter.actor_keys TO charter_engine;

CREATE TABLE charter.actors (
    id text NOT NULL,
    roles text[] DEFAULT '{}'::text[] NOT NULL,
    disabled_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.actors ADD CONSTRAINT actors_id_check CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text));
ALTER TABLE charter.actors ADD CONSTRAINT actors_pkey PRIMARY KEY (id);
ALTER TABLE charter.actors ADD CONSTRAINT actors_roles_check CHECK ((array_position(roles, NULL::text) IS NULL));
ALTER TABLE charter.actors ADD CONSTRAINT automation_actor_roles CHECK (((id <> 'automation'::text) OR (roles = ARRAY['AUTOMATION'::text])));
ALTER TABLE charter.actors ADD CONSTRAINT automation_role_reserved CHECK (((id = 'automation'::text) OR (NOT ('AUTOMATION'::text = ANY (roles)))));
GRANT INSERT ON charter.actors TO charter_engine;
GRANT SELECT ON charter.actors TO charter_engine;
GRANT SELECT ON charter.actors TO charter_reader;
GRANT SELECT ON charter.actors TO charter_worker;
GRANT UPDATE (roles, disabled_at, updated_at) ON charter.actors TO charter_engine;

CREATE TABLE charter.api_tokens (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    principal text NOT NULL,
    token_hash text NOT NULL,
    scopes text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone
);
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_name_check CHECK ((length(name) <= 200));
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_principal_check CHECK ((principal ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text));
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_scopes_check CHECK (((cardinality(scopes) >= 1) AND (scopes <@ ARRAY['automations:read'::text, 'automations:write'::text, 'runs:read'::text, 'runs:execute'::text, 'processes:read'::text, 'personal:read'::text, 'workflows:write'::text, 'actors:write'::text, 'log:read'::text, '*'::text])));
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_token_hash_check CHECK ((token_hash ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash);
GRANT INSERT ON charter.api_tokens TO charter_engine;
GRANT SELECT ON charter.api_tokens TO charter_engine;
GRANT UPDATE (revoked_at) ON charter.api_tokens TO charter_engine;

CREATE TABLE charter.archived_processes (
    process_id text NOT NULL,
    workflow_path text NOT NULL,
    state text NOT NULL,
    seq integer NOT NULL,
    head_hash text NOT NULL,
    bundle_sha256 text NOT NULL,
    bundle_path text NOT NULL,
    archived_at timestamp with time zone DEFAULT now() NOT NULL,
    archived_by text NOT NULL
);
ALTER TABLE charter.archived_processes ADD CONSTRAINT archived_processes_bundle_sha256_check CHECK ((bundle_sha256 ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.archived_processes ADD CONSTRAINT archived_processes_head_hash_check CHECK ((head_hash ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.archived_processes ADD CONSTRAINT archived_processes_pkey PRIMARY KEY (process_id);
ALTER TABLE charter.archived_processes ADD CONSTRAINT archived_processes_seq_check CHECK ((seq >= 1));
CREATE INDEX archived_processes_workflow ON charter.archived_processes USING btree (workflow_path, process_id);
CREATE TRIGGER archived_processes_guard BEFORE DELETE OR UPDATE ON charter.archived_processes FOR EACH ROW EXECUTE FUNCTION guard_tombstone();
CREATE TRIGGER archived_processes_no_truncate BEFORE TRUNCATE ON charter.archived_processes FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT SELECT ON charter.archived_processes TO charter_engine;
GRANT SELECT ON charter.archived_processes TO charter_reader;
GRANT SELECT ON charter.archived_processes TO charter_sequencer;
GRANT SELECT ON charter.archived_processes TO charter_worker;

CREATE TABLE charter.automation_firings (
    work_id uuid NOT NULL,
    kind text NOT NULL,
    occurrence timestamp with time zone NOT NULL,
    process_id text NOT NULL,
    event_hash text NOT NULL,
    fired_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.automation_firings ADD CONSTRAINT automation_firings_event_hash_fkey FOREIGN KEY (event_hash) REFERENCES events(hash);
ALTER TABLE charter.automation_firings ADD CONSTRAINT automation_firings_event_hash_key UNIQUE (event_hash);
ALTER TABLE charter.automation_firings ADD CONSTRAINT automation_firings_kind_check CHECK ((kind = ANY (ARRAY['scheduled_action'::text, 'auto_action'::text])));
ALTER TABLE charter.automation_firings ADD CONSTRAINT automation_firings_pkey PRIMARY KEY (work_id, occurrence);
ALTER TABLE charter.automation_firings ADD CONSTRAINT automation_firings_process_id_fkey FOREIGN KEY (process_id) REFERENCES processes(id);
CREATE TRIGGER automation_firings_no_delete BEFORE DELETE ON charter.automation_firings FOR EACH ROW EXECUTE FUNCTION delete_only_archiving('process_id');
CREATE TRIGGER automation_firings_no_truncate BEFORE TRUNCATE ON charter.automation_firings FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
CREATE TRIGGER automation_firings_no_update BEFORE UPDATE ON charter.automation_firings FOR EACH ROW EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.automation_firings TO charter_engine;
GRANT SELECT ON charter.automation_firings TO charter_engine;
GRANT SELECT ON charter.automation_firings TO charter_reader;
GRANT SELECT ON charter.automation_firings TO charter_worker;

CREATE TABLE charter.automation_queue (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    process_id text NOT NULL,
    workflow_path text NOT NULL,
    action_name text NOT NULL,
    action_data jsonb DEFAULT '{}'::jsonb NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    reason text NOT NULL,
    available_state text,
    queued_by_event_hash text NOT NULL,
    queued_by_action text NOT NULL,
    queued_by_actor text NOT NULL,
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_at timestamp with time zone,
    not_before timestamp with time zone,
    completed_at timestamp with time zone,
    fired_event_hash text,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    last_attempt_at timestamp with time zone,
    last_attempt_result text,
    claimed_by text,
    lease_expires_at timestamp with time zone,
    lease_token uuid,
    cascade_depth integer DEFAULT 0 NOT NULL,
    cascade_origin_event_hash text,
    cancelled_at timestamp with time zone,
    cancelled_by_event_hash text,
    cancel_reason text
);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_action_data_check CHECK ((jsonb_typeof(action_data) = 'object'::text));
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_attempts_check CHECK ((attempts >= 0));
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_cancelled_by_event_hash_fkey FOREIGN KEY (cancelled_by_event_hash) REFERENCES events(hash);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_cancelled_when CHECK (((status = 'cancelled'::text) = (cancelled_at IS NOT NULL)));
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_cascade_depth_check CHECK ((cascade_depth >= 0));
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_cascade_origin_event_hash_fkey FOREIGN KEY (cascade_origin_event_hash) REFERENCES events(hash);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_claim_has_lease CHECK (((status <> 'claimed'::text) OR ((claimed_by IS NOT NULL) AND (lease_expires_at IS NOT NULL) AND (lease_token IS NOT NULL))));
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_fired_event_hash_fkey FOREIGN KEY (fired_event_hash) REFERENCES events(hash);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_last_attempt_result_check CHECK ((last_attempt_result = ANY (ARRAY['accepted'::text, 'skipped'::text, 'failed'::text, 'transient_error'::text])));
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_pkey PRIMARY KEY (id);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_process_id_action_name_queued_by_event_has_key UNIQUE (process_id, action_name, queued_by_event_hash);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_process_id_fkey FOREIGN KEY (process_id) REFERENCES processes(id);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_queued_by_event_hash_fkey FOREIGN KEY (queued_by_event_hash) REFERENCES events(hash);
ALTER TABLE charter.automation_queue ADD CONSTRAINT automation_queue_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'claimed'::text, 'completed'::text, 'skipped'::text, 'failed'::text, 'cancelled'::text])));
CREATE INDEX automation_queue_by_time ON charter.automation_queue USING btree (queued_at, id);
CREATE INDEX automation_queue_claimable ON charter.automation_queue USING btree (COALESCE(not_before, queued_at)) WHERE (status = 'pending'::text);
CREATE INDEX automation_queue_leases ON charter.automation_queue USING btree (lease_expires_at) WHERE (status = 'claimed'::text);
CREATE TRIGGER automation_queue_failed AFTER UPDATE ON charter.automation_queue FOR EACH ROW WHEN (((new.last_attempt_result = ANY (ARRAY['failed'::text, 'transient_error'::text])) AND (new.last_attempt_at IS DISTINCT FROM old.last_attempt_at))) EXECUTE FUNCTION notify_work_failed_v1();
CREATE TRIGGER automation_queue_no_delete BEFORE DELETE ON charter.automation_queue FOR EACH ROW EXECUTE FUNCTION delete_only_archiving('process_id');
CREATE TRIGGER automation_queue_no_truncate BEFORE TRUNCATE ON charter.automation_queue FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.automation_queue TO charter_engine;
GRANT SELECT ON charter.automation_queue TO charter_engine;
GRANT SELECT ON charter.automation_queue TO charter_reader;
GRANT SELECT ON charter.automation_queue TO charter_worker;
GRANT UPDATE (status, cancelled_at, cancelled_by_event_hash, cancel_reason) ON charter.automation_queue TO charter_engine;

CREATE TABLE charter.automations (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    principal text NOT NULL,
    target text NOT NULL,
    name text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.automations ADD CONSTRAINT automations_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200)));
ALTER TABLE charter.automations ADD CONSTRAINT automations_pkey PRIMARY KEY (id);
ALTER TABLE charter.automations ADD CONSTRAINT automations_target_check CHECK ((target ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'::text));
CREATE INDEX automations_by_principal ON charter.automations USING btree (principal, created_at, id);
GRANT DELETE ON charter.automations TO charter_engine;
GRANT INSERT ON charter.automations TO charter_engine;
GRANT SELECT ON charter.automations TO charter_engine;
GRANT UPDATE ON charter.automations TO charter_engine;
GRANT SELECT ON charter.automations TO charter_reader;
GRANT SELECT ON charter.automations TO charter_worker;

CREATE TABLE charter.dpop_proofs (
    jti text NOT NULL,
    machine_id text NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL
);
ALTER TABLE charter.dpop_proofs ADD CONSTRAINT dpop_proofs_jti_check CHECK (((length(jti) >= 16) AND (length(jti) <= 200)));
ALTER TABLE charter.dpop_proofs ADD CONSTRAINT dpop_proofs_pkey PRIMARY KEY (jti);
CREATE INDEX dpop_proofs_expiry ON charter.dpop_proofs USING btree (expires_at);
GRANT DELETE ON charter.dpop_proofs TO charter_engine;
GRANT INSERT ON charter.dpop_proofs TO charter_engine;
GRANT SELECT ON charter.dpop_proofs TO charter_engine;

CREATE TABLE charter.event_disclosures (
    event_hash text NOT NULL,
    pointer text NOT NULL,
    digest text NOT NULL,
    disclosure text,
    erased_by text
);
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_digest_check CHECK ((digest ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_digest_key UNIQUE (digest);
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_digest_of_text CHECK (((disclosure IS NULL) OR (digest = encode(sha256(convert_to(disclosure, 'UTF8'::name)), 'hex'::text))));
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_erased_by_fkey FOREIGN KEY (erased_by) REFERENCES events(hash) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_erased_or_present CHECK (((disclosure IS NULL) = (erased_by IS NOT NULL)));
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_eraser TRIGGER DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_event_hash_fkey FOREIGN KEY (event_hash) REFERENCES events(hash);
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_pkey PRIMARY KEY (event_hash, pointer);
ALTER TABLE charter.event_disclosures ADD CONSTRAINT event_disclosures_pointer_check CHECK ((pointer ~ '^(/([^~/]|~[01])*)+$'::text));
CREATE INDEX event_disclosures_erased_by ON charter.event_disclosures USING btree (erased_by) WHERE (erased_by IS NOT NULL);
CREATE CONSTRAINT TRIGGER event_disclosures_eraser AFTER UPDATE ON charter.event_disclosures DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION check_disclosure_eraser();
CREATE TRIGGER event_disclosures_guard BEFORE DELETE OR UPDATE ON charter.event_disclosures FOR EACH ROW EXECUTE FUNCTION guard_disclosure();
CREATE TRIGGER event_disclosures_no_truncate BEFORE TRUNCATE ON charter.event_disclosures FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.event_disclosures TO charter_engine;
GRANT SELECT ON charter.event_disclosures TO charter_engine;
GRANT SELECT ON charter.event_disclosures TO charter_reader;

CREATE TABLE charter.events (
    process_id text NOT NULL,
    seq integer NOT NULL,
    hash text NOT NULL,
    prev_hash text,
    kind text NOT NULL,
    envelope json NOT NULL,
    signature text,
    actor text NOT NULL,
    actor_id text NOT NULL,
    actor_roles text[] NOT NULL,
    action text NOT NULL,
    workflow_path text NOT NULL,
    workflow_version text NOT NULL,
    cause_hash text,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    workflow_revision integer
);
ALTER TABLE charter.events ADD CONSTRAINT events_actor_fkey FOREIGN KEY (actor) REFERENCES actor_keys(public_key);
ALTER TABLE charter.events ADD CONSTRAINT events_cause_hash_fkey FOREIGN KEY (cause_hash) REFERENCES events(hash);
ALTER TABLE charter.events ADD CONSTRAINT events_check CHECK (((seq = 1) = (prev_hash IS NULL)));
ALTER TABLE charter.events ADD CONSTRAINT events_check1 CHECK (((kind = 'spawn'::text) = (signature IS NULL)));
ALTER TABLE charter.events ADD CONSTRAINT events_check2 CHECK (((kind = 'spawn'::text) = (cause_hash IS NOT NULL)));
ALTER TABLE charter.events ADD CONSTRAINT events_check3 CHECK (((kind = 'action'::text) OR (seq = 1)));
ALTER TABLE charter.events ADD CONSTRAINT events_hash_check CHECK ((hash ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.events ADD CONSTRAINT events_hash_key UNIQUE (hash);
ALTER TABLE charter.events ADD CONSTRAINT events_kind_check CHECK ((kind = ANY (ARRAY['action'::text, 'spawn'::text])));
ALTER TABLE charter.events ADD CONSTRAINT events_pkey PRIMARY KEY (process_id, seq);
ALTER TABLE charter.events ADD CONSTRAINT events_prev_hash_check CHECK ((prev_hash ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.events ADD CONSTRAINT events_process_id_fkey FOREIGN KEY (process_id) REFERENCES processes(id);
ALTER TABLE charter.events ADD CONSTRAINT events_seq_check CHECK ((seq >= 1));
ALTER TABLE charter.events ADD CONSTRAINT events_signature_check CHECK ((signature ~ '^[0-9a-f]{128}$'::text));
ALTER TABLE charter.events ADD CONSTRAINT events_workflow_revision_check CHECK ((workflow_revision >= 1));
ALTER TABLE charter.events ADD CONSTRAINT events_workflow_version_fkey FOREIGN KEY (workflow_version) REFERENCES workflow_definitions(version);
ALTER TABLE charter.events ADD CONSTRAINT hash_is_envelope_hash CHECK ((hash = encode(sha256(convert_to((envelope)::text, 'UTF8'::name)), 'hex'::text)));
CREATE TRIGGER events_extend_head BEFORE INSERT ON charter.events FOR EACH ROW EXECUTE FUNCTION event_extends_head();
CREATE TRIGGER events_no_delete BEFORE DELETE ON charter.events FOR EACH ROW EXECUTE FUNCTION delete_only_archiving('process_id');
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON charter.events FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
CREATE TRIGGER events_no_update BEFORE UPDATE ON charter.events FOR EACH ROW EXECUTE FUNCTION forbid_change();
CREATE TRIGGER events_queue_for_log AFTER INSERT ON charter.events REFERENCING NEW TABLE AS accepted FOR EACH STATEMENT EXECUTE FUNCTION queue_logged_events_v1();
CREATE TRIGGER events_revision BEFORE INSERT ON charter.events FOR EACH ROW EXECUTE FUNCTION event_revision();
GRANT INSERT ON charter.events TO charter_engine;
GRANT SELECT ON charter.events TO charter_engine;
GRANT SELECT ON charter.events TO charter_reader;
GRANT SELECT ON charter.events TO charter_sequencer;
GRANT SELECT ON charter.events TO charter_worker;

CREATE TABLE charter.log_checkpoints (
    size bigint NOT NULL,
    root text NOT NULL,
    note text NOT NULL,
    witnessed boolean NOT NULL,
    signed_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.log_checkpoints ADD CONSTRAINT log_checkpoints_pkey PRIMARY KEY (size);
ALTER TABLE charter.log_checkpoints ADD CONSTRAINT log_checkpoints_root_check CHECK ((root ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.log_checkpoints ADD CONSTRAINT log_checkpoints_size_check CHECK ((size >= 0));
CREATE TRIGGER log_checkpoints_append_only BEFORE DELETE OR UPDATE ON charter.log_checkpoints FOR EACH ROW EXECUTE FUNCTION forbid_change();
CREATE TRIGGER log_checkpoints_no_truncate BEFORE TRUNCATE ON charter.log_checkpoints FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT SELECT ON charter.log_checkpoints TO charter_engine;
GRANT SELECT ON charter.log_checkpoints TO charter_reader;
GRANT INSERT ON charter.log_checkpoints TO charter_sequencer;
GRANT SELECT ON charter.log_checkpoints TO charter_sequencer;
GRANT SELECT ON charter.log_checkpoints TO charter_worker;

CREATE TABLE charter.log_entries (
    idx bigint NOT NULL,
    event_hash text NOT NULL,
    process_id text NOT NULL,
    seq integer NOT NULL
);
ALTER TABLE charter.log_entries ADD CONSTRAINT log_entries_event_hash_key UNIQUE (event_hash);
ALTER TABLE charter.log_entries ADD CONSTRAINT log_entries_idx_check CHECK ((idx >= 0));
ALTER TABLE charter.log_entries ADD CONSTRAINT log_entries_pkey PRIMARY KEY (idx);
ALTER TABLE charter.log_entries ADD CONSTRAINT log_entries_process_id_seq_key UNIQUE (process_id, seq);
ALTER TABLE charter.log_entries ADD CONSTRAINT log_entries_seq_check CHECK ((seq >= 1));
CREATE TRIGGER log_entries_append_only BEFORE DELETE OR UPDATE ON charter.log_entries FOR EACH ROW EXECUTE FUNCTION forbid_change();
CREATE TRIGGER log_entries_no_truncate BEFORE TRUNCATE ON charter.log_entries FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT SELECT ON charter.log_entries TO charter_engine;
GRANT SELECT ON charter.log_entries TO charter_reader;
GRANT INSERT ON charter.log_entries TO charter_sequencer;
GRANT SELECT ON charter.log_entries TO charter_sequencer;
GRANT SELECT ON charter.log_entries TO charter_worker;

CREATE TABLE charter.log_pending (
    event_hash text NOT NULL,
    process_id text NOT NULL,
    seq integer NOT NULL,
    prev_hash text,
    queued_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);
ALTER TABLE charter.log_pending ADD CONSTRAINT log_pending_pkey PRIMARY KEY (event_hash);
CREATE INDEX log_pending_order ON charter.log_pending USING btree (queued_at, process_id, seq);
CREATE TRIGGER log_pending_no_truncate BEFORE TRUNCATE ON charter.log_pending FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.log_pending TO charter_engine;
GRANT SELECT ON charter.log_pending TO charter_engine;
GRANT SELECT ON charter.log_pending TO charter_reader;
GRANT DELETE ON charter.log_pending TO charter_sequencer;
GRANT SELECT ON charter.log_pending TO charter_sequencer;
GRANT SELECT ON charter.log_pending TO charter_worker;

CREATE TABLE charter.log_queue_on (
    singleton boolean DEFAULT true NOT NULL,
    since timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.log_queue_on ADD CONSTRAINT log_queue_on_pkey PRIMARY KEY (singleton);
ALTER TABLE charter.log_queue_on ADD CONSTRAINT log_queue_on_singleton_check CHECK (singleton);
CREATE TRIGGER log_queue_on_forever BEFORE DELETE OR UPDATE ON charter.log_queue_on FOR EACH ROW EXECUTE FUNCTION forbid_change();
CREATE TRIGGER log_queue_on_no_truncate BEFORE TRUNCATE ON charter.log_queue_on FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT SELECT ON charter.log_queue_on TO charter_engine;
GRANT SELECT ON charter.log_queue_on TO charter_reader;
GRANT SELECT ON charter.log_queue_on TO charter_sequencer;
GRANT SELECT ON charter.log_queue_on TO charter_worker;

CREATE TABLE charter.machines (
    id text NOT NULL,
    target text NOT NULL,
    principal text NOT NULL,
    thumbprint text NOT NULL,
    public_jwk jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled_at timestamp with time zone
);
ALTER TABLE charter.machines ADD CONSTRAINT machines_id_check CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'::text));
ALTER TABLE charter.machines ADD CONSTRAINT machines_pkey PRIMARY KEY (id);
ALTER TABLE charter.machines ADD CONSTRAINT machines_public_jwk_check CHECK ((jsonb_typeof(public_jwk) = 'object'::text));
ALTER TABLE charter.machines ADD CONSTRAINT machines_target_check CHECK ((target ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'::text));
ALTER TABLE charter.machines ADD CONSTRAINT machines_thumbprint_check CHECK ((thumbprint ~ '^[A-Za-z0-9_-]{43}$'::text));
ALTER TABLE charter.machines ADD CONSTRAINT machines_thumbprint_key UNIQUE (thumbprint);
CREATE INDEX machines_by_target ON charter.machines USING btree (target);
GRANT INSERT ON charter.machines TO charter_engine;
GRANT SELECT ON charter.machines TO charter_engine;
GRANT UPDATE ON charter.machines TO charter_engine;
GRANT SELECT ON charter.machines TO charter_reader;
GRANT SELECT ON charter.machines TO charter_worker;

CREATE TABLE charter.plans (
    automation_id uuid NOT NULL,
    version integer NOT NULL,
    steps jsonb NOT NULL,
    allowlist jsonb,
    limits jsonb,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.plans ADD CONSTRAINT plans_automation_id_fkey FOREIGN KEY (automation_id) REFERENCES automations(id) ON DELETE CASCADE;
ALTER TABLE charter.plans ADD CONSTRAINT plans_pkey PRIMARY KEY (automation_id);
ALTER TABLE charter.plans ADD CONSTRAINT plans_steps_check CHECK (((jsonb_typeof(steps) = 'array'::text) AND (jsonb_array_length(steps) >= 1)));
ALTER TABLE charter.plans ADD CONSTRAINT plans_version_check CHECK ((version = 1));
GRANT DELETE ON charter.plans TO charter_engine;
GRANT INSERT ON charter.plans TO charter_engine;
GRANT SELECT ON charter.plans TO charter_engine;
GRANT UPDATE ON charter.plans TO charter_engine;
GRANT SELECT ON charter.plans TO charter_reader;
GRANT SELECT ON charter.plans TO charter_worker;

CREATE TABLE charter.processes (
    id text NOT NULL,
    workflow_path text NOT NULL,
    state text NOT NULL,
    data jsonb DEFAULT '{}'::jsonb NOT NULL,
    head_hash text,
    seq integer DEFAULT 0 NOT NULL,
    parent_id text,
    parent_event_hash text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.processes ADD CONSTRAINT processes_check CHECK (((seq = 0) = (head_hash IS NULL)));
ALTER TABLE charter.processes ADD CONSTRAINT processes_check1 CHECK (((parent_id IS NULL) = (parent_event_hash IS NULL)));
ALTER TABLE charter.processes ADD CONSTRAINT processes_data_check CHECK ((jsonb_typeof(data) = 'object'::text));
ALTER TABLE charter.processes ADD CONSTRAINT processes_head_hash_check CHECK ((head_hash ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.processes ADD CONSTRAINT processes_id_check CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'::text));
ALTER TABLE charter.processes ADD CONSTRAINT processes_parent_event FOREIGN KEY (parent_event_hash) REFERENCES events(hash) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE charter.processes ADD CONSTRAINT processes_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES processes(id);
ALTER TABLE charter.processes ADD CONSTRAINT processes_pkey PRIMARY KEY (id);
ALTER TABLE charter.processes ADD CONSTRAINT processes_seq_check CHECK ((seq >= 0));
CREATE INDEX processes_id_prefix ON charter.processes USING btree (id text_pattern_ops);
CREATE INDEX processes_parent ON charter.processes USING btree (parent_id) WHERE (parent_id IS NOT NULL);
CREATE INDEX processes_recent ON charter.processes USING btree (updated_at, id);
CREATE INDEX processes_workflow_recent ON charter.processes USING btree (workflow_path, updated_at, id);
CREATE TRIGGER processes_guard BEFORE DELETE OR UPDATE ON charter.processes FOR EACH ROW EXECUTE FUNCTION guard_process_head();
CREATE TRIGGER processes_no_truncate BEFORE TRUNCATE ON charter.processes FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.processes TO charter_engine;
GRANT SELECT ON charter.processes TO charter_engine;
GRANT SELECT ON charter.processes TO charter_reader;
GRANT SELECT ON charter.processes TO charter_sequencer;
GRANT SELECT ON charter.processes TO charter_worker;
GRANT UPDATE (state, data, head_hash, seq, updated_at) ON charter.processes TO charter_engine;

CREATE TABLE charter.run_steps (
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    position integer NOT NULL,
    status text NOT NULL,
    idempotency_key text NOT NULL,
    output jsonb,
    error text,
    attempts integer DEFAULT 1 NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone
);
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_attempts_check CHECK ((attempts >= 1));
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_check CHECK (((status = 'completed'::text) = ((output IS NOT NULL) AND (finished_at IS NOT NULL))));
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_pkey PRIMARY KEY (run_id, step_id);
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_position_check CHECK (("position" >= 0));
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(id);
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_run_id_position_key UNIQUE (run_id, "position");
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_status_check CHECK ((status = ANY (ARRAY['running'::text, 'completed'::text, 'failed'::text])));
ALTER TABLE charter.run_steps ADD CONSTRAINT run_steps_step_id_check CHECK (((length(step_id) >= 1) AND (length(step_id) <= 128)));
CREATE TRIGGER run_steps_guard BEFORE DELETE OR UPDATE ON charter.run_steps FOR EACH ROW EXECUTE FUNCTION guard_run_step();
CREATE TRIGGER run_steps_no_truncate BEFORE TRUNCATE ON charter.run_steps FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.run_steps TO charter_engine;
GRANT SELECT ON charter.run_steps TO charter_engine;
GRANT UPDATE ON charter.run_steps TO charter_engine;
GRANT SELECT ON charter.run_steps TO charter_reader;
GRANT SELECT ON charter.run_steps TO charter_worker;

CREATE TABLE charter.runs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    automation_id uuid NOT NULL,
    trigger_id uuid,
    trigger_kind text NOT NULL,
    principal text NOT NULL,
    target text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    plan jsonb NOT NULL,
    input jsonb DEFAULT '{}'::jsonb NOT NULL,
    dedupe_key text,
    scheduled_for timestamp with time zone,
    lease_owner text,
    lease_token uuid,
    lease_expires_at timestamp with time zone,
    retry_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    output jsonb,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    traceparent text
);
ALTER TABLE charter.runs ADD CONSTRAINT runs_attempts_check CHECK ((attempts >= 0));
ALTER TABLE charter.runs ADD CONSTRAINT runs_dedupe_key_key UNIQUE (dedupe_key);
ALTER TABLE charter.runs ADD CONSTRAINT runs_finished_when_done CHECK (((status = ANY (ARRAY['completed'::text, 'failed'::text])) = (finished_at IS NOT NULL)));
ALTER TABLE charter.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (id);
ALTER TABLE charter.runs ADD CONSTRAINT runs_plan_check CHECK ((jsonb_typeof(plan) = 'object'::text));
ALTER TABLE charter.runs ADD CONSTRAINT runs_running_has_lease CHECK (((status <> 'running'::text) OR ((lease_owner IS NOT NULL) AND (lease_token IS NOT NULL) AND (lease_expires_at IS NOT NULL))));
ALTER TABLE charter.runs ADD CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'completed'::text, 'failed'::text])));
ALTER TABLE charter.runs ADD CONSTRAINT runs_traceparent_form CHECK ((traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'::text));
ALTER TABLE charter.runs ADD CONSTRAINT runs_trigger_kind_check CHECK ((trigger_kind = ANY (ARRAY['schedule'::text, 'webhook'::text, 'manual'::text])));
CREATE INDEX runs_by_automation ON charter.runs USING btree (automation_id, created_at, id);
CREATE INDEX runs_by_principal ON charter.runs USING btree (principal, created_at, id);
CREATE INDEX runs_claimable ON charter.runs USING btree (target, COALESCE(retry_at, created_at)) WHERE (status = 'pending'::text);
CREATE INDEX runs_leases ON charter.runs USING btree (lease_expires_at) WHERE (status = 'running'::text);
CREATE TRIGGER runs_changed AFTER INSERT OR UPDATE OF status ON charter.runs FOR EACH ROW EXECUTE FUNCTION notify_run_changed_v1();
CREATE TRIGGER runs_guard BEFORE DELETE OR UPDATE ON charter.runs FOR EACH ROW EXECUTE FUNCTION guard_run();
CREATE TRIGGER runs_no_truncate BEFORE TRUNCATE ON charter.runs FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.runs TO charter_engine;
GRANT SELECT ON charter.runs TO charter_engine;
GRANT UPDATE ON charter.runs TO charter_engine;
GRANT SELECT ON charter.runs TO charter_reader;
GRANT SELECT ON charter.runs TO charter_worker;

CREATE TABLE charter.schedule_triggers (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    automation_id uuid NOT NULL,
    cron text NOT NULL,
    timezone text NOT NULL,
    next_run_at timestamp with time zone NOT NULL,
    remaining_occurrences integer,
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.schedule_triggers ADD CONSTRAINT schedule_triggers_automation_id_fkey FOREIGN KEY (automation_id) REFERENCES automations(id) ON DELETE CASCADE;
ALTER TABLE charter.schedule_triggers ADD CONSTRAINT schedule_triggers_cron_check CHECK (((length(cron) >= 9) AND (length(cron) <= 200)));
ALTER TABLE charter.schedule_triggers ADD CONSTRAINT schedule_triggers_pkey PRIMARY KEY (id);
ALTER TABLE charter.schedule_triggers ADD CONSTRAINT schedule_triggers_remaining_occurrences_check CHECK ((remaining_occurrences >= 0));
ALTER TABLE charter.schedule_triggers ADD CONSTRAINT schedule_triggers_timezone_check CHECK (((length(timezone) >= 1) AND (length(timezone) <= 64)));
CREATE INDEX schedule_triggers_by_automation ON charter.schedule_triggers USING btree (automation_id);
CREATE INDEX schedule_triggers_due ON charter.schedule_triggers USING btree (next_run_at) WHERE (enabled AND ((remaining_occurrences IS NULL) OR (remaining_occurrences > 0)));
GRANT DELETE ON charter.schedule_triggers TO charter_engine;
GRANT INSERT ON charter.schedule_triggers TO charter_engine;
GRANT SELECT ON charter.schedule_triggers TO charter_engine;
GRANT UPDATE ON charter.schedule_triggers TO charter_engine;
GRANT SELECT ON charter.schedule_triggers TO charter_reader;
GRANT SELECT ON charter.schedule_triggers TO charter_worker;

CREATE TABLE charter.scheduled_actions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    schedule_id text NOT NULL,
    process_id text NOT NULL,
    workflow_path text NOT NULL,
    action_name text NOT NULL,
    action_data jsonb DEFAULT '{}'::jsonb NOT NULL,
    run_at timestamp with time zone NOT NULL,
    not_before timestamp with time zone,
    interval text,
    until_ts timestamp with time zone,
    max_count integer,
    fire_count integer DEFAULT 0 NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    created_event_hash text NOT NULL,
    created_by_action text NOT NULL,
    created_by_actor text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    cancelled_at timestamp with time zone,
    cancelled_by_event_hash text,
    cancel_reason text,
    last_attempt_at timestamp with time zone,
    last_attempt_result text,
    last_attempt_error text,
    attempts integer DEFAULT 0 NOT NULL,
    last_fired_at timestamp with time zone,
    last_fired_event_hash text,
    claimed_by text,
    claimed_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    lease_token uuid,
    occurrence_attempts integer DEFAULT 0 NOT NULL
);
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_action_data_check CHECK ((jsonb_typeof(action_data) = 'object'::text));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_attempts_check CHECK ((attempts >= 0));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_cancelled_by_event_hash_fkey FOREIGN KEY (cancelled_by_event_hash) REFERENCES events(hash);
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_check CHECK (((status = 'cancelled'::text) = (cancelled_at IS NOT NULL)));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_claim_has_lease CHECK (((status <> 'claimed'::text) OR ((claimed_by IS NOT NULL) AND (lease_expires_at IS NOT NULL) AND (lease_token IS NOT NULL))));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_created_event_hash_fkey FOREIGN KEY (created_event_hash) REFERENCES events(hash);
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_fire_count_check CHECK ((fire_count >= 0));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_last_attempt_result_check CHECK ((last_attempt_result = ANY (ARRAY['accepted'::text, 'skipped'::text, 'failed'::text, 'transient_error'::text])));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_last_fired_event_hash_fkey FOREIGN KEY (last_fired_event_hash) REFERENCES events(hash);
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_max_count_check CHECK ((max_count >= 1));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_occurrence_attempts_check CHECK ((occurrence_attempts >= 0));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_pkey PRIMARY KEY (id);
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_process_id_fkey FOREIGN KEY (process_id) REFERENCES processes(id);
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_schedule_id_check CHECK (((length(schedule_id) >= 1) AND (length(schedule_id) <= 128)));
ALTER TABLE charter.scheduled_actions ADD CONSTRAINT scheduled_actions_status_check CHECK ((status = ANY (ARRAY['active'::text, 'claimed'::text, 'cancelled'::text, 'exhausted'::text, 'skipped'::text, 'failed'::text])));
CREATE INDEX scheduled_actions_by_time ON charter.scheduled_actions USING btree (run_at, id);
CREATE INDEX scheduled_actions_due ON charter.scheduled_actions USING btree (COALESCE(not_before, run_at)) WHERE (status = 'active'::text);
CREATE INDEX scheduled_actions_leases ON charter.scheduled_actions USING btree (lease_expires_at) WHERE (status = 'claimed'::text);
CREATE UNIQUE INDEX scheduled_actions_one_live ON charter.scheduled_actions USING btree (process_id, schedule_id) WHERE (status = ANY (ARRAY['active'::text, 'claimed'::text]));
CREATE INDEX scheduled_actions_process ON charter.scheduled_actions USING btree (process_id);
CREATE TRIGGER scheduled_actions_failed AFTER UPDATE ON charter.scheduled_actions FOR EACH ROW WHEN (((new.last_attempt_result = ANY (ARRAY['failed'::text, 'transient_error'::text])) AND (new.last_attempt_at IS DISTINCT FROM old.last_attempt_at))) EXECUTE FUNCTION notify_work_failed_v1();
CREATE TRIGGER scheduled_actions_no_delete BEFORE DELETE ON charter.scheduled_actions FOR EACH ROW EXECUTE FUNCTION delete_only_archiving('process_id');
CREATE TRIGGER scheduled_actions_no_truncate BEFORE TRUNCATE ON charter.scheduled_actions FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.scheduled_actions TO charter_engine;
GRANT SELECT ON charter.scheduled_actions TO charter_engine;
GRANT SELECT ON charter.scheduled_actions TO charter_reader;
GRANT SELECT ON charter.scheduled_actions TO charter_worker;
GRANT UPDATE (status, cancelled_at, cancelled_by_event_hash, cancel_reason) ON charter.scheduled_actions TO charter_engine;

CREATE TABLE charter.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.schema_migrations ADD CONSTRAINT schema_migrations_checksum_check CHECK ((checksum ~ '^[0-9a-f]{64}$'::text));
ALTER TABLE charter.schema_migrations ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);
ALTER TABLE charter.schema_migrations ADD CONSTRAINT schema_migrations_version_check CHECK ((version >= 1));
GRANT SELECT ON charter.schema_migrations TO charter_engine;
GRANT SELECT ON charter.schema_migrations TO charter_reader;
GRANT SELECT ON charter.schema_migrations TO charter_sequencer;
GRANT SELECT ON charter.schema_migrations TO charter_worker;

CREATE TABLE charter.system_log (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    level text DEFAULT 'info'::text NOT NULL,
    kind text NOT NULL,
    code text,
    process_id text,
    actor text,
    action text,
    event_hash text,
    message text DEFAULT ''::text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL
);
ALTER TABLE charter.system_log ADD CONSTRAINT system_log_detail_check CHECK ((jsonb_typeof(detail) = 'object'::text));
ALTER TABLE charter.system_log ADD CONSTRAINT system_log_kind_check CHECK ((kind ~ '^[a-z][a-z0-9_.]*$'::text));
ALTER TABLE charter.system_log ADD CONSTRAINT system_log_level_check CHECK ((level = ANY (ARRAY['info'::text, 'warning'::text, 'error'::text])));
ALTER TABLE charter.system_log ADD CONSTRAINT system_log_pkey PRIMARY KEY (id);
CREATE INDEX system_log_at ON charter.system_log USING btree (at);
CREATE INDEX system_log_process ON charter.system_log USING btree (process_id, id) WHERE (process_id IS NOT NULL);
CREATE TRIGGER system_log_append_only BEFORE DELETE OR UPDATE ON charter.system_log FOR EACH ROW EXECUTE FUNCTION forbid_change();
CREATE TRIGGER system_log_no_truncate BEFORE TRUNCATE ON charter.system_log FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.system_log TO charter_engine;
GRANT SELECT ON charter.system_log TO charter_engine;
GRANT SELECT ON charter.system_log TO charter_reader;
GRANT INSERT ON charter.system_log TO charter_sequencer;
GRANT SELECT ON charter.system_log TO charter_worker;

CREATE TABLE charter.webhook_triggers (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    automation_id uuid NOT NULL,
    source text NOT NULL,
    event text,
    secret text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.webhook_triggers ADD CONSTRAINT webhook_triggers_automation_id_fkey FOREIGN KEY (automation_id) REFERENCES automations(id) ON DELETE CASCADE;
ALTER TABLE charter.webhook_triggers ADD CONSTRAINT webhook_triggers_event_check CHECK (((length(event) >= 1) AND (length(event) <= 200)));
ALTER TABLE charter.webhook_triggers ADD CONSTRAINT webhook_triggers_pkey PRIMARY KEY (id);
ALTER TABLE charter.webhook_triggers ADD CONSTRAINT webhook_triggers_secret_check CHECK ((secret ~ '^whsec_[A-Za-z0-9+/=]{16,}$'::text));
ALTER TABLE charter.webhook_triggers ADD CONSTRAINT webhook_triggers_source_check CHECK (((length(source) >= 1) AND (length(source) <= 200)));
CREATE INDEX webhook_triggers_by_automation ON charter.webhook_triggers USING btree (automation_id);
CREATE INDEX webhook_triggers_by_source ON charter.webhook_triggers USING btree (source, event);
GRANT DELETE ON charter.webhook_triggers TO charter_engine;
GRANT INSERT ON charter.webhook_triggers TO charter_engine;
GRANT SELECT ON charter.webhook_triggers TO charter_engine;
GRANT UPDATE ON charter.webhook_triggers TO charter_engine;
GRANT SELECT (id, automation_id, source, event, enabled, created_at, updated_at) ON charter.webhook_triggers TO charter_reader;
GRANT SELECT (id, automation_id, source, event, enabled, created_at, updated_at) ON charter.webhook_triggers TO charter_worker;

CREATE TABLE charter.workflow_definitions (
    version text NOT NULL,
    definition json NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE charter.workflow_definitions ADD CONSTRAINT version_is_definition_hash CHECK ((version = encode(sha256(convert_to((definition)::text, 'UTF8'::name)), 'hex'::text)));
ALTER TABLE charter.workflow_definitions ADD CONSTRAINT workflow_definitions_pkey PRIMARY KEY (version);
ALTER TABLE charter.workflow_definitions ADD CONSTRAINT workflow_definitions_version_check CHECK ((version ~ '^[0-9a-f]{64}$'::text));
CREATE TRIGGER workflow_definitions_append_only BEFORE DELETE OR UPDATE ON charter.workflow_definitions FOR EACH ROW EXECUTE FUNCTION forbid_change();
CREATE TRIGGER workflow_definitions_no_truncate BEFORE TRUNCATE ON charter.workflow_definitions FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.workflow_definitions TO charter_engine;
GRANT SELECT ON charter.workflow_definitions TO charter_engine;
GRANT SELECT ON charter.workflow_definitions TO charter_reader;
GRANT SELECT ON charter.workflow_definitions TO charter_worker;

CREATE TABLE charter.workflow_deployments (
    path text NOT NULL,
    revision integer NOT NULL,
    version text NOT NULL,
    deployed_at timestamp with time zone DEFAULT now() NOT NULL,
    deployed_by text,
    deployed_by_token text,
    allow_stranding boolean DEFAULT false NOT NULL,
    migration_map jsonb
);
ALTER TABLE charter.workflow_deployments ADD CONSTRAINT workflow_deployments_migration_map_object CHECK (((migration_map IS NULL) OR (jsonb_typeof(migration_map) = 'object'::text)));
ALTER TABLE charter.workflow_deployments ADD CONSTRAINT workflow_deployments_path_check CHECK (((path ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}(/[A-Za-z0-9][A-Za-z0-9._:-]{0,127})*$'::text) AND (length(path) <= 1024)));
ALTER TABLE charter.workflow_deployments ADD CONSTRAINT workflow_deployments_pkey PRIMARY KEY (path, revision);
ALTER TABLE charter.workflow_deployments ADD CONSTRAINT workflow_deployments_revision_check CHECK ((revision >= 1));
ALTER TABLE charter.workflow_deployments ADD CONSTRAINT workflow_deployments_version_fkey FOREIGN KEY (version) REFERENCES workflow_definitions(version);
CREATE TRIGGER workflow_deployments_append_only BEFORE DELETE OR UPDATE ON charter.workflow_deployments FOR EACH ROW EXECUTE FUNCTION forbid_change();
CREATE TRIGGER workflow_deployments_no_truncate BEFORE TRUNCATE ON charter.workflow_deployments FOR EACH STATEMENT EXECUTE FUNCTION forbid_change();
GRANT INSERT ON charter.workflow_deployments TO charter_engine;
GRANT SELECT ON charter.workflow_deployments TO charter_engine;
GRANT SELECT ON charter.workflow_deployments TO charter_reader;
GRANT SELECT ON charter.workflow_deployments TO charter_worker;

CREATE OR REPLACE FUNCTION charter.apply_writes_v1(p_ops jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    op jsonb;
    v_at timestamptz;
    cancelled record;
    hints jsonb := '[]';
BEGIN
    FOR op IN SELECT value FROM jsonb_array_elements(p_ops) LOOP
        v_at := coalesce((op->>'now')::timestamptz, now());
        CASE op->>'op'
        WHEN 'insert_event' THEN
            INSERT INTO charter.events (process_id, seq, hash, prev_hash, kind, envelope,
                signature, actor, actor_id, actor_roles, action, workflow_path,
                workflow_version, cause_hash, received_at)
            VALUES (op->>'process_id', (op->>'seq')::integer, op->>'hash', op->>'prev_hash',
                op->>'kind', (op->>'envelope')::json, op->>'signature', op->>'actor',
                op->>'actor_id', ARRAY(SELECT jsonb_array_elements_text(op->'actor_roles')),
                op->>'action', op->>'workflow_path', op->>'workflow_version',
                op->>'cause_hash', v_at);
        WHEN 'advance_process' THEN
            UPDATE charter.processes
            SET state = op->>'state', data = op->'data', head_hash = op->>'head_hash',
                seq = (op->>'seq')::integer, updated_at = v_at
            WHERE id = op->>'id';
        WHEN 'insert_firing' THEN
            INSERT INTO charter.automation_firings (work_id, kind, occurrence, process_id,
                event_hash, fired_at)
            VALUES ((op->>'work_id')::uuid, op->>'kind', (op->>'occurrence')::timestamptz,
                op->>'process_id', op->>'event_hash', v_at);
        WHEN 'cancel_schedules' THEN
            -- Only SQL knows which rows were live: each gets its hint here.
            FOR cancelled IN
                UPDATE charter.scheduled_actions
                SET status = 'cancelled', cancelled_at = v_at,
                    cancelled_by_event_hash = op->>'event_hash', cancel_reason = op->>'reason'
                WHERE process_id = op->>'process_id'
                  AND schedule_id = ANY (ARRAY(SELECT jsonb_array_elements_text(op->'schedule_ids')))
                  AND status IN ('active', 'claimed')
                RETURNING id, process_id, workflow_path, action_name, run_at
            LOOP
                hints := hints || jsonb_build_array(jsonb_build_array(
                    'scheduled_actions_changed',
                    jsonb_build_object(
                        'id', cancelled.id, 'process_id', cancelled.process_id,
                        'workflow_path', cancelled.workflow_path,
                        'action_name', cancelled.action_name,
                        'run_at', to_char(cancelled.run_at AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                        'kind', 'scheduled_action', 'op', 'cancelled')::text));
            END LOOP;
        WHEN 'insert_schedule' THEN
            INSERT INTO charter.scheduled_actions (id, schedule_id, process_id, workflow_path,
                action_name, action_data, run_at, interval, until_ts, max_count,
                created_event_hash, created_by_action, created_by_actor, created_at)
            VALUES ((op->>'id')::uuid, op->>'schedule_id', op->>'process_id',
                op->>'workflow_path', op->>'action_name', op->'action_data',
                (op->>'run_at')::timestamptz, op->>'interval', (op->>'until_ts')::timestamptz,
                (op->>'max_count')::integer, op->>'event_hash', op->>'action', op->>'actor', v_at);
        WHEN 'insert_auto_work' THEN
            -- With an error (its data does not render, the cascade limit is reached) the
            -- row is written failed at once; once per (process, action, causing event).
            INSERT INTO charter.automation_queue (id, process_id, workflow_path, action_name,
                action_data, reason, available_state, queued_by_event_hash, queued_by_action,
                queued_by_actor, queued_at, cascade_depth, cascade_origin_event_hash, status,
                completed_at, last_attempt_at, last_attempt_result, last_error)
            VALUES ((op->>'id')::uuid, op->>'process_id', op->>'workflow_path',
                op->>'action_name', op->'action_data', op->>'reason', op->>'available_state',
                op->>'event_hash', op->>'action', op->>'actor', v_at,
                (op->>'cascade_depth')::integer, op->>'cascade_origin',
                CASE WHEN op->>'error' IS NULL THEN 'pending' ELSE 'failed' END,
                CASE WHEN op->>'error' IS NULL THEN NULL ELSE v_at END,
                CASE WHEN op->>'error' IS NULL THEN NULL ELSE v_at END,
                CASE WHEN op->>'error' IS NULL THEN NULL ELSE 'failed' END,
                op->>'error')
            ON CONFLICT (process_id, action_name, queued_by_event_hash) DO NOTHING;
        WHEN 'log' THEN
            INSERT INTO charter.system_log (level, kind, code, process_id, actor, action,
                event_hash, message, detail, at)
            VALUES (op->>'level', op->>'kind', op->>'code', op->>'process_id', op->>'actor',
                op->>'action', op->>'event_hash', op->>'message', op->'detail', v_at);
        ELSE
            RAISE EXCEPTION 'apply_writes_v1: unknown write %', op->>'op';
        END CASE;
    END LOOP;
    RETURN hints;
END
$function$;
GRANT EXECUTE ON FUNCTION apply_writes_v1(jsonb) TO charter_engine;

CREATE OR REPLACE FUNCTION charter.archive_blocker(p_process text)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION charter.archive_candidates(p_path text, p_states text[], p_rested_before timestamp with time zone, p_limit integer)
 RETURNS TABLE(process_id text, seq integer, head_hash text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    SELECT p.id, p.seq, p.head_hash
    FROM charter.processes p
    WHERE p.workflow_path = p_path AND p.state = ANY (p_states) AND p.seq >= 1
      AND p.updated_at <= p_rested_before
      AND charter.archive_blocker(p.id) IS NULL
    ORDER BY p.updated_at, p.id
    LIMIT p_limit
$function$;
GRANT EXECUTE ON FUNCTION archive_candidates(text,text[],timestamp with time zone,integer) TO charter_engine;
GRANT EXECUTE ON FUNCTION archive_candidates(text,text[],timestamp with time zone,integer) TO charter_reader;

CREATE OR REPLACE FUNCTION charter.archive_process(p_process text, p_head text, p_seq integer, p_bundle_sha256 text, p_bundle_path text, p_by text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
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
$function$;
GRANT EXECUTE ON FUNCTION archive_process(text,text,integer,text,text,text) TO charter_engine;

CREATE OR REPLACE FUNCTION charter.archiving(p_process text)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT coalesce(current_setting('charter.archiving', true), '') = p_process
$function$;

CREATE OR REPLACE FUNCTION charter.check_disclosure_eraser()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM charter.events eraser JOIN charter.events owner
            ON owner.hash = NEW.event_hash AND owner.process_id = eraser.process_id
        WHERE eraser.hash = NEW.erased_by AND eraser.action = 'charter:erase'
    ) THEN
        RAISE EXCEPTION USING ERRCODE = 'CHA04',
            MESSAGE = format('%s is not a charter:erase event of the disclosure''s process',
                             NEW.erased_by);
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION charter.claim_automation_work(p_id uuid, p_worker text, p_lease_seconds integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF automation_queue
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    UPDATE charter.automation_queue
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    WHERE id = p_id AND status = 'pending'
    RETURNING *
$function$;
GRANT EXECUTE ON FUNCTION claim_automation_work(uuid,text,integer,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.claim_automation_work_batch(p_worker text, p_lease_seconds integer, p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF automation_queue
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    WITH ready AS (
        SELECT id FROM charter.automation_queue
        WHERE status = 'pending' AND coalesce(not_before, queued_at) <= coalesce(p_now, now())
        ORDER BY coalesce(not_before, queued_at)
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE charter.automation_queue q
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    FROM ready
    WHERE q.id = ready.id
    RETURNING q.*
$function$;
GRANT EXECUTE ON FUNCTION claim_automation_work_batch(text,integer,integer,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.claim_scheduled_action(p_id uuid, p_worker text, p_lease_seconds integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF scheduled_actions
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    UPDATE charter.scheduled_actions
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    -- Only when due: nobody fires an SLA escalation before its deadline.
    WHERE id = p_id AND status = 'active' AND coalesce(not_before, run_at) <= coalesce(p_now, now())
    RETURNING *
$function$;
GRANT EXECUTE ON FUNCTION claim_scheduled_action(uuid,text,integer,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.claim_scheduled_actions(p_worker text, p_lease_seconds integer, p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF scheduled_actions
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    WITH due AS (
        SELECT id FROM charter.scheduled_actions
        WHERE status = 'active' AND coalesce(not_before, run_at) <= coalesce(p_now, now())
        ORDER BY coalesce(not_before, run_at)
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE charter.scheduled_actions s
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    FROM due
    WHERE s.id = due.id
    RETURNING s.*
$function$;
GRANT EXECUTE ON FUNCTION claim_scheduled_actions(text,integer,integer,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.complete_automation_work(p_id uuid, p_token uuid, p_event_hash text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS automation_queue
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'completed', completed_at = coalesce(p_now, now()),
        fired_event_hash = p_event_hash, attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'accepted',
        last_error = NULL,
        claimed_by = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    -- Refused after the lease check: a row that is not ours says so first.
    PERFORM charter.require_fired_by(p_id, p_event_hash);
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION complete_automation_work(uuid,uuid,text,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.complete_scheduled_action(p_id uuid, p_token uuid, p_event_hash text, p_next_run_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS scheduled_actions
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.scheduled_actions;
BEGIN
    UPDATE charter.scheduled_actions
    SET status = CASE WHEN p_next_run_at IS NULL THEN 'exhausted' ELSE 'active' END,
        run_at = coalesce(p_next_run_at, run_at),
        not_before = NULL,
        fire_count = fire_count + 1,
        attempts = attempts + 1,
        occurrence_attempts = 0,
        last_attempt_at = coalesce(p_now, now()),
        last_attempt_result = 'accepted',
        last_attempt_error = NULL,
        last_fired_at = coalesce(p_now, now()),
        last_fired_event_hash = p_event_hash,
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    -- Refused after the lease check: a row that is not ours says so first.
    PERFORM charter.require_fired_by(p_id, p_event_hash);
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION complete_scheduled_action(uuid,uuid,text,timestamp with time zone,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.delete_only_archiving()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF charter.archiving(to_jsonb(OLD) ->> TG_ARGV[0]) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'CHA01',
        MESSAGE = format('%s rows are never deleted: a finished process leaves through '
                         'charter archive run', TG_TABLE_NAME);
END
$function$;

CREATE OR REPLACE FUNCTION charter.enable_log_queue_v1()
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
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
$function$;
GRANT EXECUTE ON FUNCTION enable_log_queue_v1() TO charter_sequencer;

CREATE OR REPLACE FUNCTION charter.erase_disclosures(erase_event text, targets jsonb)
 RETURNS integer
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    WITH erased AS (
        UPDATE charter.event_disclosures d
        SET disclosure = NULL, erased_by = erase_event
        FROM jsonb_to_recordset(targets) AS t(event text, pointer text)
        WHERE d.event_hash = t.event AND d.pointer = t.pointer AND d.disclosure IS NOT NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM erased
$function$;
GRANT EXECUTE ON FUNCTION erase_disclosures(text,jsonb) TO charter_engine;

CREATE OR REPLACE FUNCTION charter.event_extends_head()
 RETURNS trigger
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION charter.event_revision()
 RETURNS trigger
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
BEGIN
    IF NEW.workflow_revision IS NULL THEN
        SELECT max(d.revision) INTO NEW.workflow_revision
        FROM charter.workflow_deployments d
        WHERE d.path = NEW.workflow_path AND d.version = NEW.workflow_version;
    END IF;
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION charter.fail_automation_work(p_id uuid, p_token uuid, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS automation_queue
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'failed', completed_at = coalesce(p_now, now()), attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'failed',
        last_error = left(p_reason, 2000),
        claimed_by = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION fail_automation_work(uuid,uuid,text,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.fail_scheduled_action(p_id uuid, p_token uuid, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS scheduled_actions
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.scheduled_actions;
BEGIN
    UPDATE charter.scheduled_actions
    SET status = 'failed',
        attempts = attempts + 1,
        occurrence_attempts = occurrence_attempts + 1,
        last_attempt_at = coalesce(p_now, now()),
        last_attempt_result = 'failed',
        last_attempt_error = left(p_reason, 2000),
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION fail_scheduled_action(uuid,uuid,text,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.forbid_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'CHA01',
        MESSAGE = format('%s is append-only: %s is not allowed', TG_TABLE_NAME, TG_OP);
END
$function$;

CREATE OR REPLACE FUNCTION charter.guard_actor_keys()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION USING ERRCODE = 'CHA01', MESSAGE = 'actor keys are never deleted';
    END IF;
    IF NEW.public_key <> OLD.public_key OR NEW.actor_id <> OLD.actor_id
       OR NEW.added_at <> OLD.added_at
       OR (OLD.retired_at IS NOT NULL AND NEW.retired_at IS DISTINCT FROM OLD.retired_at) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA04',
            MESSAGE = 'an actor key can only be retired, once';
    END IF;
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION charter.guard_disclosure()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION charter.guard_process_head()
 RETURNS trigger
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION charter.guard_run()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION charter.guard_run_step()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION charter.guard_tombstone()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'DELETE' AND coalesce(current_setting('charter.restoring', true), '') = OLD.process_id THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'CHA01',
        MESSAGE = 'an archived process''s tombstone never changes: restore the process instead';
END
$function$;

CREATE OR REPLACE FUNCTION charter.held(p_process text)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT coalesce((
        SELECT e.action = 'charter:hold' FROM charter.events e
        WHERE e.process_id = p_process AND e.action IN ('charter:hold', 'charter:release')
        ORDER BY e.seq DESC LIMIT 1
    ), false)
$function$;

CREATE OR REPLACE FUNCTION charter.hold_queue_v1(p_ids uuid[])
 RETURNS SETOF automation_queue
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    SELECT * FROM charter.automation_queue WHERE id = ANY (p_ids) FOR SHARE SKIP LOCKED
$function$;
GRANT EXECUTE ON FUNCTION hold_queue_v1(uuid[]) TO charter_engine;

CREATE OR REPLACE FUNCTION charter.hold_scheduled_v1(p_ids uuid[])
 RETURNS SETOF scheduled_actions
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    SELECT * FROM charter.scheduled_actions WHERE id = ANY (p_ids) FOR SHARE SKIP LOCKED
$function$;
GRANT EXECUTE ON FUNCTION hold_scheduled_v1(uuid[]) TO charter_engine;

CREATE OR REPLACE FUNCTION charter.lease_lost(p_table text, p_id uuid)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'CHA05',
        MESSAGE = format('%s %s is no longer claimed under this lease', p_table, p_id);
END
$function$;

CREATE OR REPLACE FUNCTION charter.lock_due_scheduled_v1(p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF scheduled_actions
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    SELECT s.* FROM charter.scheduled_actions s
    JOIN charter.processes p ON p.id = s.process_id
    WHERE s.status = 'active' AND coalesce(s.not_before, s.run_at) <= coalesce(p_now, now())
    ORDER BY coalesce(s.not_before, s.run_at)
    LIMIT p_limit
    FOR UPDATE OF s SKIP LOCKED
    FOR NO KEY UPDATE OF p SKIP LOCKED
$function$;
GRANT EXECUTE ON FUNCTION lock_due_scheduled_v1(integer,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.lock_ready_queue_v1(p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF automation_queue
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    SELECT q.* FROM charter.automation_queue q
    JOIN charter.processes p ON p.id = q.process_id
    WHERE q.status = 'pending' AND coalesce(q.not_before, q.queued_at) <= coalesce(p_now, now())
    ORDER BY coalesce(q.not_before, q.queued_at)
    LIMIT p_limit
    FOR UPDATE OF q SKIP LOCKED
    FOR NO KEY UPDATE OF p SKIP LOCKED
$function$;
GRANT EXECUTE ON FUNCTION lock_ready_queue_v1(integer,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.log_worker_attempt(p_kind text, p_level text, p_code text, p_process_id text, p_action text, p_event_hash text, p_message text, p_detail jsonb, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    INSERT INTO charter.system_log (kind, level, code, process_id, actor, action, event_hash,
                                    message, detail, at)
    VALUES ('worker.' || p_kind, p_level, p_code, p_process_id, 'automation', p_action,
            p_event_hash, left(p_message, 2000), coalesce(p_detail, '{}'), coalesce(p_now, now()))
$function$;
GRANT EXECUTE ON FUNCTION log_worker_attempt(text,text,text,text,text,text,text,jsonb,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.notify_run_changed_v1()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'charter', 'pg_temp'
AS $function$
BEGIN
    PERFORM pg_notify('charter_runs', json_build_object(
        'id', NEW.id, 'automation_id', NEW.automation_id, 'status', NEW.status,
        'principal', NEW.principal)::text);
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION charter.notify_work_failed_v1()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'charter', 'pg_temp'
AS $function$
BEGIN
    PERFORM pg_notify('charter_work_failed', json_build_object(
        'kind', CASE TG_TABLE_NAME WHEN 'scheduled_actions' THEN 'scheduled_action'
                                   ELSE 'auto_action' END,
        'id', NEW.id, 'process_id', NEW.process_id, 'workflow_path', NEW.workflow_path,
        'action_name', NEW.action_name, 'status', NEW.status)::text);
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION charter.queue_logged_events_v1()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'charter', 'pg_temp'
AS $function$
BEGIN
    IF EXISTS (SELECT 1 FROM charter.log_queue_on) THEN
        INSERT INTO charter.log_pending (event_hash, process_id, seq, prev_hash)
        SELECT hash, process_id, seq, prev_hash FROM accepted;
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION charter.reclaim_expired_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(scheduled integer, queued integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
BEGIN
    UPDATE charter.scheduled_actions
    SET status = 'active',
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE status = 'claimed' AND lease_expires_at < coalesce(p_now, now());
    GET DIAGNOSTICS scheduled = ROW_COUNT;
    UPDATE charter.automation_queue
    SET status = 'pending',
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE status = 'claimed' AND lease_expires_at < coalesce(p_now, now());
    GET DIAGNOSTICS queued = ROW_COUNT;
    RETURN NEXT;
END
$function$;
GRANT EXECUTE ON FUNCTION reclaim_expired_leases(timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.record_results_v1(p_calls jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    c jsonb;
    v_now timestamptz;
BEGIN
    FOR c IN SELECT value FROM jsonb_array_elements(p_calls) LOOP
        v_now := (c->>'now')::timestamptz;
        CASE c->>'fn'
        WHEN 'complete_scheduled_action' THEN
            PERFORM charter.complete_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'event_hash', (c->>'next_run_at')::timestamptz, v_now);
        WHEN 'skip_scheduled_action' THEN
            PERFORM charter.skip_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', (c->>'next_run_at')::timestamptz, v_now);
        WHEN 'fail_scheduled_action' THEN
            PERFORM charter.fail_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', v_now);
        WHEN 'reschedule_scheduled_action' THEN
            PERFORM charter.reschedule_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                (c->>'retry_at')::timestamptz, c->>'error', v_now);
        WHEN 'complete_automation_work' THEN
            PERFORM charter.complete_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'event_hash', v_now);
        WHEN 'skip_automation_work' THEN
            PERFORM charter.skip_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', v_now);
        WHEN 'fail_automation_work' THEN
            PERFORM charter.fail_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', v_now);
        WHEN 'retry_automation_work' THEN
            PERFORM charter.retry_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                (c->>'retry_at')::timestamptz, c->>'error', v_now);
        WHEN 'log_worker_attempt' THEN
            PERFORM charter.log_worker_attempt(c->>'kind', c->>'level', c->>'code',
                c->>'process_id', c->>'action', c->>'event_hash', c->>'message',
                c->'detail', v_now);
        ELSE
            RAISE EXCEPTION 'record_results_v1: unknown bookkeeping call %', c->>'fn';
        END CASE;
    END LOOP;
END
$function$;
GRANT EXECUTE ON FUNCTION record_results_v1(jsonb) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.release_automation_work(p_id uuid, p_token uuid)
 RETURNS boolean
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    WITH released AS (
        UPDATE charter.automation_queue
        SET status = 'pending',
            claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
        WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released)
$function$;
GRANT EXECUTE ON FUNCTION release_automation_work(uuid,uuid) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.release_scheduled_action(p_id uuid, p_token uuid)
 RETURNS boolean
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
    WITH released AS (
        UPDATE charter.scheduled_actions
        SET status = 'active',
            claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
        WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released)
$function$;
GRANT EXECUTE ON FUNCTION release_scheduled_action(uuid,uuid) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.require_fired_by(p_id uuid, p_event_hash text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'charter', 'pg_temp'
AS $function$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM charter.automation_firings WHERE work_id = p_id AND event_hash = p_event_hash
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA06',
            MESSAGE = format('work row %s was not fired by event %s', p_id, p_event_hash);
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION charter.reschedule_scheduled_action(p_id uuid, p_token uuid, p_retry_at timestamp with time zone, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS scheduled_actions
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.scheduled_actions;
BEGIN
    UPDATE charter.scheduled_actions
    SET status = 'active',
        not_before = p_retry_at,
        attempts = attempts + 1,
        occurrence_attempts = occurrence_attempts + 1,
        last_attempt_at = coalesce(p_now, now()),
        last_attempt_result = 'transient_error',
        last_attempt_error = left(p_error, 2000),
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION reschedule_scheduled_action(uuid,uuid,timestamp with time zone,text,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.retry_automation_work(p_id uuid, p_token uuid, p_retry_at timestamp with time zone, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS automation_queue
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'pending', not_before = p_retry_at, attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'transient_error',
        last_error = left(p_error, 2000),
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION retry_automation_work(uuid,uuid,timestamp with time zone,text,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.skip_automation_work(p_id uuid, p_token uuid, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS automation_queue
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'skipped', completed_at = coalesce(p_now, now()), attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'skipped',
        last_error = left(p_reason, 2000),
        claimed_by = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION skip_automation_work(uuid,uuid,text,timestamp with time zone) TO charter_worker;

CREATE OR REPLACE FUNCTION charter.skip_scheduled_action(p_id uuid, p_token uuid, p_reason text, p_next_run_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS scheduled_actions
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'charter', 'pg_temp'
AS $function$
DECLARE
    result charter.scheduled_actions;
BEGIN
    UPDATE charter.scheduled_actions
    SET status = CASE WHEN p_next_run_at IS NULL THEN 'skipped' ELSE 'active' END,
        run_at = coalesce(p_next_run_at, run_at),
        not_before = NULL,
        attempts = attempts + 1,
        occurrence_attempts = 0,
        last_attempt_at = coalesce(p_now, now()),
        last_attempt_result = 'skipped',
        last_attempt_error = left(p_reason, 2000),
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$function$;
GRANT EXECUTE ON FUNCTION skip_scheduled_action(uuid,uuid,text,timestamp with time zone,timestamp with time zone) TO charter_worker;
