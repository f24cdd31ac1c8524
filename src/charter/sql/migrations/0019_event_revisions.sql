-- Each event records the revision of its workflow path that governed it, beside the
-- version (the definition's hash): "revision 3 of tutorial/order" reads better than a
-- hash, and a definition deployed twice (A, B, A again) is one version but two
-- revisions.
--
-- The engine decides under the newest revision of a path; the row takes the newest
-- revision of that path holding the event's version when it is written, which is that
-- revision (a redeploy of the same definition in between names the same rules).

ALTER TABLE charter.events
    ADD COLUMN workflow_revision integer CHECK (workflow_revision >= 1);

-- Which API token deployed a revision, beside its principal (`deployed_by`); null for a
-- deploy made without one (the CLI's direct database commands, earlier revisions).
ALTER TABLE charter.workflow_deployments ADD COLUMN deployed_by_token text;

CREATE FUNCTION charter.event_revision() RETURNS trigger
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    IF NEW.workflow_revision IS NULL THEN
        SELECT max(d.revision) INTO NEW.workflow_revision
        FROM charter.workflow_deployments d
        WHERE d.path = NEW.workflow_path AND d.version = NEW.workflow_version;
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION charter.event_revision() FROM PUBLIC;
CREATE TRIGGER events_revision BEFORE INSERT ON charter.events
    FOR EACH ROW EXECUTE FUNCTION charter.event_revision();

-- Events written before this migration: the newest revision holding their version that
-- was deployed by the time they were received, else the first one holding it. Events
-- are append-only; the guard is lifted for this one backfill, in this transaction.
ALTER TABLE charter.events DISABLE TRIGGER events_append_only;
UPDATE charter.events e
SET workflow_revision = coalesce(
    (SELECT max(d.revision) FROM charter.workflow_deployments d
     WHERE d.path = e.workflow_path AND d.version = e.workflow_version
       AND d.deployed_at <= e.received_at),
    (SELECT min(d.revision) FROM charter.workflow_deployments d
     WHERE d.path = e.workflow_path AND d.version = e.workflow_version));
ALTER TABLE charter.events ENABLE TRIGGER events_append_only;
