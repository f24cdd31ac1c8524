"""The `retention` block: its deploy problems, the built-in hold actions it grants, and
legal hold in the rules and in replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope
from charter.core.errors import ConditionFailed, InvalidWorkflow, UnknownAction
from charter.core.timefmt import format_rfc3339
from charter.dsl.model import ERASE_ACTION, HOLD_ACTION, RELEASE_ACTION
from charter.dsl.validate import load_workflow
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rederive import PastEvent, Rederivation

BASE: dict[str, Any] = {
    "dsl": 2,
    "states": ["open", "closed"],
    "roles": ["clerk", "legal", "dpo"],
    "retention": {"after": "30d", "states": ["closed"], "hold_role": "legal"},
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "close": {"role": "clerk", "from": "open", "to": "closed"},
        "note": {"type": "update", "role": "clerk", "from": "*"},
    },
}


def problems(retention: Any, **changes: Any) -> list[tuple[str, str]]:
    definition = {**BASE, "retention": retention, **changes}
    with pytest.raises(InvalidWorkflow) as caught:
        load_workflow(definition)
    return [(p["pointer"], p["message"]) for p in caught.value.context["problems"]]


def test_the_block_grants_hold_and_release_to_the_hold_roles() -> None:
    workflow = load_workflow(BASE)
    assert workflow.retention is not None
    assert workflow.retention.after == timedelta(days=30)
    assert workflow.retention.states == ("closed",)
    for name in (HOLD_ACTION, RELEASE_ACTION):
        action = workflow.action(name)
        assert action.roles == ("legal",)
        assert action.type == "update"
        assert action.from_states is None
    plain = load_workflow({k: v for k, v in BASE.items() if k != "retention"})
    with pytest.raises(UnknownAction):
        plain.action(HOLD_ACTION)


@pytest.mark.parametrize(
    ("retention", "pointer", "says"),
    [
        ({"after": "7 years", "states": ["closed"], "hold_role": "legal"}, "/retention/after",
         "not a duration"),
        ({"after": "7y", "states": ["gone"], "hold_role": "legal"}, "/retention/states/0",
         "unknown state"),
        ({"after": "7y", "states": ["open"], "hold_role": "legal"}, "/retention/states/0",
         "is not final"),
        ({"after": "7y", "states": ["closed"], "hold_role": "judge"}, "/retention/hold_role",
         "unknown role"),
        ({"after": "7y", "states": ["closed"]}, "/retention", "hold_role"),
        ({"after": "7y", "states": ["closed"], "hold_role": "legal", "keep": 1},
         "/retention/keep", ""),
        ("7y", "/retention", "must be an object"),
    ],
)  # fmt: skip
def test_a_bad_block_is_refused_where_it_is_wrong(retention: Any, pointer: str, says: str) -> None:
    found = problems(retention)
    assert any(p == pointer and says in m for p, m in found), found


def test_automation_cannot_hold() -> None:
    roles = ["clerk", "legal", "dpo", "AUTOMATION"]
    found = problems({"after": "1s", "states": ["closed"], "hold_role": "AUTOMATION"}, roles=roles)
    assert any("automation actor cannot hold" in m for _, m in found), found


KEY = SecretKey.generate()
AT = datetime(2026, 1, 1, tzinfo=UTC)


def _event(seq: int, action: str, input_: Any, prev: str | None) -> PastEvent:
    at = format_rfc3339(AT + timedelta(seconds=seq))
    envelope = Envelope(v=1, process="p", workflow="w", action=action, input=input_, prev=prev,
                        actor=KEY.public_key_hex, at=at)  # fmt: skip
    roles = {"open": "clerk", "note": "clerk", ERASE_ACTION: "dpo"}.get(action, "legal")
    return PastEvent(seq=seq, hash=envelope.hash(), envelope=envelope,
                     actor=ActorContext(roles, KEY.public_key_hex, (roles,)), genesis=False,
                     workflow=load_workflow(BASE), input=input_)  # fmt: skip


def test_replay_follows_the_hold_and_refuses_what_a_hold_forbids() -> None:
    derived = Rederivation(ProcessView(id="p", workflow="w", state="", data={}, head=None, seq=0))
    prev = None
    for seq, action, input_ in [(1, "open", {}), (2, HOLD_ACTION, {"reason": "L-1"}),
                                (3, "note", {})]:  # fmt: skip
        event = _event(seq, action, input_, prev)
        derived.step(event)
        prev = event.hash
    assert _held(derived)
    erase = _event(4, ERASE_ACTION, {"basis": "art17-1a", "request": "DSR-1"}, prev)
    with pytest.raises(ConditionFailed, match="legal hold"):
        derived.step(erase)
    with pytest.raises(ConditionFailed, match="already"):
        derived.step(_event(4, HOLD_ACTION, {"reason": "L-2"}, prev))
    derived.step(_event(4, RELEASE_ACTION, {"reason": "L-1"}, prev))
    assert not _held(derived)
    with pytest.raises(ConditionFailed, match="not under legal hold"):
        derived.step(_event(5, RELEASE_ACTION, {"reason": "L-1"}, prev))


def _held(derived: Rederivation) -> bool:
    return derived.held
