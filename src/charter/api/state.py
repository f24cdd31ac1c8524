"""What every route needs, held by the app and handed out as a FastAPI dependency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from fastapi import Request

from charter.core.config import Settings
from charter.db.database import Database
from charter.engine.process_event import Engine, Reads


@dataclass(frozen=True)
class Services:
    database: Database
    engine: Engine
    reads: Reads
    settings: Settings


def services(request: Request) -> Services:
    return cast(Services, request.app.state.charter)
