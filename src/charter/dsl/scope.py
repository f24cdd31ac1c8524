"""What an expression can read: the process document and the reserved roots."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from charter.core.jsontypes import JsonValue

_EMPTY: Mapping[str, JsonValue] = MappingProxyType({})


def _empty() -> Mapping[str, JsonValue]:
    return _EMPTY


@dataclass(frozen=True)
class Scope:
    """The values an expression reads; `now` comes from the injectable clock."""

    #: the process document, including "state"
    document: Mapping[str, JsonValue]
    #: aware; from the injectable clock
    now: datetime
    #: the event's input
    input: Mapping[str, JsonValue] = field(default_factory=_empty)
    #: {"id", "public_key", "roles": [...]}
    actor: Mapping[str, JsonValue] = field(default_factory=_empty)
    #: {"hash", "actor", "at"}
    event: Mapping[str, JsonValue] = field(default_factory=_empty)
    #: {"id", "workflow", "parent"}
    process: Mapping[str, JsonValue] = field(default_factory=_empty)
    #: Set only while replaying over erased values (charter.dsl.erased): conditions are
    #: then three-valued, and each one that cannot be decided is noted here.
    unknowns: list[str] | None = None

    def __post_init__(self) -> None:
        # Refused here so that evaluation never meets a naive time it cannot compare.
        if self.now.tzinfo is None or self.now.utcoffset() is None:
            raise ValueError("Scope.now must be an aware datetime")
