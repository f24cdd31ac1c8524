-- Actors and their keys; the append-only workflow registry.

CREATE TABLE charter.actors (
    id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    roles text[] NOT NULL DEFAULT '{}' CHECK (array_position(roles, NULL) IS NULL),
    disabled_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- Only the automation actor may hold AUTOMATION (docs/automation.md).
    CONSTRAINT automation_role_reserved CHECK (id = 'automation' OR NOT 'AUTOMATION' = ANY (roles))
);

-- An actor is its public key; rotation retires a key but never forgets it, so the
-- history it signed stays verifiable.
CREATE TABLE charter.actor_keys (
    public_key text PRIMARY KEY CHECK (public_key ~ '^[0-9a-f]{64}$'),
    actor_id text NOT NULL REFERENCES charter.actors (id),
    added_at timestamptz NOT NULL DEFAULT now(),
    retired_at timestamptz,
    CHECK (retired_at IS NULL OR retired_at >= added_at)
);
CREATE UNIQUE INDEX actor_keys_one_active ON charter.actor_keys (actor_id) WHERE retired_at IS NULL;

-- Keys are never deleted and only ever retired once.
CREATE FUNCTION charter.guard_actor_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;
CREATE TRIGGER actor_keys_guard BEFORE UPDATE OR DELETE ON charter.actor_keys
    FOR EACH ROW EXECUTE FUNCTION charter.guard_actor_keys();
CREATE TRIGGER actor_keys_no_truncate BEFORE TRUNCATE ON charter.actor_keys
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

-- Content-addressed workflow definitions: `version` is the SHA-256 of the exact
-- canonical (RFC 8785) text, which the database checks itself.
CREATE TABLE charter.workflow_definitions (
    version text PRIMARY KEY CHECK (version ~ '^[0-9a-f]{64}$'),
    definition json NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT version_is_definition_hash
        CHECK (version = encode(sha256(convert_to(definition::text, 'UTF8')), 'hex'))
);

-- Each deployment of a path appends a revision; the highest revision is current.
CREATE TABLE charter.workflow_deployments (
    path text NOT NULL CHECK (
        path ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}(/[A-Za-z0-9][A-Za-z0-9._:-]{0,127})*$'
        AND length(path) <= 1024
    ),
    revision integer NOT NULL CHECK (revision >= 1),
    version text NOT NULL REFERENCES charter.workflow_definitions (version),
    deployed_at timestamptz NOT NULL DEFAULT now(),
    deployed_by text,
    PRIMARY KEY (path, revision)
);

CREATE TRIGGER workflow_definitions_append_only BEFORE UPDATE OR DELETE ON charter.workflow_definitions
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER workflow_definitions_no_truncate BEFORE TRUNCATE ON charter.workflow_definitions
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER workflow_deployments_append_only BEFORE UPDATE OR DELETE ON charter.workflow_deployments
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER workflow_deployments_no_truncate BEFORE TRUNCATE ON charter.workflow_deployments
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();
