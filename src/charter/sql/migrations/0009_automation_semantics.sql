-- Automation semantics (docs/automation.md): a retry budget per occurrence, and bounded
-- cascades of automatic actions.

-- Attempts of the occurrence now due: reset when an occurrence is accepted or skipped,
-- kept across transient retries. `attempts` stays as the row's lifetime count (a
-- diagnostic); the retry budget and the backoff are decided with this one.
ALTER TABLE charter.scheduled_actions
    ADD COLUMN occurrence_attempts integer NOT NULL DEFAULT 0
        CHECK (occurrence_attempts >= 0);

-- How many automatic events in a row led to this queue row (0: it was queued by an
-- event that is not an automatic action), and that first event. The engine refuses to
-- go on past a limit: the row is then written `failed` with a diagnostic.
ALTER TABLE charter.automation_queue
    ADD COLUMN cascade_depth integer NOT NULL DEFAULT 0 CHECK (cascade_depth >= 0),
    ADD COLUMN cascade_origin_event_hash text REFERENCES charter.events (hash);

-- === scheduled actions: the budget counts the current occurrence =====================

CREATE OR REPLACE FUNCTION charter.complete_scheduled_action(
    p_id uuid, p_token uuid, p_event_hash text, p_next_run_at timestamptz,
    p_now timestamptz DEFAULT NULL
) RETURNS charter.scheduled_actions
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
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
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION charter.skip_scheduled_action(
    p_id uuid, p_token uuid, p_reason text, p_next_run_at timestamptz,
    p_now timestamptz DEFAULT NULL
) RETURNS charter.scheduled_actions
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
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
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION charter.fail_scheduled_action(
    p_id uuid, p_token uuid, p_reason text, p_now timestamptz DEFAULT NULL
) RETURNS charter.scheduled_actions
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
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
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION charter.reschedule_scheduled_action(
    p_id uuid, p_token uuid, p_retry_at timestamptz, p_error text, p_now timestamptz DEFAULT NULL
) RETURNS charter.scheduled_actions
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
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
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$$;
