"""The engine's objects on the wire. Field order is the JSON's key order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from charter.wire.codec import Meta, Wire
from charter.wire.patterns import HEX64, PRINCIPAL


@dataclass(frozen=True)
class Actor(Wire):
    id: Annotated[str, Meta(pattern=PRINCIPAL)]
    roles: tuple[str, ...]
    # The active key (64 hex); None when it holds none.
    public_key: Annotated[str | None, Meta(pattern=HEX64, description="The active key.")]
    disabled: bool
    created_at: datetime
    # How many keys the actor has held, the active one included.
    keys: Annotated[int, Meta(ge=0, description="How many keys it has held.")]
