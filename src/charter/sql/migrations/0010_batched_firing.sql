-- The batched firing path (docs/automation.md): the automation worker locks due work, fires it
-- and records the results in one transaction. The lock is the claim: nothing else may
-- fire, cancel or record a row this transaction holds, a crash rolls everything back,
-- and no lease (an UPDATE of every row, twice) is needed for work not held across
-- transactions. Leases stay for that: `claim_*` and the lease-token bookkeeping.

-- Lock due scheduled actions and their processes (FOR NO KEY UPDATE, as the engine's own
-- lock), skipping rows or processes another transaction holds: a batch never waits for a
-- person's event, and two batches cannot deadlock, since every lock is taken here or not
-- at all. The rows are returned as they are (still `active`).
CREATE FUNCTION charter.lock_due_scheduled_v1(p_limit integer, p_now timestamptz DEFAULT NULL)
RETURNS SETOF charter.scheduled_actions
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    SELECT s.* FROM charter.scheduled_actions s
    JOIN charter.processes p ON p.id = s.process_id
    WHERE s.status = 'active' AND coalesce(s.not_before, s.run_at) <= coalesce(p_now, now())
    ORDER BY coalesce(s.not_before, s.run_at)
    LIMIT p_limit
    FOR UPDATE OF s SKIP LOCKED
    FOR NO KEY UPDATE OF p SKIP LOCKED
$$;

-- The same for ready queue rows (still `pending`).
CREATE FUNCTION charter.lock_ready_queue_v1(p_limit integer, p_now timestamptz DEFAULT NULL)
RETURNS SETOF charter.automation_queue
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    SELECT q.* FROM charter.automation_queue q
    JOIN charter.processes p ON p.id = q.process_id
    WHERE q.status = 'pending' AND coalesce(q.not_before, q.queued_at) <= coalesce(p_now, now())
    ORDER BY coalesce(q.not_before, q.queued_at)
    LIMIT p_limit
    FOR UPDATE OF q SKIP LOCKED
    FOR NO KEY UPDATE OF p SKIP LOCKED
$$;

-- The engine's own hold on the rows a batch fires: FOR SHARE SKIP LOCKED skips a row
-- another transaction is changing and keeps any other from changing it until commit (the
-- worker's lock_* holds them already). A function: row locks need UPDATE privilege, which
-- the engine has no reason to hold on work rows.
CREATE FUNCTION charter.hold_scheduled_v1(p_ids uuid[]) RETURNS SETOF charter.scheduled_actions
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    SELECT * FROM charter.scheduled_actions WHERE id = ANY (p_ids) FOR SHARE SKIP LOCKED
$$;

CREATE FUNCTION charter.hold_queue_v1(p_ids uuid[]) RETURNS SETOF charter.automation_queue
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    SELECT * FROM charter.automation_queue WHERE id = ANY (p_ids) FOR SHARE SKIP LOCKED
$$;

-- A work row is recorded as fired only with the event the engine recorded firing it.
CREATE FUNCTION charter.require_fired_by(p_id uuid, p_event_hash text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = charter, pg_temp AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM charter.automation_firings WHERE work_id = p_id AND event_hash = p_event_hash
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CHA06',
            MESSAGE = format('work row %s was not fired by event %s', p_id, p_event_hash);
    END IF;
END
$$;

-- The bookkeeping functions take a NULL lease token for a row the caller holds in this
-- transaction (locked by lock_*, so still active or pending): as a claim would, they
-- require the row to be due. With a token, a leased claim is recorded as before.

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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    -- Refused after the lease check: a row that is not ours says so first.
    PERFORM charter.require_fired_by(p_id, p_event_hash);
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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'active'
              AND coalesce(not_before, run_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('scheduled action', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION charter.complete_automation_work(
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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    -- Refused after the lease check: a row that is not ours says so first.
    PERFORM charter.require_fired_by(p_id, p_event_hash);
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION charter.skip_automation_work(
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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION charter.fail_automation_work(
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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION charter.retry_automation_work(
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
    WHERE id = p_id AND (status = 'claimed' AND lease_token = p_token
           OR p_token IS NULL AND status = 'pending'
              AND coalesce(not_before, queued_at) <= coalesce(p_now, now()))
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM charter.lease_lost('automation work', p_id);
    END IF;
    RETURN result;
END
$$;

REVOKE EXECUTE ON FUNCTION
    charter.lock_due_scheduled_v1(integer, timestamptz),
    charter.lock_ready_queue_v1(integer, timestamptz),
    charter.require_fired_by(uuid, text),
    charter.hold_scheduled_v1(uuid[]),
    charter.hold_queue_v1(uuid[])
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION charter.hold_scheduled_v1(uuid[]), charter.hold_queue_v1(uuid[])
TO charter_engine;
GRANT EXECUTE ON FUNCTION
    charter.lock_due_scheduled_v1(integer, timestamptz),
    charter.lock_ready_queue_v1(integer, timestamptz)
TO charter_worker;
