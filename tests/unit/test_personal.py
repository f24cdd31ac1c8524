"""Personal input fields in the DSL: which pointers are personal, where the mark is
refused, where a personal value may not flow, and the `erasure` block."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from charter.dsl.model import ErasureSpec
from charter.dsl.validate import load_workflow, validate_workflow

ERASURE: dict[str, Any] = {
    "role": ["dpo"],
    "from": "*",
    "when": "state IN ('closed')",
    "bases": ["art17-1a", "retention-expired"],
}


def workflow(**actions: Any) -> dict[str, Any]:
    """A workflow whose `open` has one personal field `/name`, plus `actions`."""
    doc: dict[str, Any] = {
        "dsl": 2,
        "states": ["open", "closed"],
        "roles": ["clerk", "dpo", "AUTOMATION"],
        "erasure": copy.deepcopy(ERASURE),
        "actions": {
            "open": {
                "type": "create",
                "role": "clerk",
                "to": "open",
                "input": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "x-personal": True},
                        "country": {"type": "string"},
                    },
                },
                "mutate": {"$set": {"name": "{{ input.name }}", "country": "{{ input.country }}"}},
            },
            "close": {"role": "clerk", "from": "open", "to": "closed"},
        },
    }
    doc["actions"].update(actions)
    return doc


def codes(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(p.pointer, p.code) for p in validate_workflow(doc)]


def test_personal_pointers_follow_properties_in_schema_order_with_escapes() -> None:
    doc = workflow(
        note={
            "type": "update",
            "role": "clerk",
            "from": "*",
            "input": {
                "type": "object",
                "properties": {
                    "a/b": {"type": "string", "x-personal": True},
                    "address": {
                        "type": "object",
                        "properties": {
                            "street": {"type": "string", "x-personal": True},
                            "city": {"type": "string", "x-personal": False},
                        },
                    },
                    "phones": {"type": "array", "items": {"type": "string"}, "x-personal": True},
                },
            },
        }
    )
    model = load_workflow(doc)
    assert model.actions["note"].personal == ("/a~1b", "/address/street", "/phones")
    assert model.personal() == {"open": ["/name"], "note": ["/a~1b", "/address/street", "/phones"]}
    assert model.actions["close"].personal == ()


def test_the_erasure_block_is_read() -> None:
    model = load_workflow(workflow())
    assert isinstance(model.erasure, ErasureSpec)
    assert model.erasure.roles == ("dpo",)
    assert model.erasure.from_states is None
    assert model.erasure.bases == ("art17-1a", "retention-expired")
    assert model.erasure.when is not None
    assert model.erasure.when.source == "state IN ('closed')"
    listed = workflow()
    listed["erasure"]["from"] = ["closed"]
    erasure = load_workflow(listed).erasure
    assert erasure is not None
    assert erasure.from_states == ("closed",)


def _input(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "update", "role": "clerk", "from": "*",
            "input": {"type": "object", "properties": properties, **extra}}  # fmt: skip


X = "x-personal"
MISPLACED = [
    (
        "nested under a personal object",
        _input({"a": {"type": "object", X: True, "properties": {"b": {X: True}}}}),
        "/actions/note/input/properties/a/properties/b/x-personal",
        "personal_nested",
    ),
    (
        "on array items",
        _input({"tags": {"type": "array", "items": {"type": "string", X: True}}}),
        "/actions/note/input/properties/tags/items/x-personal",
        "personal_in_array",
    ),
    (
        "on a property of array items",
        _input({"people": {"type": "array", "items": {"properties": {"n": {X: True}}}}}),
        "/actions/note/input/properties/people/items/properties/n/x-personal",
        "personal_in_array",
    ),
    (
        "on prefixItems",
        _input({"pair": {"type": "array", "prefixItems": [{}, {X: True}]}}),
        "/actions/note/input/properties/pair/prefixItems/1/x-personal",
        "personal_in_array",
    ),
    (
        "under allOf",
        _input({}, allOf=[{"properties": {"n": {X: True}}}]),
        "/actions/note/input/allOf/0/properties/n/x-personal",
        "personal_misplaced",
    ),
    (
        "under $defs",
        _input({}, **{"$defs": {"p": {X: True}}}),
        "/actions/note/input/$defs/p/x-personal",
        "personal_misplaced",
    ),
    (
        "not a boolean",
        _input({"n": {"type": "string", X: "yes"}}),
        "/actions/note/input/properties/n/x-personal",
        "personal_invalid",
    ),
]


@pytest.mark.parametrize(
    ("edit", "pointer", "code"),
    [case[1:] for case in MISPLACED],
    ids=[case[0] for case in MISPLACED],
)
def test_a_misplaced_mark_is_a_coded_problem(edit: Any, pointer: str, code: str) -> None:
    assert codes(workflow(note=edit)) == [(pointer, code)]


def test_the_input_root_cannot_be_personal() -> None:
    doc = workflow(note={"type": "update", "role": "clerk", "from": "*",
                         "input": {"type": "object", X: True}})  # fmt: skip
    assert codes(doc) == [("/actions/note/input/x-personal", "personal_misplaced")]


def test_personal_fields_need_an_erasure_block() -> None:
    doc = workflow()
    del doc["erasure"]
    [problem] = validate_workflow(doc)
    assert (problem.pointer, problem.code) == ("", "personal_without_erasure")
    assert "'open'" in problem.message
    assert problem.to_dict()["code"] == "personal_without_erasure"
    plain = workflow()
    del plain["erasure"]
    plain["actions"]["open"]["input"]["properties"]["name"].pop(X)
    assert validate_workflow(plain) == []


def test_a_reserved_action_name_has_its_code() -> None:
    doc = workflow(**{"charter:erase": {"type": "update", "role": "dpo", "from": "*"}})
    assert codes(doc) == [("/actions/charter:erase", "reserved_action")]


def _scheduled(data: Any) -> dict[str, Any]:
    return {"role": "clerk", "from": "open", "to": "open",
            "schedule": [{"id": "remind", "action": "ping", "in": "1d", "data": data}]}  # fmt: skip


PING = {"type": "update", "role": "AUTOMATION", "from": "*"}


def test_a_personal_input_in_schedule_data_flows_out() -> None:
    doc = workflow(ping=PING)
    doc["actions"]["open"]["schedule"] = [
        {"id": "remind", "action": "ping", "in": "1d", "data": {"who": "{{ input.name }}"}}
    ]
    [problem] = validate_workflow(doc)
    assert (problem.pointer, problem.code) == ("/actions/open/schedule/0", "personal_flows_out")
    assert "input.name, a personal input of 'open'" in problem.message


def test_reading_the_whole_input_reads_its_personal_fields() -> None:
    doc = workflow(ping=PING)
    doc["actions"]["open"]["schedule"] = [
        {"id": "remind", "action": "ping", "in": "1d", "data": {"all": "{{ input }}"}}
    ]
    assert codes(doc) == [("/actions/open/schedule/0", "personal_flows_out")]


def test_non_personal_values_and_conditions_over_personal_ones_are_fine() -> None:
    doc = workflow(ping=PING, again=_scheduled({"country": "{{ country }}"}))
    doc["actions"]["open"]["when"] = "input.name != 'x'"
    doc["actions"]["open"]["schedule"] = [
        {"id": "soon", "action": "ping", "in": "1d", "data": {"c": "{{ input.country }}"}}
    ]
    assert validate_workflow(doc) == []


def test_a_two_step_derivation_into_spawn_data_flows_out() -> None:
    doc = workflow(
        greet={"type": "update", "role": "clerk", "from": "*",
               "mutate": {"$set": {"letter.salutation": "Dear {{ name }}"}}},
        welcome={"type": "update", "role": "clerk", "from": "*",
                 "spawn": [{"workflow": "mail/out", "process": "m-{{ process.id }}",
                            "action": "send", "data": {"text": "{{ letter }}"}}]},
    )  # fmt: skip
    [problem] = validate_workflow(doc)
    assert (problem.pointer, problem.code) == ("/actions/welcome/spawn/0", "personal_flows_out")
    assert "which 'greet' sets from name, which 'open' sets from input.name" in problem.message


def test_a_merge_of_personal_data_at_the_root_taints_the_whole_document() -> None:
    doc = workflow(
        absorb={"type": "update", "role": "clerk", "from": "*",
                "input": {"type": "object", "properties": {"profile": {X: True}}},
                "mutate": {"$merge": {"": "{{ input.profile }}"}}},
        ping=PING,
        remind=_scheduled({"anything": "{{ colour }}"}),
    )  # fmt: skip
    assert codes(doc) == [("/actions/remind/schedule/0", "personal_flows_out")]


def test_auto_data_and_schedule_times_are_checked() -> None:
    doc = workflow(
        note={"type": "update", "role": "clerk", "from": "*",
              "input": {"type": "object", "properties": {"due": {X: True}}},
              "schedule": [{"id": "d", "action": "ping", "at": "{{ input.due }}", "data": {}}]},
        ping={**PING, "auto": {"data": {"n": "{{ name }}"}}},
    )  # fmt: skip
    assert codes(doc) == [
        ("/actions/note/schedule/0", "personal_flows_out"),
        ("/actions/ping/auto", "personal_flows_out"),
    ]


def test_an_overwritten_field_stays_personal_once_derived() -> None:
    # Static: a field set from a personal value by any action is personal for every reader.
    doc = workflow(
        rename={"type": "update", "role": "clerk", "from": "*",
                "mutate": {"$set": {"name": "anonymous"}}},
        ping=PING,
        remind=_scheduled({"n": "{{ name }}"}),
    )  # fmt: skip
    assert codes(doc) == [("/actions/remind/schedule/0", "personal_flows_out")]


@pytest.mark.parametrize(
    ("block", "pointer"),
    [
        ("dpo", "/erasure"),
        ({"role": "dpo", "from": "*"}, "/erasure"),
        ({"role": "dpo", "from": "*", "bases": []}, "/erasure/bases"),
        ({"role": "dpo", "from": "*", "bases": ["art 17"]}, "/erasure/bases/0"),
        ({"role": "dpo", "from": "*", "bases": ["a", "a"]}, "/erasure/bases/1"),
        ({"role": "AUTOMATION", "from": "*", "bases": ["a"]}, "/erasure/role"),
        ({"role": "nobody", "from": "*", "bases": ["a"]}, "/erasure/role"),
        ({"role": "dpo", "from": "gone", "bases": ["a"]}, "/erasure/from"),
        ({"role": "dpo", "from": "*", "bases": ["a"], "when": "state ="}, "/erasure/when"),
        ({"role": "dpo", "from": "*", "bases": ["a"], "why": "x"}, "/erasure/why"),
    ],
)
def test_a_broken_erasure_block_is_refused(block: Any, pointer: str) -> None:
    doc = workflow()
    doc["erasure"] = block
    pointers = [p.pointer for p in validate_workflow(doc)]
    assert pointers, "refused"
    assert all(p == pointer for p in pointers), pointers
