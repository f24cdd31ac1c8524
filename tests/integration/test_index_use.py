"""Every query whose index migration 0014 dropped or re-routed is still served by one.

With sequential scans priced out, a plan that still scans a work table sequentially has
no index to use: the query would read the whole table on a large deployment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
import pytest

from charter.db.queries import query

Conn = psycopg.Connection[tuple[Any, ...]]

DROPPED = ("events_actor", "events_cause", "automation_queue_pending", "automation_queue_process")


def _plan(conn: Conn, name: str, params: Mapping[str, object]) -> str:
    conn.execute("SET LOCAL enable_seqscan = off")
    rows = conn.execute("EXPLAIN " + query(name), params).fetchall()
    return "\n".join(str(row[0]) for row in rows)


def test_the_unused_indexes_are_gone(conn: Conn) -> None:
    present = {
        str(row[0])
        for row in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'charter'")
    }
    assert present.isdisjoint(DROPPED)


def test_a_processs_work_is_read_through_an_index(conn: Conn) -> None:
    plan = _plan(conn, "process_work", {"process_id": "p-1"})
    assert "Seq Scan" not in plan, plan
    # The queue lane uses the unique (process_id, action_name, queued_by_event_hash) index.
    assert "automation_queue_process_id_action_name_queued_by_event" in plan, plan


@pytest.mark.parametrize("name", ["event_by_hash", "verification_events"])
def test_event_reads_stay_on_their_indexes(conn: Conn, name: str) -> None:
    params = {"hash": "0" * 64, "process_id": "p-1"}
    assert "Seq Scan" not in _plan(conn, name, params)


def _prefix_params(id_like: str) -> dict[str, object]:
    params: dict[str, object] = dict.fromkeys(
        ("workflow", "workflow_prefix", "state", "parent", "updated_after", "updated_before"),
        None,
    )
    return {**params, "id_like": id_like, "before_at": None, "before_id": None, "limit": 51}


@pytest.mark.parametrize("q", ["ns-a", "ns-a_", "a_b_c"])
def test_an_id_prefix_is_read_through_the_prefix_index(conn: Conn, q: str) -> None:
    from charter.operator.paging import id_prefix

    pattern = id_prefix(q)
    assert pattern is not None
    plan = _plan(conn, "list_processes_by_id_prefix", _prefix_params(pattern))
    assert "processes_id_prefix" in plan, plan
    # The whole of `q`, underscores included, bounds the index range.
    upper = q[:-1] + chr(ord(q[-1]) + 1)
    assert f"((id ~>=~ '{q}'::text) AND (id ~<~ '{upper}'::text))" in plan, plan


def test_a_migration_finds_its_process_s_work_through_an_index(conn: Conn) -> None:
    params = {
        "process_id": "p-1", "actions": ["a"], "schedule_ids": ["s"], "event_hash": "0" * 64,
        "listed_reason": "r", "orphan_reason": "r", "now": None,
    }  # fmt: skip
    plan = _plan(conn, "cancel_migrated_work", params)
    assert "Seq Scan" not in plan, plan
