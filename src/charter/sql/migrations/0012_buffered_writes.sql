-- The engine's writes of one or many events as one statement (docs/architecture.md,
-- "The write path"). The engine decides in Python and queues every write of an event
-- — the event, the new head, the firing it records, cancellations, schedules, queue rows
-- and log rows — then sends them all with one call of apply_writes_v1, in order: one
-- statement instead of a dozen, fewer round trips, less per-statement work on both
-- sides. It returns the wake-up hints only SQL can make (the rows a cancellation hit),
-- which the engine sends with its own after the COMMIT (engine/hints.py).
--
-- SECURITY INVOKER: the caller's privileges apply (the engine's role); the triggers and
-- constraints check every row as they would for separate statements.

CREATE FUNCTION charter.apply_writes_v1(p_ops jsonb) RETURNS jsonb
LANGUAGE plpgsql SET search_path = charter, pg_temp AS $$
DECLARE
    op jsonb;
    v_at timestamptz;
    cancelled record;
    hints jsonb := '[]';
BEGIN
    FOR op IN SELECT value FROM jsonb_array_elements(p_ops) LOOP
        v_at := coalesce((op->>'now')::timestamptz, now());
        CASE op->>'op'
        WHEN 'insert_event' THEN
            INSERT INTO charter.events (process_id, seq, hash, prev_hash, kind, envelope,
                signature, actor, actor_id, actor_roles, action, workflow_path,
                workflow_version, cause_hash, received_at)
            VALUES (op->>'process_id', (op->>'seq')::integer, op->>'hash', op->>'prev_hash',
                op->>'kind', (op->>'envelope')::json, op->>'signature', op->>'actor',
                op->>'actor_id', ARRAY(SELECT jsonb_array_elements_text(op->'actor_roles')),
                op->>'action', op->>'workflow_path', op->>'workflow_version',
                op->>'cause_hash', v_at);
        WHEN 'advance_process' THEN
            UPDATE charter.processes
            SET state = op->>'state', data = op->'data', head_hash = op->>'head_hash',
                seq = (op->>'seq')::integer, updated_at = v_at
            WHERE id = op->>'id';
        WHEN 'insert_firing' THEN
            INSERT INTO charter.automation_firings (work_id, kind, occurrence, process_id,
                event_hash, fired_at)
            VALUES ((op->>'work_id')::uuid, op->>'kind', (op->>'occurrence')::timestamptz,
                op->>'process_id', op->>'event_hash', v_at);
        WHEN 'cancel_schedules' THEN
            -- Only SQL knows which rows were live: each gets its hint here.
            FOR cancelled IN
                UPDATE charter.scheduled_actions
                SET status = 'cancelled', cancelled_at = v_at,
                    cancelled_by_event_hash = op->>'event_hash', cancel_reason = op->>'reason'
                WHERE process_id = op->>'process_id'
                  AND schedule_id = ANY (ARRAY(SELECT jsonb_array_elements_text(op->'schedule_ids')))
                  AND status IN ('active', 'claimed')
                RETURNING id, process_id, workflow_path, action_name, run_at
            LOOP
                hints := hints || jsonb_build_array(jsonb_build_array(
                    'scheduled_actions_changed',
                    jsonb_build_object(
                        'id', cancelled.id, 'process_id', cancelled.process_id,
                        'workflow_path', cancelled.workflow_path,
                        'action_name', cancelled.action_name,
                        'run_at', to_char(cancelled.run_at AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                        'kind', 'scheduled_action', 'op', 'cancelled')::text));
            END LOOP;
        WHEN 'insert_schedule' THEN
            INSERT INTO charter.scheduled_actions (id, schedule_id, process_id, workflow_path,
                action_name, action_data, run_at, interval, until_ts, max_count,
                created_event_hash, created_by_action, created_by_actor, created_at)
            VALUES ((op->>'id')::uuid, op->>'schedule_id', op->>'process_id',
                op->>'workflow_path', op->>'action_name', op->'action_data',
                (op->>'run_at')::timestamptz, op->>'interval', (op->>'until_ts')::timestamptz,
                (op->>'max_count')::integer, op->>'event_hash', op->>'action', op->>'actor', v_at);
        WHEN 'insert_auto_work' THEN
            -- With an error (its data does not render, the cascade limit is reached) the
            -- row is written failed at once; once per (process, action, causing event).
            INSERT INTO charter.automation_queue (id, process_id, workflow_path, action_name,
                action_data, reason, available_state, queued_by_event_hash, queued_by_action,
                queued_by_actor, queued_at, cascade_depth, cascade_origin_event_hash, status,
                completed_at, last_attempt_at, last_attempt_result, last_error)
            VALUES ((op->>'id')::uuid, op->>'process_id', op->>'workflow_path',
                op->>'action_name', op->'action_data', op->>'reason', op->>'available_state',
                op->>'event_hash', op->>'action', op->>'actor', v_at,
                (op->>'cascade_depth')::integer, op->>'cascade_origin',
                CASE WHEN op->>'error' IS NULL THEN 'pending' ELSE 'failed' END,
                CASE WHEN op->>'error' IS NULL THEN NULL ELSE v_at END,
                CASE WHEN op->>'error' IS NULL THEN NULL ELSE v_at END,
                CASE WHEN op->>'error' IS NULL THEN NULL ELSE 'failed' END,
                op->>'error')
            ON CONFLICT (process_id, action_name, queued_by_event_hash) DO NOTHING;
        WHEN 'log' THEN
            INSERT INTO charter.system_log (level, kind, code, process_id, actor, action,
                event_hash, message, detail, at)
            VALUES (op->>'level', op->>'kind', op->>'code', op->>'process_id', op->>'actor',
                op->>'action', op->>'event_hash', op->>'message', op->'detail', v_at);
        ELSE
            RAISE EXCEPTION 'apply_writes_v1: unknown write %', op->>'op';
        END CASE;
    END LOOP;
    RETURN hints;
END
$$;

REVOKE EXECUTE ON FUNCTION charter.apply_writes_v1(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION charter.apply_writes_v1(jsonb) TO charter_engine;

-- The worker's bookkeeping of a batch as one statement: each call is one of the
-- bookkeeping functions of migrations 0007/0009/0010 with its arguments, run in order
-- under the caller's role (SECURITY INVOKER: the functions themselves decide).
CREATE FUNCTION charter.record_results_v1(p_calls jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = charter, pg_temp AS $$
DECLARE
    c jsonb;
    v_now timestamptz;
BEGIN
    FOR c IN SELECT value FROM jsonb_array_elements(p_calls) LOOP
        v_now := (c->>'now')::timestamptz;
        CASE c->>'fn'
        WHEN 'complete_scheduled_action' THEN
            PERFORM charter.complete_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'event_hash', (c->>'next_run_at')::timestamptz, v_now);
        WHEN 'skip_scheduled_action' THEN
            PERFORM charter.skip_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', (c->>'next_run_at')::timestamptz, v_now);
        WHEN 'fail_scheduled_action' THEN
            PERFORM charter.fail_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', v_now);
        WHEN 'reschedule_scheduled_action' THEN
            PERFORM charter.reschedule_scheduled_action((c->>'id')::uuid, (c->>'token')::uuid,
                (c->>'retry_at')::timestamptz, c->>'error', v_now);
        WHEN 'complete_automation_work' THEN
            PERFORM charter.complete_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'event_hash', v_now);
        WHEN 'skip_automation_work' THEN
            PERFORM charter.skip_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', v_now);
        WHEN 'fail_automation_work' THEN
            PERFORM charter.fail_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                c->>'reason', v_now);
        WHEN 'retry_automation_work' THEN
            PERFORM charter.retry_automation_work((c->>'id')::uuid, (c->>'token')::uuid,
                (c->>'retry_at')::timestamptz, c->>'error', v_now);
        WHEN 'log_worker_attempt' THEN
            PERFORM charter.log_worker_attempt(c->>'kind', c->>'level', c->>'code',
                c->>'process_id', c->>'action', c->>'event_hash', c->>'message',
                c->'detail', v_now);
        ELSE
            RAISE EXCEPTION 'record_results_v1: unknown bookkeeping call %', c->>'fn';
        END CASE;
    END LOOP;
END
$$;

REVOKE EXECUTE ON FUNCTION charter.record_results_v1(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION charter.record_results_v1(jsonb) TO charter_worker;
