"""Workflow validation: one row per problem kind, with the exact pointer and message."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.core.errors import InvalidWorkflow, UnknownAction
from charter.core.jsontypes import JsonValue
from charter.dsl.validate import Problem, load_workflow, validate_workflow

NAME_RULE = "[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
DURATION_RULE = (
    "(expected <integer><unit>: a positive whole number then one of s m h d w y, e.g. 48h)"
)


def base() -> dict[str, Any]:
    """A small valid workflow that every row breaks in one way."""
    return {
        "dsl": 2,
        "states": ["draft", "open", "closed"],
        "roles": ["clerk", "AUTOMATION"],
        "actions": {
            "start": {"type": "create", "role": "clerk", "to": "draft"},
            "submit": {
                "role": "clerk",
                "from": "draft",
                "to": "open",
                "schedule": [{"id": "deadline", "action": "expire", "in": "48h", "data": {}}],
            },
            "expire": {"role": "AUTOMATION", "from": "open", "to": "closed"},
            "note": {"type": "update", "role": ["clerk", "AUTOMATION"], "from": "*"},
        },
    }


Edit = Callable[[dict[str, Any]], Any]


def _walk(doc: Any, pointer: str) -> tuple[Any, str]:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, parts[-1]


def put(pointer: str, value: JsonValue) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        parent, key = _walk(doc, pointer)
        if isinstance(parent, list):
            parent[int(key)] = value
        else:
            parent[key] = value

    return edit


def append(pointer: str, value: JsonValue) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        parent, key = _walk(doc, pointer)
        parent[key].append(value)

    return edit


def drop(pointer: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        parent, key = _walk(doc, pointer)
        del parent[int(key) if isinstance(parent, list) else key]

    return edit


def both(*edits: Edit) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        for one in edits:
            one(doc)

    return edit


def replace(value: JsonValue) -> Edit:
    return lambda _doc: value


@dataclass(frozen=True)
class Case:
    name: str
    edit: Edit
    problems: list[tuple[str, str]]


A = "/actions"
SCHED = "/actions/submit/schedule/0"
CASES = [
    # --- the document and its top-level fields
    Case("not an object", replace([1, 2]), [("", "a workflow must be a JSON object")]),
    Case("unknown top-level key", put("/name", "x"), [("/name", "unknown field 'name'")]),
    Case("dsl 1", put("/dsl", 1), [("/dsl", "unsupported dsl version 1: must be 2")]),
    Case("dsl as text", put("/dsl", "2"), [("/dsl", "unsupported dsl version '2': must be 2")]),
    Case("dsl true", put("/dsl", True), [("/dsl", "unsupported dsl version True: must be 2")]),
    Case("missing dsl", drop("/dsl"), [("", "missing required field 'dsl'")]),
    Case("missing states", drop("/states"), [("", "missing required field 'states'")]),
    Case("missing actions", drop("/actions"), [("", "missing required field 'actions'")]),
    Case("description type", put("/description", 3), [("/description", "must be a string")]),
    Case(
        "states not a list", put("/states", "draft"), [("/states", "must be a list of state names")]
    ),
    Case(
        "state not a string",
        both(put("/states/2", 5), drop("/actions/expire")),
        [("/states/2", "must be a string"), (f"{SCHED}/action", "unknown action 'expire'")],
    ),
    Case(
        "state bad name",
        both(put("/states", ["draft", "open", "closed", "on hold"])),
        [
            ("/states/3", f"state name 'on hold' must match {NAME_RULE}"),
        ],
    ),
    Case(
        "duplicate state",
        put("/states", ["draft", "open", "closed", "open"]),
        [("/states/3", "duplicate state 'open' (first at index 1)")],
    ),
    Case(
        "duplicate role",
        put("/roles", ["clerk", "AUTOMATION", "clerk"]),
        [("/roles/2", "duplicate role 'clerk' (first at index 0)")],
    ),
    Case("states null", put("/states", None), [("/states", "must be a list of state names")]),
    Case("description null", put("/description", None), [("/description", "must be a string")]),
    Case(
        "spawn null",
        put(f"{A}/note/spawn", None),
        [(f"{A}/note/spawn", "must be a list of spawn entries")],
    ),
    Case(
        "roles not a list",
        put("/roles", {"clerk": 1}),
        [("/roles", "must be a list of role names")],
    ),
    Case(
        "actions not an object",
        put("/actions", ["start"]),
        [("/actions", "must be an object mapping action names to actions")],
    ),
    # --- actions: shape
    Case(
        "action not an object",
        put(f"{A}/note", 1),
        [(f"{A}/note", "an action must be a JSON object")],
    ),
    Case(
        "bad action name",
        both(put(f"{A}/bad name!", {"type": "update", "role": "clerk", "from": "*"})),
        [(f"{A}/bad name!", f"action name must match {NAME_RULE}")],
    ),
    Case(
        "unknown action key",
        put(f"{A}/note/colour", "red"),
        [(f"{A}/note/colour", "unknown field 'colour'")],
    ),
    Case("missing role", drop(f"{A}/note/role"), [(f"{A}/note", "missing required field 'role'")]),
    Case(
        "role wrong type",
        put(f"{A}/note/role", 5),
        [(f"{A}/note/role", "must be a role or a non-empty list of them")],
    ),
    Case(
        "role empty list",
        put(f"{A}/note/role", []),
        [(f"{A}/note/role", "must be a role or a non-empty list of them")],
    ),
    Case(
        "role item not a string",
        put(f"{A}/note/role", ["clerk", 3]),
        [(f"{A}/note/role/1", "must be a string")],
    ),
    Case(
        "unknown role", put(f"{A}/note/role", "boss"), [(f"{A}/note/role", "unknown role 'boss'")]
    ),
    Case(
        "unknown role in list",
        put(f"{A}/note/role", ["clerk", "boss"]),
        [(f"{A}/note/role/1", "unknown role 'boss'")],
    ),
    Case(
        "bad type",
        put(f"{A}/note/type", "delete"),
        [(f"{A}/note/type", "must be one of create, transition, update")],
    ),
    Case(
        "description of an action",
        put(f"{A}/note/description", ["x"]),
        [(f"{A}/note/description", "must be a string")],
    ),
    # --- type rules for from / to
    Case(
        "create with from",
        put(f"{A}/start/from", "draft"),
        [(f"{A}/start/from", "a create action has no 'from': it starts a process")],
    ),
    Case(
        "create without to",
        drop(f"{A}/start/to"),
        [(f"{A}/start", "missing required field 'to' (a create action needs a target state)")],
    ),
    Case(
        "transition without to",
        drop(f"{A}/expire/to"),
        [(f"{A}/expire", "missing required field 'to' (a transition action needs a target state)")],
    ),
    Case(
        "update with to",
        put(f"{A}/note/to", "open"),
        [(f"{A}/note/to", "an update action stays in its state: it has no 'to'")],
    ),
    Case(
        "transition without from",
        drop(f"{A}/expire/from"),
        [(f"{A}/expire", "missing required field 'from' (\"*\" means any state)")],
    ),
    Case(
        "unknown from state",
        put(f"{A}/expire/from", "gone"),
        [(f"{A}/expire/from", "unknown state 'gone'")],
    ),
    Case(
        "unknown from state in list",
        put(f"{A}/expire/from", ["open", "gone"]),
        [(f"{A}/expire/from/1", "unknown state 'gone'")],
    ),
    Case(
        "star inside a list",
        put(f"{A}/note/from", ["*", "open"]),
        [(f"{A}/note/from/0", "'*' must stand alone, not in a list")],
    ),
    Case(
        "from wrong type",
        put(f"{A}/expire/from", 7),
        [(f"{A}/expire/from", "must be a state or a non-empty list of them")],
    ),
    Case(
        "unknown to state",
        put(f"{A}/expire/to", "gone"),
        [(f"{A}/expire/to", "unknown state 'gone'")],
    ),
    Case(
        "to not a string",
        put(f"{A}/expire/to", ["closed"]),
        [(f"{A}/expire/to", "must be a state name")],
    ),
    # --- whole-workflow structure
    Case(
        "unreachable state",
        put("/states", ["draft", "open", "closed", "limbo"]),
        [("/states/3", "state 'limbo' is unreachable from every create action")],
    ),
    Case(
        "no create action",
        drop(f"{A}/start"),
        [(f"{A}", "no create action: a process of this workflow can never start")],
    ),
    # --- when
    Case(
        "when does not parse",
        put(f"{A}/expire/when", "state = "),
        [(f"{A}/expire/when", "unexpected end of input; expected an operand (line 1, column 9)")],
    ),
    Case(
        "when is not a condition",
        put(f"{A}/expire/when", "1 + 2"),
        [
            (
                f"{A}/expire/when",
                "a condition must be true or false, e.g. state = 'ready' (line 1, column 1)",
            )
        ],
    ),
    Case(
        "when not a string",
        put(f"{A}/expire/when", True),
        [(f"{A}/expire/when", "must be a condition string")],
    ),
    Case(
        "when reads an unknown event field",
        put(f"{A}/expire/when", "event.foo = 1"),
        [
            (
                f"{A}/expire/when",
                "unknown field 'event.foo': use one of event.actor, event.at, event.hash",
            )
        ],
    ),
    Case(
        "when reads an unknown process field",
        put(f"{A}/expire/when", "process.x IS NULL"),
        [
            (
                f"{A}/expire/when",
                "unknown field 'process.x': "
                "use one of process.id, process.parent, process.workflow",
            )
        ],
    ),
    Case(
        "when reads a field of now",
        put(f"{A}/expire/when", "now.day > 3"),
        [(f"{A}/expire/when", "'now' is a time and has no fields (line 1, column 1)")],
    ),
    # --- input schema
    Case(
        "input not a schema",
        put(f"{A}/start/input", "object"),
        [(f"{A}/start/input", "must be a JSON Schema (an object or a boolean)")],
    ),
    Case(
        "input schema invalid",
        put(f"{A}/start/input", {"type": "object", "properties": {"n": {"minimum": "x"}}}),
        [
            (
                f"{A}/start/input/properties/n/minimum",
                "invalid JSON Schema: 'x' is not of type 'number'",
            )
        ],
    ),
    Case(
        "input schema of another draft",
        put(f"{A}/start/input", {"$schema": "http://json-schema.org/draft-07/schema#"}),
        [(f"{A}/start/input/$schema", "input schemas use JSON Schema draft 2020-12 only")],
    ),
    # --- mutate
    Case(
        "mutate null",
        put(f"{A}/note/mutate", None),
        [(f"{A}/note/mutate", "must be an object of operators: $set, $unset, $inc, $push, $merge")],
    ),
    Case(
        "mutate not an object",
        put(f"{A}/note/mutate", ["$set"]),
        [(f"{A}/note/mutate", "must be an object of operators: $set, $unset, $inc, $push, $merge")],
    ),
    Case(
        "unknown operator",
        put(f"{A}/note/mutate", {"$rename": {}}),
        [
            (
                f"{A}/note/mutate/$rename",
                "unknown operator '$rename': use one of $set, $unset, $inc, $push, $merge",
            )
        ],
    ),
    Case(
        "$set not an object",
        put(f"{A}/note/mutate", {"$set": ["a"]}),
        [(f"{A}/note/mutate/$set", "must be an object mapping field paths to values")],
    ),
    Case(
        "$unset not a list",
        put(f"{A}/note/mutate", {"$unset": {"a": ""}}),
        [(f"{A}/note/mutate/$unset", "must be a list of field paths")],
    ),
    Case(
        "$unset item not a string",
        put(f"{A}/note/mutate", {"$unset": ["a", 1]}),
        [(f"{A}/note/mutate/$unset/1", "must be a field path")],
    ),
    Case(
        "bad field path",
        put(f"{A}/note/mutate", {"$set": {"a..b": 1}}),
        [(f"{A}/note/mutate/$set/a..b", "'a..b' is not a field path: names separated by '.'")],
    ),
    Case(
        "$inc of a non-number",
        put(f"{A}/note/mutate", {"$inc": {"n": "1"}}),
        [(f"{A}/note/mutate/$inc/n", "must be a number or a '{{ expr }}' template")],
    ),
    Case(
        "$merge of a non-object",
        put(f"{A}/note/mutate", {"$merge": {"a": [1]}}),
        [(f"{A}/note/mutate/$merge/a", "must be an object or a '{{ expr }}' template")],
    ),
    Case(
        "two operators on one field",
        put(f"{A}/note/mutate", {"$set": {"a": {}}, "$push": {"a.list": 1}}),
        [(f"{A}/note/mutate/$push/a.list", "conflicts with $set 'a': write each field once")],
    ),
    Case(
        "template does not parse",
        put(f"{A}/note/mutate", {"$set": {"x": "{{ = }}"}}),
        [
            (
                f"{A}/note/mutate/$set/x",
                "{{ }} at character 1: unexpected '='; expected an operand (line 1, column 2)",
            )
        ],
    ),
    Case(
        "template never closed",
        put(f"{A}/note/mutate", {"$push": {"notes": {"text": "by {{ input.who"}}}),
        [(f"{A}/note/mutate/$push/notes/text", "'{{' at character 4 is never closed")],
    ),
    Case(
        "template reads an unknown event field",
        put(f"{A}/note/mutate", {"$set": {"who": "{{ event.signer }}"}}),
        [
            (
                f"{A}/note/mutate/$set/who",
                "unknown field 'event.signer': use one of event.actor, event.at, event.hash",
            )
        ],
    ),
    # --- state is set by `to`
    Case(
        "$set of state disagrees with to",
        put(f"{A}/expire/mutate", {"$set": {"state": "open"}}),
        [(f"{A}/expire/mutate/$set/state", "$set of state 'open' disagrees with 'to' ('closed')")],
    ),
    Case(
        "$set of state without to",
        put(f"{A}/note/mutate", {"$set": {"state": "open"}}),
        [(f"{A}/note/mutate/$set/state", "'state' is set by 'to', and this action has no 'to'")],
    ),
    Case(
        "$unset of state",
        put(f"{A}/expire/mutate", {"$unset": ["state"]}),
        [(f"{A}/expire/mutate/$unset/0", "$unset cannot change 'state': it is set by 'to'")],
    ),
    Case(
        "$set inside state",
        put(f"{A}/expire/mutate", {"$set": {"state.since": "now"}}),
        [(f"{A}/expire/mutate/$set/state.since", "$set cannot change 'state': it is set by 'to'")],
    ),
    Case(
        "root $merge of state",
        put(f"{A}/expire/mutate", {"$merge": {"": {"state": "draft"}}}),
        [
            (
                f"{A}/expire/mutate/$merge//state",
                "$set of state 'draft' disagrees with 'to' ('closed')",
            )
        ],
    ),
    # --- spawn
    Case(
        "spawn not a list",
        put(f"{A}/note/spawn", {}),
        [(f"{A}/note/spawn", "must be a list of spawn entries")],
    ),
    Case(
        "spawn entry not an object",
        put(f"{A}/note/spawn", ["x"]),
        [(f"{A}/note/spawn/0", "a spawn entry must be an object")],
    ),
    Case(
        "spawn entry missing fields",
        put(f"{A}/note/spawn", [{"workflow": "kyc/check"}]),
        [
            (f"{A}/note/spawn/0", "missing required field 'action'"),
            (f"{A}/note/spawn/0", "missing required field 'process'"),
        ],
    ),
    Case(
        "spawn unknown key",
        put(f"{A}/note/spawn", [{"workflow": "w", "process": "p", "action": "a", "input": {}}]),
        [(f"{A}/note/spawn/0/input", "unknown field 'input'")],
    ),
    Case(
        "spawn bad workflow path",
        put(f"{A}/note/spawn", [{"workflow": "/w", "process": "p", "action": "a"}]),
        [
            (
                f"{A}/note/spawn/0/workflow",
                f"'/w' is not a workflow path: must match {NAME_RULE}(/{NAME_RULE})*",
            )
        ],
    ),
    Case(
        "spawn process not text",
        put(f"{A}/note/spawn", [{"workflow": "w", "process": 5, "action": "a"}]),
        [(f"{A}/note/spawn/0/process", "must be a process id or a template")],
    ),
    Case(
        "spawn data not an object",
        put(f"{A}/note/spawn", [{"workflow": "w", "process": "p", "action": "a", "data": [1]}]),
        [
            (
                f"{A}/note/spawn/0/data",
                "must be an object (or a '{{ expr }}' template that yields one)",
            )
        ],
    ),
    # --- schedule
    Case(
        "schedule not a list",
        put(f"{A}/submit/schedule", {}),
        [(f"{A}/submit/schedule", "must be a list of scheduled actions")],
    ),
    Case(
        "schedule entry not an object",
        put(SCHED, "x"),
        [(SCHED, "a scheduled action must be an object")],
    ),
    Case(
        "schedule missing fields",
        put(SCHED, {"in": "1h"}),
        [
            (SCHED, "missing required field 'action'"),
            (SCHED, "missing required field 'data'"),
            (SCHED, "missing required field 'id'"),
        ],
    ),
    Case(
        "schedule unknown key",
        put(f"{SCHED}/input", {}),
        [(f"{SCHED}/input", "unknown field 'input'")],
    ),
    Case(
        "schedule bad id",
        put(f"{SCHED}/id", "no spaces"),
        [(f"{SCHED}/id", f"must be a schedule id matching {NAME_RULE}")],
    ),
    Case(
        "schedule action not text",
        put(f"{SCHED}/action", 3),
        [(f"{SCHED}/action", "must be an action name")],
    ),
    Case(
        "schedule of an undefined action",
        put(f"{SCHED}/action", "vanish"),
        [(f"{SCHED}/action", "unknown action 'vanish'")],
    ),
    Case(
        "schedule of a create action",
        put(f"{SCHED}/action", "start"),
        [(f"{SCHED}/action", "cannot schedule create action 'start': it starts a process")],
    ),
    Case(
        "schedule of an action without AUTOMATION",
        put(f"{A}/expire/role", "clerk"),
        [
            (
                f"{SCHED}/action",
                "scheduled action 'expire' must grant the AUTOMATION role "
                "(the automation actor fires it)",
            )
        ],
    ),
    Case(
        "duplicate schedule id",
        append(
            f"{A}/submit/schedule",
            {"id": "deadline", "action": "note", "every": "1d", "data": {}},
        ),
        [(f"{A}/submit/schedule/1/id", "duplicate schedule id 'deadline' (first at index 0)")],
    ),
    Case(
        "no timing",
        drop(f"{SCHED}/in"),
        [(SCHED, "needs exactly one of 'in', 'every', 'at'")],
    ),
    Case(
        "several timings",
        put(f"{SCHED}/every", "1d"),
        [(SCHED, "needs exactly one of 'in', 'every', 'at' (it has 'in', 'every')")],
    ),
    Case(
        "bad duration",
        put(f"{SCHED}/in", "48x"),
        [(f"{SCHED}/in", f"not a duration: '48x' {DURATION_RULE}")],
    ),
    Case(
        "zero duration",
        put(f"{SCHED}/in", "0h"),
        [(f"{SCHED}/in", f"not a duration: '0h' {DURATION_RULE}")],
    ),
    Case(
        "duration not text",
        put(f"{SCHED}/in", 3600),
        [(f"{SCHED}/in", "must be a duration such as '48h'")],
    ),
    Case(
        "bad at",
        both(drop(f"{SCHED}/in"), put(f"{SCHED}/at", "2026-13-01T00:00:00Z")),
        [
            (
                f"{SCHED}/at",
                "not an RFC 3339 timestamp: '2026-13-01T00:00:00Z' (month must be in 1..12)",
            )
        ],
    ),
    Case(
        "at without offset",
        both(drop(f"{SCHED}/in"), put(f"{SCHED}/at", "2026-06-01T10:00:00")),
        [(f"{SCHED}/at", "not an RFC 3339 timestamp: '2026-06-01T10:00:00'")],
    ),
    Case(
        "at template does not parse",
        both(drop(f"{SCHED}/in"), put(f"{SCHED}/at", "{{ input.due + }}")),
        [
            (
                f"{SCHED}/at",
                "{{ }} at character 1: "
                "unexpected end of input; expected an operand (line 1, column 14)",
            )
        ],
    ),
    Case(
        "bad until",
        both(drop(f"{SCHED}/in"), put(f"{SCHED}/every", "1d"), put(f"{SCHED}/until", "soon")),
        [(f"{SCHED}/until", "not an RFC 3339 timestamp: 'soon'")],
    ),
    Case(
        "until on a one-shot schedule",
        put(f"{SCHED}/until", "2030-01-01T00:00:00Z"),
        [(f"{SCHED}/until", "'until' bounds a recurring schedule: use it with 'every'")],
    ),
    Case(
        "count zero",
        both(drop(f"{SCHED}/in"), put(f"{SCHED}/every", "1d"), put(f"{SCHED}/count", 0)),
        [(f"{SCHED}/count", "must be a positive integer")],
    ),
    Case(
        "count as text",
        both(drop(f"{SCHED}/in"), put(f"{SCHED}/every", "1d"), put(f"{SCHED}/count", "3")),
        [(f"{SCHED}/count", "must be a positive integer")],
    ),
    Case(
        "count on a one-shot schedule",
        put(f"{SCHED}/count", 2),
        [(f"{SCHED}/count", "'count' bounds a recurring schedule: use it with 'every'")],
    ),
    Case(
        "schedule data not an object",
        put(f"{SCHED}/data", "reason"),
        [(f"{SCHED}/data", "must be an object (or a '{{ expr }}' template that yields one)")],
    ),
    Case(
        "meta.automation in schedule data",
        put(f"{SCHED}/data", {"meta": {"automation": {"kind": "auto_action"}}}),
        [
            (
                f"{SCHED}/data/meta/automation",
                "meta.automation is reserved for the automation worker's provenance",
            )
        ],
    ),
    Case(
        "template error deep in schedule data",
        put(f"{SCHED}/data", {"a": ["ok", "{{ input. }}"]}),
        [
            (
                f"{SCHED}/data/a/1",
                "{{ }} at character 1: "
                "unexpected end of input; expected a field name (line 1, column 9)",
            )
        ],
    ),
    # --- cancel
    Case(
        "cancel not a list",
        put(f"{A}/expire/cancel", "deadline"),
        [(f"{A}/expire/cancel", "must be a list of schedule ids")],
    ),
    Case(
        "cancel item not text",
        put(f"{A}/expire/cancel", [1]),
        [(f"{A}/expire/cancel/0", "must be a schedule id")],
    ),
    Case(
        "cancel of an unknown schedule id",
        put(f"{A}/expire/cancel", ["deadline", "reminder"]),
        [(f"{A}/expire/cancel/1", "unknown schedule id 'reminder': no action schedules it")],
    ),
    # --- auto
    Case(
        "auto of the wrong shape",
        put(f"{A}/expire/auto", "yes"),
        [(f"{A}/expire/auto", 'must be true, false or {"data": {...}}')],
    ),
    Case(
        "auto with an 'input' key",
        put(f"{A}/expire/auto", {"input": {}}),
        [(f"{A}/expire/auto", 'must be true, false or {"data": {...}}')],
    ),
    Case(
        "auto with an extra key",
        put(f"{A}/expire/auto", {"data": {}, "priority": 1}),
        [(f"{A}/expire/auto/priority", "unknown field 'priority'")],
    ),
    Case(
        "auto data not an object",
        put(f"{A}/expire/auto", {"data": 5}),
        [
            (
                f"{A}/expire/auto/data",
                "must be an object (or a '{{ expr }}' template that yields one)",
            )
        ],
    ),
    Case(
        "auto without AUTOMATION",
        put(f"{A}/submit/auto", True),
        [(f"{A}/submit/auto", "an automatic action must grant the AUTOMATION role")],
    ),
    Case(
        "auto on a create action",
        both(put(f"{A}/start/auto", True), put(f"{A}/start/role", ["clerk", "AUTOMATION"])),
        [
            (
                f"{A}/start/auto",
                "a create action cannot be automatic: there is no process to fire on",
            )
        ],
    ),
    # --- the migration block and the reserved prefix
    Case(
        "migration not an object",
        put("/migration", ["clerk"]),
        [("/migration", 'must be an object: {"role": [roles that may migrate processes]}')],
    ),
    Case(
        "migration without role",
        put("/migration", {}),
        [("/migration", "missing required field 'role'")],
    ),
    Case(
        "migration with another key",
        put("/migration", {"role": "clerk", "states": ["open"]}),
        [("/migration/states", "unknown field 'states'")],
    ),
    Case(
        "migration of an unknown role",
        put("/migration", {"role": ["clerk", "ops"]}),
        [("/migration/role/1", "unknown role 'ops'")],
    ),
    Case(
        "migration role empty",
        put("/migration", {"role": []}),
        [("/migration/role", "must be a role or a non-empty list of them")],
    ),
    Case(
        "migration by AUTOMATION",
        put("/migration", {"role": "AUTOMATION"}),
        [
            (
                "/migration/role",
                "the automation actor cannot migrate processes: AUTOMATION cannot be a "
                "migration role",
            )
        ],
    ),
    Case(
        "migration by AUTOMATION in a list",
        put("/migration", {"role": ["clerk", "AUTOMATION"]}),
        [
            (
                "/migration/role/1",
                "the automation actor cannot migrate processes: AUTOMATION cannot be a "
                "migration role",
            )
        ],
    ),
    Case(
        "an action of the reserved prefix",
        put(f"{A}/charter:migrate", {"type": "update", "role": "clerk", "from": "*"}),
        [
            (
                f"{A}/charter:migrate",
                "the 'charter:' prefix is reserved for Charter's built-in actions (such as "
                "charter:migrate): give the action another name",
            )
        ],
    ),
    Case(
        "meta.automation in auto data",
        put(f"{A}/expire/auto", {"data": {"meta": {"automation": "x"}}}),
        [
            (
                f"{A}/expire/auto/data/meta/automation",
                "meta.automation is reserved for the automation worker's provenance",
            )
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_problem_kind_is_reported_exactly(case: Case) -> None:
    doc = base()
    result = case.edit(doc)
    if result is not None:
        doc = result
    found = validate_workflow(doc)
    assert [(p.pointer, p.message) for p in found] == sorted(case.problems)


def test_case_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


def test_the_base_workflow_is_valid() -> None:
    assert validate_workflow(base()) == []


VALID_VARIANTS: list[tuple[str, Edit]] = [
    ("auto false is the same as no auto", put("/actions/submit/auto", False)),
    ("auto with data", put("/actions/expire/auto", {"data": {"reason": "{{ state }}"}})),
    (
        "$set of state that agrees with to",
        put("/actions/expire/mutate", {"$set": {"state": "closed"}}),
    ),
    ("at as a template", both(drop(f"{SCHED}/in"), put(f"{SCHED}/at", "{{ input.due }}"))),
    (
        "recurring with until and count",
        both(
            drop(f"{SCHED}/in"),
            put(f"{SCHED}/every", "1w"),
            put(f"{SCHED}/until", "2030-01-01T00:00:00+02:00"),
            put(f"{SCHED}/count", 5),
        ),
    ),
    ("bare reserved roots", put("/actions/expire/when", "input IS NOT NULL AND event IS NOT NULL")),
    (
        "document paths that look reserved",
        put("/actions/expire/when", "inputs.x = 1 OR events = 2"),
    ),
    ("boolean schema", put("/actions/start/input", True)),
    ("root $merge of a template", put("/actions/note/mutate", {"$merge": {"": "{{ input }}"}})),
    ("dsl with a description", put("/description", "a workflow")),
    ("a migration block", put("/migration", {"role": ["clerk"]})),
    ("a migration role as a string", put("/migration", {"role": "clerk"})),
    (
        "charter inside a name",
        put("/actions/mycharter:x", {"role": "clerk", "from": "*", "to": "open"}),
    ),
]


@pytest.mark.parametrize(("name", "edit"), VALID_VARIANTS, ids=[n for n, _ in VALID_VARIANTS])
def test_valid_variants_have_no_problems(name: str, edit: Edit) -> None:
    doc = base()
    edit(doc)
    assert validate_workflow(doc) == [], name


def test_every_problem_is_reported_at_once_and_sorted() -> None:
    doc = base()
    doc["dsl"] = 3
    doc["actions"]["expire"]["to"] = "gone"
    doc["actions"]["note"]["role"] = "boss"
    doc["actions"]["submit"]["schedule"][0]["in"] = "soon"
    problems = validate_workflow(doc)
    assert [p.pointer for p in problems] == [
        "/actions/expire/to",
        "/actions/note/role",
        f"{SCHED}/in",
        "/dsl",
    ]
    assert problems == sorted(problems)


def test_load_workflow_raises_with_every_problem() -> None:
    doc = base()
    doc["actions"]["expire"]["to"] = "gone"
    doc["dsl"] = 1
    with pytest.raises(InvalidWorkflow) as caught:
        load_workflow(doc)
    assert caught.value.context["problems"] == [
        {"pointer": "/actions/expire/to", "message": "unknown state 'gone'"},
        {"pointer": "/dsl", "message": "unsupported dsl version 1: must be 2"},
    ]
    assert caught.value.message.startswith("2 problem(s); first at /actions/expire/to")


def test_validation_does_not_change_the_document() -> None:
    doc = base()
    doc["actions"]["note"]["mutate"] = {"$set": {"a.b": "{{ input.x }}"}, "$unset": ["c"]}
    before = copy.deepcopy(doc)
    validate_workflow(doc)
    load_workflow(doc)
    assert doc == before


def test_problem_pointers_escape_slash_and_tilde() -> None:
    doc = base()
    doc["actions"]["note"]["mutate"] = {"$inc": {"a/b~c": "x"}}
    assert validate_workflow(doc) == [
        Problem("/actions/note/mutate/$inc/a~1b~0c", "must be a number or a '{{ expr }}' template")
    ]


# --- the golden file, docs/dsl.md and hand-written snippets -----------------------------

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).parents[2] / "examples"
GOLDEN = json.loads((DATA / "broken_workflows.json").read_text())


@pytest.mark.parametrize("entry", GOLDEN, ids=[e["name"] for e in GOLDEN])
def test_golden_broken_workflows(entry: dict[str, Any]) -> None:
    assert entry["problems"], "a golden entry must expect problems"
    assert [p.to_dict() for p in validate_workflow(entry["workflow"])] == entry["problems"]


def test_the_onboarding_example_validates() -> None:
    doc = json.loads((EXAMPLES / "onboarding.json").read_text())
    assert validate_workflow(doc) == []


def snippet_workflow(actions: dict[str, Any]) -> dict[str, Any]:
    """A snippet completed into a whole workflow: states, roles, a create action and the
    actions the snippet names."""
    return {
        "dsl": 2,
        "states": [
            "intake_complete",
            "ready_for_screening",
            "screening_started",
            "escalated",
            "active",
            "offboarded",
        ],
        "roles": ["customer", "analyst", "manager", "AUTOMATION"],
        "actions": {
            "intake": {"type": "create", "role": "customer", "to": "intake_complete"},
            "ready": {"role": "customer", "from": "intake_complete", "to": "ready_for_screening"},
            "escalate_review": {
                "role": "AUTOMATION",
                "from": "screening_started",
                "to": "escalated",
                "mutate": {"$set": {"escalation": "{{ input.reason }}"}},
            },
            "start_review": {"type": "update", "role": "AUTOMATION", "from": "*"},
            "withdraw": {"role": "customer", "from": "*", "to": "offboarded"},
            "approve": {
                "role": "analyst",
                "from": ["screening_started", "escalated"],
                "to": "active",
            },
            **actions,
        },
    }


SNIPPET_SCHEDULE = {
    "start_screening": {
        "type": "transition",
        "role": "analyst",
        "from": "intake_complete",
        "to": "screening_started",
        "schedule": [
            {
                "id": "screening-deadline",
                "action": "escalate_review",
                "in": "48h",
                "data": {"reason": "screening-sla"},
            },
            {"id": "periodic-review", "action": "start_review", "every": "1y", "data": {}},
        ],
    }
}
SNIPPET_CANCEL = {
    "offboard": {
        "type": "transition",
        "role": "manager",
        "from": "active",
        "to": "offboarded",
        "cancel": ["periodic-review", "screening-deadline"],
    }
}
SNIPPET_AUTO = {
    "start_screening": {
        "role": "AUTOMATION",
        "auto": True,
        "from": "ready_for_screening",
        "to": "screening_started",
        "when": "state = 'ready_for_screening'",
        "mutate": {"$set": {"state": "screening_started", "screening_status": "started"}},
    }
}
SNIPPET_AUTO_DATA = {
    "start_screening": {
        **SNIPPET_AUTO["start_screening"],
        "auto": {"data": {"reason": "state-entry", "source_event": "event.hash"}},
    }
}
SNIPPET_SNIPPETS = {
    "schedule": SNIPPET_SCHEDULE,
    # `cancel` names ids that the schedule snippet defines, so it needs that action too.
    "schedule and cancel": {**SNIPPET_SCHEDULE, **SNIPPET_CANCEL},
    "auto: true": SNIPPET_AUTO,
    "auto with data": SNIPPET_AUTO_DATA,
}


@pytest.mark.parametrize("actions", SNIPPET_SNIPPETS.values(), ids=list(SNIPPET_SNIPPETS))
def test_the_snippets_validate(actions: dict[str, Any]) -> None:
    assert validate_workflow(snippet_workflow(actions)) == []


def test_the_cancel_snippet_without_the_schedules_names_undefined_ids() -> None:
    assert validate_workflow(snippet_workflow({**SNIPPET_AUTO, **SNIPPET_CANCEL})) == [
        Problem(
            "/actions/offboard/cancel/0",
            "unknown schedule id 'periodic-review': no action schedules it",
        ),
        Problem(
            "/actions/offboard/cancel/1",
            "unknown schedule id 'screening-deadline': no action schedules it",
        ),
    ]


# --- robustness: any JSON anywhere gives problems, never an exception ---------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["*", "", "draft", "AUTOMATION", "{{ input.x }}", "{{", "1h", "$set"])
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
PLACES = [
    "/dsl",
    "/states",
    "/roles",
    "/actions",
    "/actions/start",
    "/actions/start/type",
    "/actions/submit/role",
    "/actions/submit/from",
    "/actions/submit/to",
    "/actions/submit/when",
    "/actions/submit/input",
    "/actions/submit/mutate",
    "/actions/submit/spawn",
    "/actions/submit/schedule",
    f"{SCHED}",
    f"{SCHED}/data",
    f"{SCHED}/at",
    f"{SCHED}/count",
    "/actions/expire/cancel",
    "/actions/expire/auto",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PLACES), JSON_VALUES), min_size=1, max_size=4))
def test_any_value_anywhere_is_reported_not_raised(edits: list[tuple[str, JsonValue]]) -> None:
    doc = base()
    for pointer, value in edits:
        try:
            put(pointer, value)(doc)
        except (KeyError, TypeError, IndexError, ValueError):
            continue  # an earlier edit removed the parent: nothing to place
    problems = validate_workflow(doc)
    assert problems == sorted(set(problems))
    if problems:
        with pytest.raises(InvalidWorkflow):
            load_workflow(doc)
    else:
        load_workflow(doc)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_any_document_is_reported_not_raised(doc: JsonValue) -> None:
    assert validate_workflow(doc)


def test_a_migration_block_grants_the_built_in_action_and_nothing_else() -> None:
    doc = base()
    doc["migration"] = {"role": ["clerk"]}
    workflow = load_workflow(doc)
    action = workflow.action("charter:migrate")
    assert (action.type, action.roles, action.from_states, action.to) == (
        "update", ("clerk",), None, None,
    )  # fmt: skip
    assert workflow.is_migration(action)
    assert "charter:migrate" not in workflow.actions  # never one of the workflow's own
    assert action.input_schema["properties"]["state"]["enum"] == ["draft", "open", "closed"]  # type: ignore[index, call-overload]
    with pytest.raises(UnknownAction, match="no `migration` block"):
        load_workflow(base()).action("charter:migrate")
