-- Privileges (docs/architecture.md): the engine is the only writer of governed state; the worker
-- and the reader read. Nobody but the owner may TRUNCATE, and triggers stop even that.

REVOKE ALL ON ALL TABLES IN SCHEMA charter FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA charter FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA charter FROM PUBLIC;

GRANT SELECT ON
    charter.actors, charter.actor_keys, charter.workflow_definitions,
    charter.workflow_deployments, charter.processes, charter.events, charter.system_log,
    charter.scheduled_actions, charter.automation_queue, charter.schema_migrations
TO charter_engine, charter_worker, charter_reader;

-- The engine: processes advance, events and log rows append, the registry appends,
-- actors are registered, work rows are created and cancelled.
GRANT INSERT ON charter.processes TO charter_engine;
GRANT UPDATE (state, data, head_hash, seq, updated_at) ON charter.processes TO charter_engine;
GRANT INSERT ON charter.events, charter.system_log TO charter_engine;
GRANT INSERT ON charter.workflow_definitions, charter.workflow_deployments TO charter_engine;
GRANT INSERT ON charter.actors, charter.actor_keys TO charter_engine;
GRANT UPDATE (roles, disabled_at, updated_at) ON charter.actors TO charter_engine;
GRANT UPDATE (retired_at) ON charter.actor_keys TO charter_engine;
GRANT INSERT ON charter.scheduled_actions, charter.automation_queue TO charter_engine;
GRANT UPDATE (status, cancelled_at, cancelled_by_event_hash, cancel_reason)
    ON charter.scheduled_actions TO charter_engine;

-- Trigger functions run as the caller; they need no EXECUTE grant of their own.
