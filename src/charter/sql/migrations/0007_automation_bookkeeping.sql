-- Exactly-once firing and the automation worker's bookkeeping functions (docs/automation.md).
--
-- The worker holds no write privilege on any table: it changes work rows only through
-- these SECURITY DEFINER functions, which touch nothing but work-row status, attempt,
-- lease and schedule fields (and append to system_log). Every function taking a lease
-- token refuses (CHA05) when the row is no longer claimed under that token, so a worker
-- paused past its lease cannot overwrite another worker's result or a cancellation.

-- One event per work occurrence: the engine inserts this row in the firing event's
-- transaction, so a second event for the same occurrence is a unique violation.
CREATE TABLE charter.automation_firings (
    work_id uuid NOT NULL,
    kind text NOT NULL CHECK (kind IN ('scheduled_action', 'auto_action')),
    -- The scheduled run_at fired, or the queue row's queued_at.
    occurrence timestamptz NOT NULL,
    process_id text NOT NULL REFERENCES charter.processes (id),
    event_hash text NOT NULL UNIQUE REFERENCES charter.events (hash),
    fired_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (work_id, occurrence)
);
CREATE TRIGGER automation_firings_append_only BEFORE UPDATE OR DELETE ON charter.automation_firings
    FOR EACH ROW EXECUTE FUNCTION charter.forbid_change();
CREATE TRIGGER automation_firings_no_truncate BEFORE TRUNCATE ON charter.automation_firings
    FOR EACH STATEMENT EXECUTE FUNCTION charter.forbid_change();

CREATE INDEX automation_queue_claimable
    ON charter.automation_queue (coalesce(not_before, queued_at)) WHERE status = 'pending';

