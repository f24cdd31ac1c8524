-- claim_scheduled_actions --
-- Claim due scheduled actions under a lease (FOR UPDATE SKIP LOCKED inside).
SELECT * FROM charter.claim_scheduled_actions(%(worker)s, %(lease_seconds)s, %(limit)s, %(now)s)

-- claim_scheduled_action --
-- Claim one active scheduled action if it is due.
SELECT * FROM charter.claim_scheduled_action(%(id)s, %(worker)s, %(lease_seconds)s, %(now)s)

-- complete_scheduled_action --
-- Record an accepted fire; the row exhausts or waits for its next run.
SELECT * FROM charter.complete_scheduled_action(%(id)s, %(token)s, %(event_hash)s,
                                                %(next_run_at)s, %(now)s)

-- skip_scheduled_action --
-- Record a business skip; a recurring row waits for its next run.
SELECT * FROM charter.skip_scheduled_action(%(id)s, %(token)s, %(reason)s, %(next_run_at)s,
                                            %(now)s)

-- fail_scheduled_action --
-- Record a permanent failure.
SELECT * FROM charter.fail_scheduled_action(%(id)s, %(token)s, %(reason)s, %(now)s)

-- reschedule_scheduled_action --
-- Record a transient failure; the same occurrence is retried at retry_at.
SELECT * FROM charter.reschedule_scheduled_action(%(id)s, %(token)s, %(retry_at)s, %(error)s,
                                                  %(now)s)

-- release_scheduled_action --
-- Give a claimed scheduled action back untouched.
SELECT charter.release_scheduled_action(%(id)s, %(token)s)

-- claim_automation_work_batch --
-- Claim ready queue rows under a lease (FOR UPDATE SKIP LOCKED inside).
SELECT * FROM charter.claim_automation_work_batch(%(worker)s, %(lease_seconds)s, %(limit)s,
                                                  %(now)s)

-- claim_automation_work --
-- Claim one pending queue row.
SELECT * FROM charter.claim_automation_work(%(id)s, %(worker)s, %(lease_seconds)s, %(now)s)

-- complete_automation_work --
-- Record an accepted fire of a queue row.
SELECT * FROM charter.complete_automation_work(%(id)s, %(token)s, %(event_hash)s, %(now)s)

-- skip_automation_work --
-- Record a business skip of a queue row.
SELECT * FROM charter.skip_automation_work(%(id)s, %(token)s, %(reason)s, %(now)s)

-- fail_automation_work --
-- Record a permanent failure of a queue row.
SELECT * FROM charter.fail_automation_work(%(id)s, %(token)s, %(reason)s, %(now)s)

-- retry_automation_work --
-- Record a transient failure; the row is claimable again at retry_at.
SELECT * FROM charter.retry_automation_work(%(id)s, %(token)s, %(retry_at)s, %(error)s, %(now)s)

-- release_automation_work --
-- Give a claimed queue row back untouched.
SELECT charter.release_automation_work(%(id)s, %(token)s)

-- reclaim_expired_leases --
-- Return rows whose lease ran out to their queues.
SELECT scheduled, queued FROM charter.reclaim_expired_leases(%(now)s)

-- log_worker_attempt --
-- Append the worker's diagnostics to the system log.
SELECT charter.log_worker_attempt(%(kind)s, %(level)s, %(code)s, %(process_id)s, %(action)s,
                                  %(event_hash)s, %(message)s, %(detail)s, %(now)s)

-- next_wakeup --
-- When the worker next has something to do: the earliest active run_at, the earliest
-- claimable queue row, the earliest lease to expire.
SELECT least(
    (SELECT min(coalesce(not_before, run_at)) FROM charter.scheduled_actions
     WHERE status = 'active'),
    (SELECT min(coalesce(not_before, queued_at)) FROM charter.automation_queue
     WHERE status = 'pending'),
    (SELECT min(lease_expires_at) FROM charter.scheduled_actions WHERE status = 'claimed'),
    (SELECT min(lease_expires_at) FROM charter.automation_queue WHERE status = 'claimed')
)

-- process_head --
-- The head a fired event must extend.
SELECT head_hash FROM charter.processes WHERE id = %(id)s

-- automation_actor_keys --
-- The automation actor's active public key, if the actor exists.
SELECT k.public_key
FROM charter.actor_keys k
WHERE k.actor_id = 'automation' AND k.retired_at IS NULL

-- listen_for_work --
-- Subscribe the listener connection to both wake-up channels.
LISTEN scheduled_actions_changed;
LISTEN automation_queue_changed

-- lock_due_scheduled --
-- Lock due scheduled actions and their processes for this transaction (batched firing;
-- rows whose process another transaction holds are skipped).
SELECT * FROM charter.lock_due_scheduled_v1(%(limit)s, %(now)s)

-- lock_due --
-- lock_ready_queue_v1, then lock_due_scheduled_v1 for what the limit leaves, in one
-- statement where two round trips followed each other: the scalar subquery makes the
-- scheduled lock wait for the queue's to finish, and a limit it leaves at 0 locks
-- nothing. Each row names its lane and carries the columns either record keeps (NULL
-- where they are the other lane's); queue rows first, each lane in due order.
WITH q AS MATERIALIZED (
    SELECT * FROM charter.lock_ready_queue_v1(%(limit)s, %(now)s)
), s AS MATERIALIZED (
    SELECT * FROM charter.lock_due_scheduled_v1(
        %(limit)s - (SELECT count(*) FROM q)::integer, %(now)s)
)
SELECT 'queue' AS lane, coalesce(not_before, queued_at) AS due,
       id, process_id, workflow_path, action_name, action_data, status, attempts,
       claimed_by, lease_expires_at, lease_token,
       reason, available_state, queued_by_event_hash, queued_by_action, queued_by_actor,
       queued_at, cascade_depth, cascade_origin_event_hash,
       NULL::text AS schedule_id, NULL::timestamptz AS run_at,
       NULL::timestamptz AS not_before, NULL::text AS "interval",
       NULL::timestamptz AS until_ts, NULL::integer AS max_count,
       NULL::integer AS fire_count, NULL::text AS created_event_hash,
       NULL::text AS created_by_action, NULL::text AS created_by_actor,
       NULL::timestamptz AS created_at, NULL::integer AS occurrence_attempts
FROM q
UNION ALL
SELECT 'scheduled', coalesce(not_before, run_at),
       id, process_id, workflow_path, action_name, action_data, status, attempts,
       claimed_by, lease_expires_at, lease_token,
       NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL,
       schedule_id, run_at,
       not_before, "interval",
       until_ts, max_count,
       fire_count, created_event_hash,
       created_by_action, created_by_actor,
       created_at, occurrence_attempts
FROM s
ORDER BY lane, due

-- lock_ready_queue --
-- Lock ready queue rows and their processes for this transaction (batched firing).
SELECT * FROM charter.lock_ready_queue_v1(%(limit)s, %(now)s)

-- process_heads --
-- The heads of the processes a batch fires on (locked by its claims).
SELECT id, head_hash FROM charter.processes WHERE id = ANY(%(ids)s)

-- batch_limits --
-- Bound a firing batch: a lock it would wait for longer, or a worker paused inside it
-- past its lease, rolls the batch back instead of holding its locks.
SELECT set_config('lock_timeout', %(lock_timeout)s, true),
       set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, true)

-- record_results --
-- A batch's bookkeeping calls, in order, as one statement (migration 0012).
SELECT charter.record_results_v1(%(calls)s::jsonb)
