-- register_machine --
-- Register a machine: its target, owner principal and DPoP key thumbprint.
INSERT INTO charter.machines (id, target, principal, thumbprint, public_jwk, created_at)
VALUES (%(id)s, %(target)s, %(principal)s, %(thumbprint)s, %(public_jwk)s,
        coalesce(%(now)s, now()))
RETURNING *

-- list_machines --
-- A principal's machines (every machine when all is true), oldest first, each with its
-- latest DPoP proof still remembered (proofs are pruned minutes after they expire, so an
-- older visit shows as NULL) and its running runs (the partial index runs_leases).
SELECT m.*,
       (SELECT max(d.seen_at) FROM charter.dpop_proofs d WHERE d.machine_id = m.id)
           AS last_seen_at,
       (SELECT count(*) FROM charter.runs r
        WHERE r.status = 'running' AND r.lease_owner = m.id) AS runs_in_progress
FROM charter.machines m
WHERE %(all)s OR m.principal = %(principal)s
ORDER BY m.created_at, m.id

-- set_machine_disabled --
-- Disable (or enable again) a machine of the principal's (any machine when all is true).
UPDATE charter.machines
SET disabled_at = CASE WHEN %(disabled)s THEN coalesce(disabled_at, coalesce(%(now)s, now()))
                       ELSE NULL END
WHERE id = %(id)s AND (%(all)s OR principal = %(principal)s)
RETURNING *

-- machine_by_thumbprint --
-- The machine whose DPoP key has this RFC 7638 thumbprint.
SELECT id, target, principal, thumbprint, disabled_at IS NOT NULL AS disabled
FROM charter.machines
WHERE thumbprint = %(thumbprint)s

-- remember_dpop_jti --
-- Record a DPoP proof's jti; nothing back when it was seen before (a replay).
INSERT INTO charter.dpop_proofs (jti, machine_id, seen_at, expires_at)
VALUES (%(jti)s, %(machine_id)s, coalesce(%(now)s, now()), %(expires_at)s)
ON CONFLICT (jti) DO NOTHING
RETURNING jti

-- prune_dpop_proofs --
-- Forget up to 200 expired jti rows (no proof naming them can pass the iat window). One
-- pruner at a time (a transaction-scoped advisory lock), so pruners never wait on or
-- deadlock with each other; the others simply skip pruning.
WITH gate AS (
    SELECT pg_try_advisory_xact_lock(hashtext('charter.dpop_proofs.prune')) AS open
)
DELETE FROM charter.dpop_proofs p
USING gate
WHERE gate.open
  AND p.jti IN (
      SELECT jti FROM charter.dpop_proofs
      WHERE expires_at < coalesce(%(now)s, now())
      LIMIT 200
  )

-- claim_expired_run --
-- Take over a running run of the machine's target and principal whose lease expired: it
-- resumes at its first incomplete step under a fresh lease.
UPDATE charter.runs r
SET lease_owner = %(machine_id)s,
    lease_token = gen_random_uuid(),
    lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s),
    attempts = r.attempts + 1
FROM (
    SELECT id FROM charter.runs
    WHERE status = 'running' AND target = %(target)s AND principal = %(principal)s
      AND lease_expires_at <= coalesce(%(now)s, now())
    ORDER BY lease_expires_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) candidate
WHERE r.id = candidate.id
RETURNING r.*

-- claim_pending_run --
-- Claim the oldest pending run of the machine's target and principal whose retry time
-- has come: running, with a fresh lease token and expiry, one more attempt.
UPDATE charter.runs r
SET status = 'running',
    lease_owner = %(machine_id)s,
    lease_token = gen_random_uuid(),
    lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s),
    attempts = r.attempts + 1,
    started_at = coalesce(r.started_at, coalesce(%(now)s, now())),
    retry_at = NULL
FROM (
    SELECT id FROM charter.runs
    WHERE status = 'pending' AND target = %(target)s AND principal = %(principal)s
      AND coalesce(retry_at, created_at) <= coalesce(%(now)s, now())
    ORDER BY coalesce(retry_at, created_at), id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) candidate
WHERE r.id = candidate.id
RETURNING r.*

-- hold_lease --
-- Lock a run if the machine holds its current, unexpired lease under this token.
SELECT * FROM charter.runs
WHERE id = %(run_id)s AND status = 'running'
  AND lease_owner = %(machine_id)s AND lease_token = %(token)s
  AND lease_expires_at > coalesce(%(now)s, now())
FOR UPDATE

-- renew_lease --
-- Extend a current lease; nothing back when the lease is not current any more.
UPDATE charter.runs
SET lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s)
WHERE id = %(run_id)s AND status = 'running'
  AND lease_owner = %(machine_id)s AND lease_token = %(token)s
  AND lease_expires_at > coalesce(%(now)s, now())
RETURNING lease_token, lease_expires_at

-- start_step --
-- Journal a step as running before its action is invoked: a new row, or a row that is
-- not completed marked running again (one more attempt). Nothing back for a completed
-- step: it is never invoked again. The idempotency key of an existing row never changes.
INSERT INTO charter.run_steps AS s (run_id, step_id, position, status, idempotency_key,
                                    started_at)
VALUES (%(run_id)s, %(step_id)s, %(position)s, 'running', %(idempotency_key)s,
        coalesce(%(now)s, now()))
ON CONFLICT (run_id, step_id) DO UPDATE
SET status = 'running',
    attempts = s.attempts + 1,
    error = NULL,
    started_at = EXCLUDED.started_at,
    finished_at = NULL
WHERE s.status <> 'completed'
RETURNING *

-- complete_step --
-- Journal a running step's output; nothing back when the step is not running.
UPDATE charter.run_steps
SET status = 'completed', output = %(output)s, error = NULL,
    finished_at = coalesce(%(now)s, now())
WHERE run_id = %(run_id)s AND step_id = %(step_id)s AND status = 'running'
RETURNING *

-- run_step --
-- One journal row.
SELECT * FROM charter.run_steps WHERE run_id = %(run_id)s AND step_id = %(step_id)s

-- fail_running_steps --
-- Mark a run's running steps failed with the error that stopped them.
UPDATE charter.run_steps
SET status = 'failed', error = %(error)s, finished_at = coalesce(%(now)s, now())
WHERE run_id = %(run_id)s AND status = 'running'
RETURNING *

-- finish_run --
-- Complete or fail a run; its lease ends (the owner stays recorded).
UPDATE charter.runs
SET status = %(status)s, output = %(output)s, error = %(error)s,
    finished_at = coalesce(%(now)s, now()), lease_token = NULL, lease_expires_at = NULL
WHERE id = %(run_id)s
RETURNING *

-- release_run --
-- Return a run to the queue after a transient failure, claimable again at a bounded
-- future retry time; its completed step outputs stay in the journal.
UPDATE charter.runs
SET status = 'pending', lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
    error = %(error)s,
    retry_at = least(
        greatest(coalesce(%(retry_at)s,
                          coalesce(%(now)s, now()) + make_interval(secs => %(default_delay)s)),
                 coalesce(%(now)s, now())),
        coalesce(%(now)s, now()) + make_interval(secs => %(max_delay)s))
WHERE id = %(run_id)s
RETURNING *

-- listen_for_runs --
-- Subscribe the API's wake-up connection to the hints that runs became claimable.
LISTEN runs_claimable
