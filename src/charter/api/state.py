"""What every route needs, held by the app and handed out as a FastAPI dependency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from fastapi import Request

from charter.automations.wakeups import RunWakeups
from charter.core.config import Settings
from charter.db.database import Database
from charter.engine.process_event import Engine
from charter.engine.reads import Reads


@dataclass(frozen=True)
class Services:
    database: Database
    engine: Engine
    reads: Reads
    settings: Settings
    wakeups: RunWakeups  # the LISTEN that wakes long-poll claims


def services(request: Request) -> Services:
    return cast(Services, request.app.state.charter)
