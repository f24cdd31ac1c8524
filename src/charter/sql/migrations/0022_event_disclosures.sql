-- Personal values beside the signed record (docs/wire-format.md, "Envelope v2"): an event
-- commits to each personal input field by the digest of its disclosure
-- `[salt, pointer, value]`. The disclosure text is kept here, outside the envelope. Erasing
-- it leaves every hash and signature intact.
--
-- A row is never deleted: once erased, its digest and `erased_by` are the permanent
-- marker that the value existed and was erased by a governed event. Only
-- `charter.erase_disclosures` changes a row, once, from text to erased.

CREATE TABLE charter.event_disclosures (
    event_hash text NOT NULL REFERENCES charter.events (hash),
    pointer text NOT NULL CHECK (pointer ~ '^(/([^~/]|~[01])*)+$'),
    -- Unique across all events: a salt used twice would link two values.
    digest text NOT NULL UNIQUE CHECK (digest ~ '^[0-9a-f]{64}$'),
    disclosure text,
    -- The erase event, which is inserted after this row is changed in its transaction.
    erased_by text REFERENCES charter.events (hash) DEFERRABLE INITIALLY DEFERRED,
    PRIMARY KEY (event_hash, pointer),
    CONSTRAINT event_disclosures_erased_or_present
        CHECK ((disclosure IS NULL) = (erased_by IS NOT NULL)),
    CONSTRAINT event_disclosures_digest_of_text
        CHECK (disclosure IS NULL OR digest = encode(sha256(convert_to(disclosure, 'UTF8')), 'hex'))
);
CREATE INDEX event_disclosures_erased_by ON charter.event_disclosures (erased_by)
    WHERE erased_by IS NOT NULL;

-- The one change a row may undergo: text to erased, every other column as it was.
CREATE FUNCTION charter.guard_disclosure() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
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
$$;
CREATE TRIGGER event_disclosures_guard BEFORE UPDATE OR DELETE ON charter.event_disclosures
    FOR EACH ROW EXECUTE FUNCTION charter.guard_disclosure();
CREATE TRIGGER event_disclosures_no_truncate BEFORE TRUNCATE ON charter.event_disclosures
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

-- At commit: the event a row names as its eraser is a charter:erase of the same process.
CREATE FUNCTION charter.check_disclosure_eraser() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;
CREATE CONSTRAINT TRIGGER event_disclosures_eraser AFTER UPDATE ON charter.event_disclosures
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION charter.check_disclosure_eraser();

-- Erase the disclosures `targets` names (`[{"event": hash, "pointer": p}, ...]`), those not
-- erased yet, on behalf of `erase_event`; answers how many it erased.
CREATE FUNCTION charter.erase_disclosures(erase_event text, targets jsonb) RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    WITH erased AS (
        UPDATE charter.event_disclosures d
        SET disclosure = NULL, erased_by = erase_event
        FROM jsonb_to_recordset(targets) AS t(event text, pointer text)
        WHERE d.event_hash = t.event AND d.pointer = t.pointer AND d.disclosure IS NOT NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM erased
$$;
REVOKE EXECUTE ON FUNCTION charter.guard_disclosure() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.check_disclosure_eraser() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION charter.erase_disclosures(text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION charter.erase_disclosures(text, jsonb) TO charter_engine;

GRANT SELECT ON charter.event_disclosures TO charter_engine, charter_reader;
GRANT INSERT ON charter.event_disclosures TO charter_engine;

-- The scope that shows personal values: GET /v1/processes/{id}/events?disclosures=true.
ALTER TABLE charter.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE charter.api_tokens ADD CONSTRAINT api_tokens_scopes_check CHECK (
    cardinality(scopes) >= 1
    AND scopes <@ ARRAY[
        'automations:read', 'automations:write', 'runs:read', 'runs:execute',
        'processes:read', 'personal:read', 'workflows:write', 'actors:write', 'log:read', '*'
    ]::text[]
);
