-- The database roles (docs/architecture.md) and the schema every Charter object lives in.
-- Roles are cluster-wide: create each once and tolerate a concurrent creator.
DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['charter_engine', 'charter_worker', 'charter_reader'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
END
$$;

-- A non-superuser owner must be a member to `SET ROLE` to each component role.
DO $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT charter_engine, charter_worker, charter_reader TO %I', current_user);
    END IF;
END
$$;

REVOKE ALL ON SCHEMA charter FROM PUBLIC;
GRANT USAGE ON SCHEMA charter TO charter_engine, charter_worker, charter_reader;


-- Shared guard: append-only rows raise CHA01 on UPDATE, DELETE and TRUNCATE.
CREATE FUNCTION charter.forbid_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'CHA01',
        MESSAGE = format('%s is append-only: %s is not allowed', TG_TABLE_NAME, TG_OP);
END
$$;
