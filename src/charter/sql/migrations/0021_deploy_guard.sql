-- Deploy plans and their guard (docs/lifecycle.md): a revision records whether its deploy
-- was allowed to strand processes, and the state map of the migration it came with.

ALTER TABLE charter.workflow_deployments
    ADD COLUMN allow_stranding boolean NOT NULL DEFAULT false,
    ADD COLUMN migration_map jsonb;

ALTER TABLE charter.workflow_deployments ADD CONSTRAINT workflow_deployments_migration_map_object
    CHECK (migration_map IS NULL OR jsonb_typeof(migration_map) = 'object');