-- Raised when a lease token no longer holds its row.
CREATE FUNCTION charter.lease_lost(p_table text, p_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'CHA05',
        MESSAGE = format('%s %s is no longer claimed under this lease', p_table, p_id);
END
$$;

-- === scheduled actions ================================================================

CREATE FUNCTION charter.claim_scheduled_actions(
    p_worker text, p_lease_seconds integer, p_limit integer, p_now timestamptz DEFAULT NULL
) RETURNS SETOF charter.scheduled_actions
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
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
$$;

CREATE FUNCTION charter.claim_scheduled_action(
    p_id uuid, p_worker text, p_lease_seconds integer, p_now timestamptz DEFAULT NULL
) RETURNS SETOF charter.scheduled_actions
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    UPDATE charter.scheduled_actions
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    -- Only when due: nobody fires an SLA escalation before its deadline.
    WHERE id = p_id AND status = 'active' AND coalesce(not_before, run_at) <= coalesce(p_now, now())
    RETURNING *
$$;

-- Accepted: count the fire; NULL p_next_run_at exhausts a row, else it waits for then.
CREATE FUNCTION charter.complete_scheduled_action(
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

-- Business skip: the engine refused the action; recurring rows go on at p_next_run_at.
CREATE FUNCTION charter.skip_scheduled_action(
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

CREATE FUNCTION charter.fail_scheduled_action(
    p_id uuid, p_token uuid, p_reason text, p_now timestamptz DEFAULT NULL
) RETURNS charter.scheduled_actions
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
DECLARE
    result charter.scheduled_actions;
BEGIN
    UPDATE charter.scheduled_actions
    SET status = 'failed',
        attempts = attempts + 1,
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

-- Transient failure: the same occurrence (run_at unchanged) is retried at p_retry_at.
CREATE FUNCTION charter.reschedule_scheduled_action(
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

-- Give a claim back untouched (graceful shutdown); a lost lease is not an error here.
CREATE FUNCTION charter.release_scheduled_action(p_id uuid, p_token uuid) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    WITH released AS (
        UPDATE charter.scheduled_actions
        SET status = 'active',
            claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
        WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released)
$$;

-- === the automatic-action queue =======================================================

CREATE FUNCTION charter.claim_automation_work_batch(
    p_worker text, p_lease_seconds integer, p_limit integer, p_now timestamptz DEFAULT NULL
) RETURNS SETOF charter.automation_queue
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
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
$$;

CREATE FUNCTION charter.claim_automation_work(
    p_id uuid, p_worker text, p_lease_seconds integer, p_now timestamptz DEFAULT NULL
) RETURNS SETOF charter.automation_queue
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    UPDATE charter.automation_queue
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    WHERE id = p_id AND status = 'pending'
    RETURNING *
$$;

CREATE FUNCTION charter.complete_automation_work(
    p_id uuid, p_token uuid, p_event_hash text, p_now timestamptz DEFAULT NULL
) RETURNS charter.automation_queue
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'completed', completed_at = coalesce(p_now, now()),
        fired_event_hash = p_event_hash, attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'accepted',
        last_error = NULL,
        claimed_by = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE FUNCTION charter.skip_automation_work(
    p_id uuid, p_token uuid, p_reason text, p_now timestamptz DEFAULT NULL
) RETURNS charter.automation_queue
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'skipped', completed_at = coalesce(p_now, now()), attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'skipped',
        last_error = left(p_reason, 2000),
        claimed_by = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE FUNCTION charter.fail_automation_work(
    p_id uuid, p_token uuid, p_reason text, p_now timestamptz DEFAULT NULL
) RETURNS charter.automation_queue
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'failed', completed_at = coalesce(p_now, now()), attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'failed',
        last_error = left(p_reason, 2000),
        claimed_by = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$$;

-- Transient failure: back to pending, not claimable before p_retry_at.
CREATE FUNCTION charter.retry_automation_work(
    p_id uuid, p_token uuid, p_retry_at timestamptz, p_error text, p_now timestamptz DEFAULT NULL
) RETURNS charter.automation_queue
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
DECLARE
    result charter.automation_queue;
BEGIN
    UPDATE charter.automation_queue
    SET status = 'pending', not_before = p_retry_at, attempts = attempts + 1,
        last_attempt_at = coalesce(p_now, now()), last_attempt_result = 'transient_error',
        last_error = left(p_error, 2000),
        claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
    WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE FUNCTION charter.release_automation_work(p_id uuid, p_token uuid) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    WITH released AS (
        UPDATE charter.automation_queue
        SET status = 'pending',
            claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, lease_token = NULL
        WHERE id = p_id AND status = 'claimed' AND lease_token = p_token
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released)
$$;

-- === shared =============================================================================

-- Return rows whose lease ran out to their queues (Graphile's resetLockedAt).
CREATE FUNCTION charter.reclaim_expired_leases(p_now timestamptz DEFAULT NULL)
RETURNS TABLE (scheduled integer, queued integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
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
$$;

-- The worker's diagnostics go to the append-only system log.
CREATE FUNCTION charter.log_worker_attempt(
    p_kind text, p_level text, p_code text, p_process_id text, p_action text,
    p_event_hash text, p_message text, p_detail jsonb, p_now timestamptz DEFAULT NULL
) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    INSERT INTO charter.system_log (kind, level, code, process_id, actor, action, event_hash,
                                    message, detail, at)
    VALUES ('worker.' || p_kind, p_level, p_code, p_process_id, 'automation', p_action,
            p_event_hash, left(p_message, 2000), coalesce(p_detail, '{}'), coalesce(p_now, now()))
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA charter FROM PUBLIC;
REVOKE ALL ON charter.automation_firings FROM PUBLIC;
GRANT SELECT ON charter.automation_firings TO charter_engine, charter_worker, charter_reader;
GRANT INSERT ON charter.automation_firings TO charter_engine;
GRANT EXECUTE ON FUNCTION
    charter.claim_scheduled_actions(text, integer, integer, timestamptz),
    charter.claim_scheduled_action(uuid, text, integer, timestamptz),
    charter.complete_scheduled_action(uuid, uuid, text, timestamptz, timestamptz),
    charter.skip_scheduled_action(uuid, uuid, text, timestamptz, timestamptz),
    charter.fail_scheduled_action(uuid, uuid, text, timestamptz),
    charter.reschedule_scheduled_action(uuid, uuid, timestamptz, text, timestamptz),
    charter.release_scheduled_action(uuid, uuid),
    charter.claim_automation_work_batch(text, integer, integer, timestamptz),
    charter.claim_automation_work(uuid, text, integer, timestamptz),
    charter.complete_automation_work(uuid, uuid, text, timestamptz),
    charter.skip_automation_work(uuid, uuid, text, timestamptz),
    charter.fail_automation_work(uuid, uuid, text, timestamptz),
    charter.retry_automation_work(uuid, uuid, timestamptz, text, timestamptz),
    charter.release_automation_work(uuid, uuid),
    charter.reclaim_expired_leases(timestamptz),
    charter.log_worker_attempt(text, text, text, text, text, text, text, jsonb, timestamptz)
TO charter_worker;
