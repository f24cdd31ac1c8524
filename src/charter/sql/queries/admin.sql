-- database_exists --
-- Whether a database of that name exists on the server.
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = %(name)s)

-- create_charter_database --
-- The embedded server's Charter database; UTF-8 so canonical JSON hashes as stored.
CREATE DATABASE charter ENCODING 'UTF8' TEMPLATE template0

-- health --
-- The database answers and reports the latest applied migration.
SELECT coalesce(max(version), 0) FROM charter.schema_migrations

-- create_scratch_database --
-- A throwaway database of one test run ({name} is composed as an identifier); UTF-8 so
-- canonical JSON hashes as stored.
CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0

-- drop_scratch_database --
-- Drop a throwaway database, ending the sessions still connected to it.
DROP DATABASE IF EXISTS {name} WITH (FORCE)
