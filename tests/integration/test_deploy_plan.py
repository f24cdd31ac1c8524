"""Deploy plans and the deploy guard against a real PostgreSQL: every category a plan
names, its paging, and each way a deploy that would strand processes is refused or let
through (and recorded)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from charter.core.envelope import sign
from charter.core.errors.lists import InvalidCursor
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, Role
from charter.dsl.validate import load_workflow
from charter.lifecycle.plan import PlanCursor, Planner
from tests.integration.apikit import Harness, bearer, make_harness, new_id

ORDER: JsonObject = {
    "dsl": 2,
    "states": ["open", "packed", "shipped", "delivered"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "pack": {
            "role": "clerk", "from": "open", "to": "packed",
            "schedule": [{"id": "nudge", "action": "remind", "in": "1h", "data": {}}],
        },
        "remind": {"type": "update", "role": "AUTOMATION", "from": "packed",
                   "mutate": {"$inc": {"reminders": 1}}},
        "ship": {"role": "clerk", "from": "packed", "to": "shipped"},
        "deliver": {"role": "clerk", "from": "shipped", "to": "delivered"},
    },
}  # fmt: skip


def without(definition: JsonObject, *, states: tuple[str, ...] = (),
            actions: tuple[str, ...] = ()) -> JsonObject:  # fmt: skip
    """`definition` without these states and actions, and without schedules of them."""
    changed: Any = copy.deepcopy(definition)
    changed["states"] = [s for s in changed["states"] if s not in states]
    for name in actions:
        del changed["actions"][name]
    for action in changed["actions"].values():
        kept = [s for s in action.get("schedule", []) if s["action"] not in actions]
        if kept:
            action["schedule"] = kept
        else:
            action.pop("schedule", None)
    return dict(changed)


# Packed orders can go nowhere (`no_action`), shipped ones are in a state that is gone.
DROPPED = without(ORDER, states=("shipped", "delivered"), actions=("remind", "ship", "deliver"))
# Only shipped orders are stranded; packed ones are delivered from where they are.
SHIPPED_GONE: JsonObject = {
    **without(ORDER, states=("shipped",), actions=("ship", "deliver")),
    "actions": {
        **without(ORDER, states=("shipped",), actions=("ship", "deliver"))["actions"],  # type: ignore[dict-item]
        "deliver": {"role": "clerk", "from": "packed", "to": "delivered"},
    },
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


class Orders:
    """A path of its own with processes in each state this module needs."""

    def __init__(self, h: Harness, definition: JsonObject = ORDER) -> None:
        self.h = h
        self.path = new_id("tests/orders")
        h.deploy(self.path, definition)
        self.heads: dict[str, str] = {}

    def walk(self, *actions: str) -> str:
        process = new_id("o")
        clerk = self.h.keys["clerk"]
        prev = None
        for action in actions:
            env = self.h.envelope(clerk, process, action, prev=prev, workflow=self.path)
            prev = str(self.h.accept(sign(env, clerk))["hash"])
        return process

    def plan(self, definition: JsonObject, **extra: Any) -> Any:
        response = self.h.http.post(
            "/v1/workflows/plan",
            json={"path": self.path, "definition": definition, **extra},
            headers=bearer(self.h.admin),
        )
        assert response.status_code == 200, response.text
        return response.json()

    def deploy(self, definition: JsonObject, **extra: Any) -> Any:
        return self.h.http.post(
            "/v1/workflows",
            json={"path": self.path, "definition": definition, **extra},
            headers=bearer(self.h.admin),
        )

    def revisions(self) -> list[Any]:
        response = self.h.http.get(f"/v1/workflows/{self.path}", headers=bearer(self.h.admin))
        assert response.status_code == 200, response.text
        return list(response.json()["revisions"])


def test_a_dropped_state_and_action_strand_orphan_and_diverge(h: Harness) -> None:
    orders = Orders(h)
    opened = orders.walk("open")
    packed = orders.walk("open", "pack")  # its `nudge` timer is active
    shipped = orders.walk("open", "pack", "ship")  # nudge still active: no cancel
    plan = orders.plan(DROPPED)
    assert plan["counts"] == {"stranded": 2, "orphaned_work": 2, "diverging": 1}
    assert plan["stranded"] == sorted(
        [
            {"process": packed, "state": "packed", "reason": "no_action"},
            {"process": shipped, "state": "shipped", "reason": "state_removed"},
        ],
        key=lambda s: s["process"],
    )
    orphaned = {(o["process"], o["kind"], o["action"], o["reason"]) for o in plan["orphaned_work"]}
    assert orphaned == {
        (packed, "scheduled", "remind", "action_removed"),
        (shipped, "scheduled", "remind", "action_removed"),
    }
    assert all(o["schedule_id"] == "nudge" for o in plan["orphaned_work"])
    # `ship` is gone: the shipped order's third event would be refused.
    [diverging] = plan["diverging"]
    assert (diverging["process"], diverging["seq"], diverging["code"]) == (
        shipped, 3, "unknown_action",
    )  # fmt: skip
    assert plan["next_cursor"] is None
    assert opened not in {s["process"] for s in plan["stranded"]}


def test_work_that_can_never_run_again_is_orphaned(h: Harness) -> None:
    orders = Orders(h)
    packed = orders.walk("open", "pack")
    changed: Any = copy.deepcopy(ORDER)
    changed["actions"]["remind"]["from"] = "open"
    plan = orders.plan(changed)
    assert plan["counts"] == {"stranded": 0, "orphaned_work": 1, "diverging": 0}
    [work] = plan["orphaned_work"]
    assert (work["process"], work["kind"], work["reason"], work["state"]) == (
        packed, "scheduled", "unreachable", "packed",
    )  # fmt: skip
    # From "*", or from a state the process can still reach, it is not orphaned.
    changed["actions"]["remind"]["from"] = "shipped"
    assert orders.plan(changed)["counts"]["orphaned_work"] == 0


def test_a_changed_rule_diverges_only_the_histories_it_refuses(h: Harness) -> None:
    orders = Orders(h)
    packed = orders.walk("open", "pack")
    orders.walk("open")
    changed: Any = copy.deepcopy(ORDER)
    changed["actions"]["pack"]["when"] = "approved = true"
    plan = orders.plan(changed)
    assert [(d["process"], d["seq"], d["code"]) for d in plan["diverging"]] == [
        (packed, 2, "condition_failed")
    ]
    assert plan["counts"]["stranded"] == plan["counts"]["orphaned_work"] == 0


def test_data_a_changed_action_leaves_differently_is_replayed_past_it(h: Harness) -> None:
    # `open` now sets a field that a rule of `ship`, unchanged, reads: the third event of
    # a shipped order is refused though its own action did not change.
    held: Any = copy.deepcopy(ORDER)
    held["actions"]["ship"]["when"] = "hold is null"
    orders = Orders(h, held)
    shipped = orders.walk("open", "pack", "ship")
    orders.walk("open", "pack")
    changed: Any = copy.deepcopy(held)
    changed["actions"]["open"]["mutate"] = {"$set": {"hold": True}}
    plan = orders.plan(changed)
    assert [(d["process"], d["seq"], d["code"]) for d in plan["diverging"]] == [
        (shipped, 3, "condition_failed")
    ]
    # A rule of `open` alone changes no data: what follows it decides as it did.
    only_rule: Any = copy.deepcopy(held)
    only_rule["actions"]["open"]["when"] = "true"
    assert orders.plan(only_rule)["counts"]["diverging"] == 0
    only_rule["actions"]["open"]["when"] = "false"
    assert orders.plan(only_rule)["counts"]["diverging"] == 2


def test_a_plan_without_replay_leaves_out_only_the_diverging_list(h: Harness) -> None:
    orders = Orders(h)
    orders.walk("open", "pack", "ship")
    whole = orders.plan(DROPPED)
    brief = orders.plan(DROPPED, replay=False)
    assert brief["counts"] == {k: n for k, n in whole["counts"].items() if k != "diverging"}
    assert "diverging" not in brief
    assert (brief["stranded"], brief["orphaned_work"]) == (
        whole["stranded"],
        whole["orphaned_work"],
    )
    response = h.http.post(
        "/v1/workflows/plan",
        json={"path": orders.path, "definition": DROPPED, "replay": "no"},
        headers=bearer(h.admin),
    )
    assert (response.status_code, response.json()["error"]["code"]) == (400, "malformed")


def test_the_first_deploy_plans_nothing_and_the_same_definition_names_dead_work(
    h: Harness,
) -> None:
    fresh = {"path": new_id("tests/never"), "definition": ORDER}
    response = h.http.post("/v1/workflows/plan", json=fresh, headers=bearer(h.admin))
    assert response.json() == {
        "counts": {"stranded": 0, "orphaned_work": 0, "diverging": 0},
        "stranded": [], "orphaned_work": [], "diverging": [], "next_cursor": None,
    }  # fmt: skip
    orders = Orders(h)
    orders.walk("open", "pack")
    assert orders.plan(ORDER)["counts"] == {"stranded": 0, "orphaned_work": 0, "diverging": 0}
    # A shipped order's reminder (from packed) can never fire: that is so today already.
    shipped = orders.walk("open", "pack", "ship")
    plan = orders.plan(ORDER)
    assert plan["counts"] == {"stranded": 0, "orphaned_work": 1, "diverging": 0}
    assert [(o["process"], o["reason"]) for o in plan["orphaned_work"]] == [
        (shipped, "unreachable")
    ]


def test_a_plan_changes_nothing_and_needs_workflows_write(h: Harness) -> None:
    orders = Orders(h)
    orders.walk("open", "pack", "ship")
    before = orders.revisions()
    orders.plan(DROPPED)
    assert orders.revisions() == before
    reader = h.token("processes:read")
    body = {"path": orders.path, "definition": ORDER}
    denied = h.http.post("/v1/workflows/plan", json=body, headers=bearer(reader))
    assert (denied.status_code, denied.json()["error"]["code"]) == (403, "forbidden")
    bad = h.http.post("/v1/workflows/plan", json={**body, "definition": {"dsl": 2}},
                      headers=bearer(h.admin))  # fmt: skip
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_workflow")
    cursor = h.http.post("/v1/workflows/plan", json={**body, "cursor": "nope"},
                         headers=bearer(h.admin))  # fmt: skip
    assert (cursor.status_code, cursor.json()["error"]["code"]) == (400, "invalid_cursor")


def test_each_list_pages_under_one_cursor(h: Harness) -> None:
    orders = Orders(h)
    shipped = sorted(orders.walk("open", "pack", "ship") for _ in range(5))
    gone = DROPPED
    workflow = load_workflow(gone)
    seen: dict[str, list[str]] = {"stranded": [], "orphaned_work": [], "diverging": []}
    cursor: PlanCursor | None = None
    pages = 0
    while True:
        with h.database.connection(Role.READER) as conn, conn.transaction():
            plan = Planner(conn, h.engine.registry, orders.path, gone, workflow).plan(
                cursor, limit=2
            )
        answer: Any = plan.to_json()
        assert answer["counts"] == {"stranded": 5, "orphaned_work": 5, "diverging": 5}
        for key in seen:
            seen[key] += [str(entry["process"]) for entry in answer[key]]
        pages += 1
        if plan.next_cursor is None:
            break
        cursor = PlanCursor.decode(plan.next_cursor)
    assert pages == 3
    assert seen == {"stranded": shipped, "orphaned_work": shipped, "diverging": shipped}
    with pytest.raises(InvalidCursor):
        PlanCursor.decode("W10")


# --- the guard ---------------------------------------------------------------------------


def test_a_deploy_that_strands_is_refused_and_changes_nothing(h: Harness) -> None:
    orders = Orders(h)
    shipped = orders.walk("open", "pack", "ship")
    before = orders.revisions()
    refused = orders.deploy(SHIPPED_GONE)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "strands_processes"
    # Its reminder can run from no state a shipped order can be in.
    assert error["plan"]["counts"] == {"stranded": 1, "orphaned_work": 1}
    assert error["plan"]["stranded"] == [
        {"process": shipped, "state": "shipped", "reason": "state_removed"}
    ]
    [work] = error["plan"]["orphaned_work"]
    assert (work["process"], work["reason"], work["schedule_id"]) == (
        shipped, "unreachable", "nudge",
    )  # fmt: skip
    assert error["uncovered"] == {"stranded": 1, "orphaned_work": 1}
    assert "1 stranded, 1 orphaned work" in error["message"]
    assert orders.revisions() == before


def test_allow_stranding_deploys_and_is_recorded(h: Harness) -> None:
    orders = Orders(h)
    orders.walk("open", "pack", "ship")
    allowed = orders.deploy(SHIPPED_GONE, allow_stranding=True)
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["allow_stranding"] is True
    newest, first = orders.revisions()
    assert (newest["revision"], newest["allow_stranding"], newest["migration_map"]) == (
        2, True, None,
    )  # fmt: skip
    assert first["allow_stranding"] is False
    flag = orders.deploy(ORDER, allow_stranding="yes")
    assert (flag.status_code, flag.json()["error"]["code"]) == (400, "malformed")


def test_a_migration_map_covers_what_it_moves(h: Harness) -> None:
    orders = Orders(h)
    orders.walk("open", "pack", "ship")
    target = copy.deepcopy(SHIPPED_GONE)
    # No migration block: no one could sign the moves.
    blockless = orders.deploy(target, migration={"map": {"shipped": "delivered"}})
    assert (blockless.status_code, blockless.json()["error"]["code"]) == (422, "invalid_input")
    target["migration"] = {"role": ["clerk"]}
    unknown = orders.deploy(target, migration={"map": {"shipped": "lost"}})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (422, "invalid_input")
    partial = orders.deploy(target, migration={"map": {"open": "packed"}})
    assert partial.status_code == 409
    assert partial.json()["error"]["uncovered"] == {"stranded": 1, "orphaned_work": 0}
    covered = orders.deploy(target, migration={"map": {"shipped": "delivered"}})
    assert covered.status_code == 201, covered.text
    assert orders.revisions()[0]["migration_map"] == {"shipped": "delivered"}


def test_orphaned_timers_are_covered_by_a_migration_of_their_process(h: Harness) -> None:
    orders = Orders(h)
    orders.walk("open", "pack")
    target = without(ORDER, actions=("remind",))
    assert orders.deploy(target).status_code == 409
    target["migration"] = {"role": ["clerk"]}
    # Any map: the process with the orphaned timer is migrated to its own state.
    assert orders.deploy(target, migration={"map": {"shipped": "delivered"}}).status_code == 201


# --- queued automatic actions --------------------------------------------------------------

QUEUED: Any = copy.deepcopy(ORDER)
QUEUED["actions"]["label"] = {"type": "update", "role": "AUTOMATION", "auto": True,
                              "from": "packed", "mutate": {"$set": {"labelled": True}}}  # fmt: skip


def test_a_pending_queue_row_is_orphaned_and_only_a_move_covers_it(h: Harness) -> None:
    orders = Orders(h, QUEUED)
    packed = orders.walk("open", "pack")  # `label` is queued; no worker runs here
    dropped = without(QUEUED, actions=("label",))
    plan = orders.plan(dropped)
    assert [(o["process"], o["kind"], o["action"], o["reason"]) for o in plan["orphaned_work"]] == [
        (packed, "queue", "label", "action_removed")
    ]
    # Still there, but it can only run from `open`, where a packed order never goes back.
    moved: Any = copy.deepcopy(QUEUED)
    moved["actions"]["label"]["from"] = "open"
    moved["migration"] = {"role": ["clerk"]}
    [work] = orders.plan(moved)["orphaned_work"]
    assert (work["kind"], work["reason"]) == ("queue", "unreachable")
    # A migration cannot cancel it unless it moves its process: the map must name packed.
    other = orders.deploy(moved, migration={"map": {"shipped": "delivered"}})
    assert other.status_code == 409
    assert other.json()["error"]["uncovered"] == {"stranded": 0, "orphaned_work": 1}
    assert orders.deploy(moved, migration={"map": {"packed": "packed"}}).status_code == 201
