"""What the operators do to values: comparison, arithmetic and conversion to JSON.

Values during evaluation are JSON values plus two internal kinds: a time (an aware
`datetime`) and a duration (a `timedelta`). Nothing here raises for any input: a
comparison that does not apply is false, an arithmetic result that does not apply or
leaves the I-JSON range is null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import Enum

from charter.core.jsontypes import JsonValue
from charter.core.timefmt import TimeFormatError, format_rfc3339, parse_rfc3339

MAX_SAFE_INTEGER = 2**53 - 1
_SECOND = timedelta(seconds=1)


class Kind(Enum):
    """The kinds of value an operator distinguishes."""

    NULL = "null"
    BOOL = "bool"
    NUMBER = "number"
    STRING = "string"
    ARRAY = "array"
    OBJECT = "object"
    TIME = "time"
    DURATION = "duration"
    OTHER = "other"


def kind(value: object) -> Kind:
    """The kind of `value`; bool is never a number."""
    exact = type(value)
    if exact is str:
        return Kind.STRING
    if exact is int or exact is float:
        return Kind.NUMBER
    if value is None:
        return Kind.NULL
    if exact is bool:
        return Kind.BOOL
    if exact is list:
        return Kind.ARRAY
    if exact is dict:
        return Kind.OBJECT
    return _kind_by_class(value)


def _kind_by_class(value: object) -> Kind:
    # Subclasses and mappings that are not dicts (the Scope's parts) are rare: slow path.
    if isinstance(value, bool):
        return Kind.BOOL
    if isinstance(value, int | float):
        return Kind.NUMBER
    if isinstance(value, str):
        return Kind.STRING
    if isinstance(value, datetime):
        return Kind.TIME if value.tzinfo is not None else Kind.OTHER
    if isinstance(value, timedelta):
        return Kind.DURATION
    if isinstance(value, list):
        return Kind.ARRAY
    if isinstance(value, Mapping):
        return Kind.OBJECT
    return Kind.OTHER


def as_time(value: object) -> datetime | None:
    """A time, or an RFC 3339 string read as one; None for anything else."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else None
    if isinstance(value, str):
        try:
            return parse_rfc3339(value)
        except TimeFormatError:
            return None
    return None


def compare(op: str, left: object, right: object) -> bool:
    """`left op right` under the null, type-mismatch and time rules."""
    if left is None or right is None:
        return False
    left_kind, right_kind = kind(left), kind(right)
    if left_kind is not right_kind:
        pair = _coerce(left, left_kind, right, right_kind)
        if pair is None:
            return False
        left, right, left_kind = pair
    if op == "=":
        return equal(left, right)
    if op == "!=":
        return not equal(left, right)
    if left_kind not in _ORDERED:
        return False
    return bool(_ORDER[op](left, right))


def _coerce(left: object, lk: Kind, right: object, rk: Kind) -> tuple[object, object, Kind] | None:
    """Bring two values of different kinds to one kind, where a rule allows it."""
    if Kind.TIME in (lk, rk):
        left_time, right_time = as_time(left), as_time(right)
        if left_time is None or right_time is None:
            return None
        return left_time, right_time, Kind.TIME
    if {lk, rk} == {Kind.DURATION, Kind.NUMBER}:
        return _seconds_or_number(left), _seconds_or_number(right), Kind.NUMBER
    return None


def _seconds_or_number(value: object) -> object:
    return value.total_seconds() if isinstance(value, timedelta) else value


_ORDERED = frozenset({Kind.NUMBER, Kind.STRING, Kind.TIME, Kind.DURATION})
_ORDER = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def equal(left: object, right: object) -> bool:
    """JSON equality: kinds must match (1 = 1.0, but 1 != true), arrays and objects deep.

    Iterative, so a deeply nested document cannot exhaust the stack.
    """
    pending = [(left, right)]
    while pending:
        a, b = pending.pop()
        a_kind = kind(a)
        if a_kind is not kind(b):
            return False
        if a_kind is Kind.ARRAY:
            assert isinstance(a, list)
            assert isinstance(b, list)
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif a_kind is Kind.OBJECT:
            assert isinstance(a, Mapping)
            assert isinstance(b, Mapping)
            if len(a) != len(b) or any(key not in b for key in a):
                return False
            pending.extend((a[key], b[key]) for key in a)
        elif a_kind is Kind.OTHER or a != b:
            return False
    return True


def arith(op: str, left: object, right: object) -> object:
    """`left + right` or `left - right`: numbers, or times and durations; else null."""
    left_kind, right_kind = kind(left), kind(right)
    try:
        if left_kind is Kind.NUMBER and right_kind is Kind.NUMBER:
            assert isinstance(left, int | float)
            assert isinstance(right, int | float)
            return _number(left + right if op == "+" else left - right)
        return _time_arith(op, left, left_kind, right, right_kind)
    except OverflowError:
        # Beyond datetime's years 1..9999, timedelta's range, or a float's.
        return None


def _number(value: int | float) -> int | float | None:
    if isinstance(value, int):
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else None
    return value if math.isfinite(value) else None


def _time_arith(op: str, left: object, lk: Kind, right: object, rk: Kind) -> object:
    if lk is Kind.DURATION and rk is Kind.DURATION:
        assert isinstance(left, timedelta)
        assert isinstance(right, timedelta)
        return left + right if op == "+" else left - right
    if rk is Kind.DURATION:
        # An RFC 3339 string in arithmetic is a time.
        moment = as_time(left)
        assert isinstance(right, timedelta)
        if moment is None:
            return None
        return moment + right if op == "+" else moment - right
    if lk is Kind.DURATION:
        moment = as_time(right)
        assert isinstance(left, timedelta)
        return moment + left if op == "+" and moment is not None else None
    if op == "-" and lk in _TIMELIKE and rk in _TIMELIKE:
        start, end = as_time(right), as_time(left)
        return end - start if start is not None and end is not None else None
    return None


_TIMELIKE = frozenset({Kind.TIME, Kind.STRING})


def to_json(value: object) -> JsonValue:
    """The JSON form of a result: times as RFC 3339 text, durations as seconds."""
    if isinstance(value, datetime):
        return format_rfc3339(value) if value.tzinfo is not None else None
    if isinstance(value, timedelta):
        if value.microseconds:
            return value.total_seconds()
        return value // _SECOND
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return dict(value)
    return value  # type: ignore[return-value]  # JSON by construction of the Scope
