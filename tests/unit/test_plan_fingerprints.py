"""Which changes to an action make a deploy plan replay the histories that used it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from charter.lifecycle.divergence import Fingerprints

OLD: dict[str, Any] = {
    "dsl": 2,
    "states": ["open", "done"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open",
                 "schedule": [{"id": "nudge", "action": "nudge", "in": "1h", "data": {}}]},
        "nudge": {"type": "update", "role": "AUTOMATION", "from": "open"},
        "close": {"role": "clerk", "from": "open", "to": "done", "cancel": ["nudge"]},
    },
}  # fmt: skip


def changed(edit: Any, action: str = "open") -> bool:
    new = copy.deepcopy(OLD)
    edit(new["actions"])
    return bool(Fingerprints(new, {"v1": OLD}).changed([("v1", action)]))


@pytest.mark.parametrize(
    "edit",
    [
        lambda a: a["open"].update(description="opens an order"),
        lambda a: a["open"].pop("schedule"),  # a dropped schedule cannot refuse
        lambda a: a["close"].pop("cancel"),
        lambda a: a["nudge"].update(when="false"),  # another action
    ],
)
def test_what_cannot_change_a_decision_replays_nothing(edit: Any) -> None:
    assert not changed(edit)
    assert not changed(edit, "close")


@pytest.mark.parametrize(
    "edit",
    [
        lambda a: a["open"].update(when="true"),
        lambda a: a["open"].update(to="done"),
        lambda a: a["open"].update(role="AUTOMATION"),
        lambda a: a["open"].update(input={"type": "object"}),
        lambda a: a["open"].update(mutate={"$set": {"n": 1}}),
        lambda a: a["open"]["schedule"][0].update(data={"n": "{{ input.n }}"}),
        lambda a: a["open"].pop("type"),  # an update now, no longer a create
    ],
)
def test_what_may_change_a_decision_replays(edit: Any) -> None:
    assert changed(edit)


def test_a_dropped_action_and_a_version_not_known_are_changed() -> None:
    new = copy.deepcopy(OLD)
    del new["actions"]["close"]
    fingerprints = Fingerprints(new, {"v1": OLD})
    assert fingerprints.changed([("v1", "close"), ("v0", "open"), ("v1", "open")]) == {
        ("v1", "close"),
        ("v0", "open"),
    }
    assert fingerprints.gone("close")
    assert not fingerprints.gone("open")
    assert fingerprints.gone("charter:migrate")  # no migration block
    new["migration"] = {"role": ["clerk"]}
    assert not Fingerprints(new, {"v1": OLD}).gone("charter:migrate")


@pytest.mark.parametrize(
    ("edit", "reshapes"),
    [
        (lambda a: a["open"].update(when="true"), False),
        (lambda a: a["open"].update(role="AUTOMATION"), False),
        (lambda a: a["open"].update(input={"type": "object"}), False),
        (lambda a: a["open"]["schedule"][0].update(data={"n": 1}), False),
        (lambda a: a["open"].update(to="done"), True),
        (lambda a: a["open"].update(mutate={"$set": {"n": 1}}), True),
        (lambda a: a["open"].pop("type"), True),
        (lambda a: a.pop("open"), True),
    ],
)
def test_only_type_to_and_mutate_reshape_what_an_accepted_event_leaves(
    edit: Any, reshapes: bool
) -> None:
    new = copy.deepcopy(OLD)
    edit(new["actions"])
    fingerprints = Fingerprints(new, {"v1": OLD})
    assert fingerprints.changed([("v1", "open")]) == {("v1", "open")}
    assert bool(fingerprints.reshaping([("v1", "open")])) is reshapes
    assert fingerprints.reshaping([("v0", "open")]) == {("v0", "open")}  # version not known


def test_any_change_to_the_migration_block_reshapes() -> None:
    old = copy.deepcopy(OLD) | {"migration": {"role": ["clerk"]}}
    new = copy.deepcopy(old)
    new["states"] = [*new["states"], "archived"]
    pair = ("v1", "charter:migrate")
    assert Fingerprints(new, {"v1": old}).reshaping([pair]) == {pair}
    assert not Fingerprints(old, {"v1": old}).changed([pair])
