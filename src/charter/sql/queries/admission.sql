-- lock_due_schedule_triggers --
-- Lock the enabled schedule triggers of enabled automations that are due and have
-- occurrences left, oldest first; triggers another admitting process holds are skipped.
SELECT t.id, t.automation_id, t.cron, t.timezone, t.next_run_at, t.remaining_occurrences
FROM charter.schedule_triggers t
JOIN charter.automations a ON a.id = t.automation_id
WHERE t.enabled AND a.enabled
  AND t.next_run_at <= coalesce(%(now)s::timestamptz, now())
  AND (t.remaining_occurrences IS NULL OR t.remaining_occurrences > 0)
ORDER BY t.next_run_at, t.id
LIMIT %(limit)s
FOR UPDATE OF t SKIP LOCKED

-- advance_schedule_trigger --
-- Move a locked schedule trigger past the occurrences admitted (updated_at tracks
-- changes of its definition, so it stays).
UPDATE charter.schedule_triggers
SET next_run_at = %(next_run_at)s, remaining_occurrences = %(remaining_occurrences)s
WHERE id = %(id)s

-- webhook_trigger_candidates --
-- The enabled webhook triggers of a principal's automations on a target for a source,
-- with their secrets (engine role only); paused automations are included so their
-- deliveries still authenticate, and admission then admits nothing for them.
SELECT t.id, t.automation_id, t.event, t.secret
FROM charter.webhook_triggers t
JOIN charter.automations a ON a.id = t.automation_id
WHERE a.principal = %(principal)s AND a.target = %(target)s
  AND t.source = %(source)s AND t.enabled
ORDER BY t.created_at, t.id
