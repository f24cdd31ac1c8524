"""What an `expect` step checks, and the messages that say how the world differs.

Pure: the scenario reads what it needs (`Observed`) and `mismatches` compares. `data` is
a subset match (every field the expectation names, at any depth, and nothing about the
others); `timers` is a set, `queue` a multiset, `events` a count or the exact list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.unset import UNSET, Unset


@dataclass(frozen=True)
class Expectation:
    """One `expect` step: each field left as None (`last_error`: UNSET) is not checked."""

    process: str | None = None
    state: str | None = None
    data: JsonObject | None = None
    timers: frozenset[str] | None = None
    queue: tuple[str, ...] | None = None
    events: int | tuple[str, ...] | None = None
    # The code of the last refused step; None: no step has been refused yet.
    last_error: str | Unset | None = UNSET

    def is_empty(self) -> bool:
        return (
            self.state is None
            and self.data is None
            and self.timers is None
            and self.queue is None
            and self.events is None
            and self.last_error is UNSET
        )


@dataclass(frozen=True)
class Observed:
    """What a process looks like now (and the scenario's last refusal)."""

    state: str
    data: JsonObject
    timers: frozenset[str]
    queue: tuple[str, ...]
    events: tuple[str, ...]
    last_error: str | None


def mismatches(expected: Expectation, observed: Observed) -> list[str]:
    """One sentence per difference, `expected ..., got ...`; empty when all hold."""
    found: list[str] = []
    if expected.state is not None and expected.state != observed.state:
        found.append(f"expected state {_show(expected.state)}, got {_show(observed.state)}")
    if expected.data is not None:
        found += _subset(expected.data, observed.data, "data")
    if expected.timers is not None and expected.timers != observed.timers:
        found.append(
            f"expected timers {_names(sorted(expected.timers))}, "
            f"got {_names(sorted(observed.timers))}"
        )
    if expected.queue is not None and sorted(expected.queue) != sorted(observed.queue):
        found.append(
            f"expected queue {_names(sorted(expected.queue))}, got {_names(sorted(observed.queue))}"
        )
    if isinstance(expected.events, int) and expected.events != len(observed.events):
        found.append(
            f"expected {expected.events} events, got {len(observed.events)}: "
            f"{_names(observed.events)}"
        )
    if isinstance(expected.events, tuple) and expected.events != observed.events:
        found.append(f"expected events {_names(expected.events)}, got {_names(observed.events)}")
    if expected.last_error is not UNSET and expected.last_error != observed.last_error:
        found.append(
            f"expected last error {_error(expected.last_error)}, got {_error(observed.last_error)}"
        )
    return found


_MISSING = object()


def _subset(expected: JsonValue, actual: JsonValue | object, path: str) -> list[str]:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"expected {path} to be an object, got {_value(actual)}"]
        found: list[str] = []
        for key, value in expected.items():
            found += _subset(value, actual.get(key, _MISSING), f"{path}.{key}")
        return found
    if actual is _MISSING or not same_json(expected, actual):
        return [f"expected {path} to be {_show(expected)}, got {_value(actual)}"]
    return []


def same_json(a: object, b: object) -> bool:
    """JSON equality: numbers by value (1 = 1.0), but a boolean is never a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _value(actual: object) -> str:
    return "no such field" if actual is _MISSING else _show(actual)


def _show(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _names(names: Sequence[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _error(code: str | Unset | None) -> str:
    return "none" if code is None or code is UNSET else _show(code)
