"""Applying an action: operators, templates, schedules, spawns, errors, no in-place change."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from charter.core.clock import FakeClock
from charter.core.errors import InvalidInput, ReservedField
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.expressions import Scope
from charter.dsl.model import Workflow
from charter.dsl.mutate import (
    MutateEffects,
    ResolvedSchedule,
    ResolvedSpawn,
    apply_action,
    render_auto_data,
)
from charter.dsl.validate import load_workflow

NOW = datetime(2026, 6, 18, 10, 0, tzinfo=UTC)


def workflow(actions: dict[str, Any]) -> Workflow:
    """A workflow around `actions`, with the states and roles they need."""
    return load_workflow(
        {
            "dsl": 2,
            "states": ["draft", "open", "closed"],
            "roles": ["clerk", "AUTOMATION"],
            "actions": {
                "start": {"type": "create", "role": "clerk", "to": "draft"},
                "close": {"role": ["clerk", "AUTOMATION"], "from": "*", "to": "closed"},
                "ping": {"type": "update", "role": "AUTOMATION", "from": "*"},
                "reopen": {"role": "clerk", "from": "closed", "to": "open"},
                **actions,
            },
        }
    )


def scope(document: JsonObject, **parts: Any) -> Scope:
    return Scope(document=document, now=parts.pop("now", NOW), **parts)


def apply(
    mutate: dict[str, Any], document: JsonObject, **parts: Any
) -> tuple[JsonObject, MutateEffects]:
    wf = workflow({"edit": {"type": "update", "role": "clerk", "from": "*", "mutate": mutate}})
    effects = apply_action(wf, wf.action("edit"), document, scope(document, **parts))
    return effects.new_document, effects


DOC: JsonObject = {"state": "open", "name": "Ada", "n": 2, "notes": ["a"], "addr": {"city": "X"}}


# --- each operator ----------------------------------------------------------------------

OPERATOR_CASES: list[tuple[str, dict[str, Any], JsonObject]] = [
    ("$set a field", {"$set": {"name": "Grace"}}, {**DOC, "name": "Grace"}),
    (
        "$set a dotted path creates objects",
        {"$set": {"a.b.c": 1}},
        {**DOC, "a": {"b": {"c": 1}}},
    ),
    (
        "$set inside an existing object keeps its siblings",
        {"$set": {"addr.zip": "123"}},
        {**DOC, "addr": {"city": "X", "zip": "123"}},
    ),
    ("$set over null", {"$set": {"gone.x": 1}}, {**DOC, "gone": {"x": 1}}),
    (
        "$unset fields, missing ones ignored",
        {"$unset": ["name", "addr.city", "nope.deeper", "n.x"]},
        {"state": "open", "n": 2, "notes": ["a"], "addr": {}},
    ),
    ("$inc an integer", {"$inc": {"n": 3}}, {**DOC, "n": 5}),
    (
        "$inc a missing field from 0",
        {"$inc": {"count.total": 1.5}},
        {**DOC, "count": {"total": 1.5}},
    ),
    ("$inc by a negative number", {"$inc": {"n": -2}}, {**DOC, "n": 0}),
    ("$push appends", {"$push": {"notes": {"by": "x"}}}, {**DOC, "notes": ["a", {"by": "x"}]}),
    (
        "$push an array appends one item",
        {"$push": {"notes": [1, 2]}},
        {**DOC, "notes": ["a", [1, 2]]},
    ),
    ("$push to a missing field", {"$push": {"log.items": "x"}}, {**DOC, "log": {"items": ["x"]}}),
    (
        "$merge into a field is shallow",
        {"$merge": {"addr": {"zip": "1", "city": "Y"}}},
        {**DOC, "addr": {"city": "Y", "zip": "1"}},
    ),
    ("$merge into a missing field", {"$merge": {"meta": {"a": 1}}}, {**DOC, "meta": {"a": 1}}),
    (
        "$merge into the document",
        {"$merge": {"": {"name": "Lin", "tier": 2}}},
        {**DOC, "name": "Lin", "tier": 2},
    ),
    (
        "operators run in order $set $unset $inc $push $merge",
        {"$merge": {"": {"n": 100}}, "$set": {"name": "B"}, "$inc": {"m": 1}},
        {**DOC, "name": "B", "m": 1, "n": 100},
    ),
]


@pytest.mark.parametrize(
    ("name", "mutate", "expected"), OPERATOR_CASES, ids=[c[0] for c in OPERATOR_CASES]
)
def test_operator(name: str, mutate: dict[str, Any], expected: JsonObject) -> None:
    before = copy.deepcopy(DOC)
    new, _ = apply(mutate, DOC)
    assert new == expected, name
    assert before == DOC


ERROR_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "$set through a string",
        {"$set": {"name.first": "A"}},
        "cannot set 'name.first': 'name' is a string, not an object",
    ),
    (
        "$inc of a string",
        {"$inc": {"name": 1}},
        "cannot increment 'name': it is a string, not a number",
    ),
    (
        "$inc of a boolean",
        {"$inc": {"flag": 1}},
        "cannot increment 'flag': it is a boolean, not a number",
    ),
    (
        "$inc by a template that is not a number",
        {"$inc": {"n": "{{ input.by }}"}},
        "cannot increment 'n' by a string: $inc needs a number",
    ),
    (
        "$inc beyond I-JSON",
        {"$inc": {"n": 9007199254740991}},
        "incrementing 'n' leaves the I-JSON range",
    ),
    (
        "$push to an object",
        {"$push": {"addr": 1}},
        "cannot push to 'addr': it is an object, not an array",
    ),
    (
        "$merge into an array",
        {"$merge": {"notes": {"a": 1}}},
        "cannot merge into 'notes': it is an array, not an object",
    ),
    (
        "$merge of a non-object template",
        {"$merge": {"": "{{ input.by }}"}},
        "cannot merge a string into 'the document': $merge needs an object",
    ),
    (
        "root $merge that changes state",
        {"$merge": {"": "{{ input.patch }}"}},
        "$merge cannot change 'state': it is set by 'to'",
    ),
]


@pytest.mark.parametrize(
    ("name", "mutate", "message"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES]
)
def test_operator_errors_are_invalid_input(name: str, mutate: dict[str, Any], message: str) -> None:
    document = {**DOC, "flag": True}
    before = copy.deepcopy(document)
    with pytest.raises(InvalidInput) as caught:
        apply(mutate, document, input={"by": "two", "patch": {"state": "closed"}})
    assert caught.value.message == message, name
    assert document == before


def test_inc_error_names_the_path() -> None:
    with pytest.raises(InvalidInput) as caught:
        apply({"$inc": {"addr.city": 1}}, DOC)
    assert caught.value.context["path"] == "addr.city"


def test_root_merge_may_repeat_the_current_state() -> None:
    new, _ = apply({"$merge": {"": "{{ input }}"}}, DOC, input={"state": "open", "x": 1})
    assert new == {**DOC, "x": 1}


# --- templates and state ---------------------------------------------------------------


def test_templates_render_from_the_scope() -> None:
    new, _ = apply(
        {
            "$set": {
                "who": "{{ input.name }}",
                "greeting": "hello {{ input.name }} from {{ process.id }}",
                "amount": "{{ input.amount + 1 }}",
                "signed_by": "{{ event.actor }}",
                "was": "{{ state }}",
                "at": "{{ now }}",
            },
            "$push": {"notes": {"text": "{{ input.note }}", "at": "{{ event.at }}"}},
        },
        DOC,
        input={"name": "Ada", "amount": 41, "note": "hi"},
        process={"id": "c-1"},
        event={"actor": "ab" * 32, "at": "2026-06-18T10:00:00.000Z"},
    )
    assert new["who"] == "Ada"
    assert new["greeting"] == "hello Ada from c-1"
    assert new["amount"] == 42
    assert new["signed_by"] == "ab" * 32
    assert new["was"] == "open"
    assert new["at"] == "2026-06-18T10:00:00.000Z"
    assert new["notes"] == ["a", {"text": "hi", "at": "2026-06-18T10:00:00.000Z"}]


def test_rendered_values_are_copies_of_the_input() -> None:
    given: JsonObject = {"tags": ["x"], "profile": {"a": 1}}
    new, _ = apply(
        {"$set": {"tags": "{{ input.tags }}"}, "$merge": {"": "{{ input }}"}}, {}, input=given
    )
    tags = new["tags"]
    assert isinstance(tags, list)
    tags.append("y")
    profile = new["profile"]
    assert isinstance(profile, dict)
    profile["b"] = 2
    assert given == {"tags": ["x"], "profile": {"a": 1}}


def test_to_sets_state_and_update_keeps_it() -> None:
    wf = workflow({})
    closed = apply_action(wf, wf.action("close"), DOC, scope(DOC)).new_document
    assert closed["state"] == "closed"
    pinged = apply_action(wf, wf.action("ping"), DOC, scope(DOC)).new_document
    assert pinged == DOC


def test_create_starts_from_an_empty_document() -> None:
    wf = load_workflow(
        {
            "dsl": 2,
            "states": ["draft"],
            "roles": ["customer"],
            "actions": {
                "open": {
                    "type": "create",
                    "role": "customer",
                    "to": "draft",
                    "mutate": {"$set": {"name": "{{ input.name }}"}},
                }
            },
        }
    )
    effects = apply_action(wf, wf.action("open"), {}, scope({}, input={"name": "Ada"}))
    assert effects == MutateEffects(new_document={"name": "Ada", "state": "draft"})


def test_an_action_of_another_workflow_is_refused() -> None:
    one, other = workflow({}), workflow({})
    with pytest.raises(ValueError, match="does not belong"):
        apply_action(one, other.action("close"), DOC, scope(DOC))


def test_the_document_is_never_changed_in_place() -> None:
    document: JsonObject = copy.deepcopy(DOC)
    before = copy.deepcopy(document)
    new, _ = apply(
        {
            "$set": {"addr.zip": "1"},
            "$unset": ["name"],
            "$inc": {"n": 1},
            "$push": {"notes": "b"},
            "$merge": {"": {"extra": True}},
        },
        document,
    )
    assert document == before
    assert new["addr"] == {"city": "X", "zip": "1"}
    assert new["notes"] == ["a", "b"]


# --- schedules, cancels, spawns, auto -----------------------------------------------------


def schedule_workflow(entries: list[dict[str, Any]], cancel: list[str] | None = None) -> Workflow:
    return workflow(
        {
            "go": {
                "role": "clerk",
                "from": "draft",
                "to": "open",
                "schedule": entries,
                "cancel": cancel or [],
            }
        }
    )


def run_go(wf: Workflow, clock: FakeClock, **parts: Any) -> MutateEffects:
    document: JsonObject = {"state": "draft", "due": "2026-07-01T09:00:00+02:00"}
    return apply_action(wf, wf.action("go"), document, scope(document, now=clock.now(), **parts))


def test_schedules_resolve_against_now() -> None:
    clock = FakeClock(NOW)
    wf = schedule_workflow(
        [
            {"id": "deadline", "action": "close", "in": "48h", "data": {"reason": "sla"}},
            {"id": "review", "action": "ping", "every": "1y", "count": 3, "data": {}},
            {
                "id": "fixed",
                "action": "close",
                "at": "2026-12-24T18:00:00+01:00",
                "data": {"by": "{{ input.who }}"},
            },
            {"id": "from-doc", "action": "close", "at": "{{ due }}", "data": {}},
            {
                "id": "bounded",
                "action": "ping",
                "every": "30m",
                "until": "{{ input.until }}",
                "data": {},
            },
        ],
        cancel=["deadline"],
    )
    clock.advance(hours=1)
    effects = run_go(wf, clock, input={"who": "ann", "until": "2026-06-19T00:00:00Z"})
    now = NOW + timedelta(hours=1)
    assert effects.schedules == (
        ResolvedSchedule("deadline", "close", {"reason": "sla"}, now + timedelta(hours=48)),
        ResolvedSchedule(
            "review", "ping", {}, now + timedelta(days=365), timedelta(days=365), None, 3
        ),
        ResolvedSchedule("fixed", "close", {"by": "ann"}, datetime(2026, 12, 24, 17, tzinfo=UTC)),
        ResolvedSchedule("from-doc", "close", {}, datetime(2026, 7, 1, 7, tzinfo=UTC)),
        ResolvedSchedule(
            "bounded",
            "ping",
            {},
            now + timedelta(minutes=30),
            timedelta(minutes=30),
            datetime(2026, 6, 19, tzinfo=UTC),
        ),
    )
    assert effects.cancels == ("deadline",)


def test_every_first_runs_one_interval_after_the_event() -> None:
    clock = FakeClock(NOW)
    wf = schedule_workflow([{"id": "tick", "action": "ping", "every": "1d", "data": {}}])
    first = run_go(wf, clock).schedules[0]
    clock.advance(hours=5)
    later = run_go(wf, clock).schedules[0]
    assert first.run_at == NOW + timedelta(days=1)
    assert later.run_at == NOW + timedelta(days=1, hours=5)


@pytest.mark.parametrize(
    ("at", "given", "message"),
    [
        (
            "{{ input.when }}",
            "tomorrow",
            "schedule 'x' 'at' is not an RFC 3339 timestamp: 'tomorrow'",
        ),
        ("{{ input.when }}", 5, "schedule 'x' 'at' is not an RFC 3339 timestamp: 5"),
        ("{{ input.missing }}", None, "schedule 'x' 'at' is not an RFC 3339 timestamp: None"),
    ],
)
def test_a_computed_at_must_be_a_timestamp(at: str, given: JsonValue, message: str) -> None:
    wf = schedule_workflow([{"id": "x", "action": "close", "at": at, "data": {}}])
    with pytest.raises(InvalidInput) as caught:
        run_go(wf, FakeClock(NOW), input={"when": given})
    assert caught.value.message == message


def test_schedule_data_template_must_yield_an_object() -> None:
    wf = schedule_workflow([{"id": "x", "action": "close", "in": "1h", "data": "{{ input.d }}"}])
    assert run_go(wf, FakeClock(NOW), input={"d": {"k": 1}}).schedules[0].data == {"k": 1}
    with pytest.raises(InvalidInput, match="schedule 'x' data must be an object, not an array"):
        run_go(wf, FakeClock(NOW), input={"d": [1]})


def test_rendered_meta_automation_is_reserved() -> None:
    wf = schedule_workflow([{"id": "x", "action": "close", "in": "1h", "data": "{{ input.d }}"}])
    with pytest.raises(ReservedField):
        run_go(wf, FakeClock(NOW), input={"d": {"meta": {"automation": {"kind": "forged"}}}})


def spawn_workflow(entry: dict[str, Any]) -> Workflow:
    return workflow({"fork": {"type": "update", "role": "clerk", "from": "*", "spawn": [entry]}})


def test_spawns_render_every_field() -> None:
    wf = spawn_workflow(
        {
            "workflow": "kyc/{{ input.kind }}",
            "process": "{{ process.id }}-kyc",
            "action": "open",
            "data": {"parent": "{{ process.id }}", "name": "{{ name }}"},
        }
    )
    effects = apply_action(
        wf, wf.action("fork"), DOC, scope(DOC, input={"kind": "retail"}, process={"id": "c-1"})
    )
    assert effects.spawns == (
        ResolvedSpawn("kyc/retail", "c-1-kyc", "open", {"parent": "c-1", "name": "Ada"}),
    )
    assert effects.new_document == DOC


def test_spawn_data_defaults_to_an_empty_object() -> None:
    wf = spawn_workflow({"workflow": "w", "process": "p", "action": "a"})
    assert apply_action(wf, wf.action("fork"), DOC, scope(DOC)).spawns[0].data == {}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"workflow": "w", "process": "{{ input.id }}", "action": "a"},
            "spawn process must be a string, not null",
        ),
        (
            {"workflow": "w", "process": "{{ input.bad }}", "action": "a"},
            "spawn process id 'a b' must match",
        ),
        (
            {"workflow": "{{ input.bad }}", "process": "p", "action": "a"},
            "spawn workflow path 'a b' must match",
        ),
    ],
)
def test_spawn_fields_are_checked_after_rendering(entry: dict[str, Any], message: str) -> None:
    wf = spawn_workflow(entry)
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
        apply_action(wf, wf.action("fork"), DOC, scope(DOC, input={"bad": "a b"}))


def test_auto_data() -> None:
    wf = workflow(
        {
            "flag": {
                "type": "update",
                "role": "AUTOMATION",
                "from": "open",
                "auto": {"data": {"reason": "state-entry", "source_event": "{{ event.hash }}"}},
            },
            "plain": {"type": "update", "role": "AUTOMATION", "from": "open", "auto": True},
        }
    )
    parts = {"event": {"hash": "f" * 64}}
    assert render_auto_data(wf.action("flag"), scope(DOC, **parts)) == {
        "reason": "state-entry",
        "source_event": "f" * 64,
    }
    assert render_auto_data(wf.action("plain"), scope(DOC)) == {}
    with pytest.raises(ValueError, match="not automatic"):
        render_auto_data(wf.action("close"), scope(DOC))


# --- any document and input: effects or InvalidInput, never a crash or an in-place change ---

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)
FIELDS = st.sampled_from(["a", "b", "n", "state"])
OBJECTS = st.dictionaries(FIELDS, JSON, max_size=4)
# Mostly well-typed input, so that the random document decides most outcomes.
INPUTS = st.fixed_dictionaries(
    {
        "a": JSON,
        "n": st.integers(-1000, 1000) | st.floats(-1e6, 1e6) | JSON,
        "patch": st.dictionaries(st.sampled_from(["c", "d"]), JSON, max_size=2) | JSON,
    }
)
EVERYTHING = workflow(
    {
        "all": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "mutate": {
                "$set": {"a.x": "{{ input.a }}"},
                "$unset": ["b.y"],
                "$inc": {"n": "{{ input.n }}"},
                "$push": {"b.list": "{{ input }}"},
                "$merge": {"": "{{ input.patch }}"},
            },
            "schedule": [{"id": "s", "action": "ping", "in": "1h", "data": {"a": "{{ input.a }}"}}],
        }
    }
)


@settings(max_examples=300, deadline=None)
@given(OBJECTS, INPUTS)
def test_any_document_and_input_give_effects_or_invalid_input(
    document: JsonObject, given_input: JsonObject
) -> None:
    document = {**document, "state": "open"}
    before, input_before = copy.deepcopy(document), copy.deepcopy(given_input)
    action = EVERYTHING.action("all")
    try:
        effects = apply_action(EVERYTHING, action, document, scope(document, input=given_input))
    except (InvalidInput, ReservedField):
        event("refused")
    else:
        event("applied")
        assert effects.new_document["state"] == "open"
        assert effects.schedules[0].run_at == NOW + timedelta(hours=1)
    assert document == before
    assert given_input == input_before
