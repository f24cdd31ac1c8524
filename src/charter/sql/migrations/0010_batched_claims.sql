-- Claims for the batched firing path (DESIGN §6.4): the automation worker claims due
-- work, fires it and records the results in one transaction. These claims also lock
-- each claimed row's process (FOR NO KEY UPDATE, as the engine's own lock), skipping
-- rows whose process another transaction holds, so a batch never waits for a person's
-- event and two batches can never deadlock: every lock is taken here, or not at all.
-- The lease they set only matters if the transaction commits with the row still
-- claimed; a crash rolls the claim back with everything else.

CREATE FUNCTION charter.claim_due_scheduled_v2(
    p_worker text, p_lease_seconds integer, p_limit integer, p_now timestamptz DEFAULT NULL
) RETURNS SETOF charter.scheduled_actions
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    WITH due AS (
        SELECT s.id FROM charter.scheduled_actions s
        JOIN charter.processes p ON p.id = s.process_id
        WHERE s.status = 'active' AND coalesce(s.not_before, s.run_at) <= coalesce(p_now, now())
        ORDER BY coalesce(s.not_before, s.run_at)
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED
        FOR NO KEY UPDATE OF p SKIP LOCKED
    )
    UPDATE charter.scheduled_actions s
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    FROM due
    WHERE s.id = due.id
    RETURNING s.*
$$;

CREATE FUNCTION charter.claim_ready_queue_v2(
    p_worker text, p_lease_seconds integer, p_limit integer, p_now timestamptz DEFAULT NULL
) RETURNS SETOF charter.automation_queue
LANGUAGE sql SECURITY DEFINER SET search_path = charter, pg_temp AS $$
    WITH ready AS (
        SELECT q.id FROM charter.automation_queue q
        JOIN charter.processes p ON p.id = q.process_id
        WHERE q.status = 'pending' AND coalesce(q.not_before, q.queued_at) <= coalesce(p_now, now())
        ORDER BY coalesce(q.not_before, q.queued_at)
        LIMIT p_limit
        FOR UPDATE OF q SKIP LOCKED
        FOR NO KEY UPDATE OF p SKIP LOCKED
    )
    UPDATE charter.automation_queue q
    SET status = 'claimed', claimed_by = p_worker, claimed_at = coalesce(p_now, now()),
        lease_expires_at = coalesce(p_now, now()) + make_interval(secs => p_lease_seconds),
        lease_token = gen_random_uuid()
    FROM ready
    WHERE q.id = ready.id
    RETURNING q.*
$$;

REVOKE EXECUTE ON FUNCTION
    charter.claim_due_scheduled_v2(text, integer, integer, timestamptz),
    charter.claim_ready_queue_v2(text, integer, integer, timestamptz)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    charter.claim_due_scheduled_v2(text, integer, integer, timestamptz),
    charter.claim_ready_queue_v2(text, integer, integer, timestamptz)
TO charter_worker;
