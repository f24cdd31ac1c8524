-- lock_migrations --
-- Serialize migrators for the rest of the transaction (two processes migrating at once).
SELECT pg_advisory_xact_lock(hashtext('charter.migrations'))

-- bootstrap_migrations --
-- Create the schema and the table that records applied migrations, if missing.
CREATE SCHEMA IF NOT EXISTS charter;
CREATE TABLE IF NOT EXISTS charter.schema_migrations (
    version integer PRIMARY KEY CHECK (version >= 1),
    name text NOT NULL,
    checksum text NOT NULL CHECK (checksum ~ '^[0-9a-f]{64}$'),
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- record_migration --
-- Record a migration first in its own transaction; no row back means it was already applied.
INSERT INTO charter.schema_migrations (version, name, checksum)
VALUES (%(version)s, %(name)s, %(checksum)s)
ON CONFLICT (version) DO NOTHING
RETURNING version

-- applied_migrations --
-- Every recorded migration in order.
SELECT version, name, checksum, applied_at
FROM charter.schema_migrations
ORDER BY version

-- migrations_table_exists --
-- Whether this database has been migrated at all.
SELECT to_regclass('charter.schema_migrations') IS NOT NULL
