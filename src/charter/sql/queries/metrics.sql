-- live_state --
-- What /metrics reports of the work in the database at scrape time. Only live rows are
-- counted (the partial indexes on status cover them): finished rows grow without bound
-- and are counted as they finish, by the fire and run counters.
SELECT
    (SELECT count(*) FROM charter.scheduled_actions
      WHERE status = 'active' AND coalesce(not_before, run_at) <= now()) AS timers_due,
    (SELECT count(*) FROM charter.scheduled_actions
      WHERE status = 'active' AND coalesce(not_before, run_at) <= now() + interval '1 hour')
        AS timers_due_next_hour,
    (SELECT extract(epoch FROM now() - min(coalesce(not_before, run_at)))
       FROM charter.scheduled_actions
      WHERE status = 'active' AND coalesce(not_before, run_at) <= now()) AS oldest_due_seconds,
    (SELECT count(*) FROM charter.scheduled_actions WHERE status = 'claimed') AS timers_claimed,
    (SELECT count(*) FROM charter.automation_queue WHERE status = 'pending') AS queue_pending,
    (SELECT count(*) FROM charter.automation_queue WHERE status = 'claimed') AS queue_claimed,
    (SELECT count(*) FROM charter.runs WHERE status = 'pending') AS runs_pending,
    (SELECT count(*) FROM charter.runs WHERE status = 'running') AS runs_running,
    (SELECT count(DISTINCT machine_id) FROM charter.dpop_proofs
      WHERE seen_at > now() - interval '5 minutes') AS machines_seen
