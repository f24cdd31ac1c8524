"""`charter up`'s own pieces: the admin token it hands out must be one the database
knows, and a side task that dies stops everything with its error instead of hanging."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.console import Console

from charter.auth.tokens import find_token, revoke_token
from charter.cli.stack import _ensure_admin_token, _serve
from charter.core.config import Settings
from charter.db.database import Database, Role


def _known(database: Database, token: str) -> bool:
    with database.connection(Role.ENGINE) as conn:
        found = find_token(conn, token)
    return found is not None and found.revoked_at is None


def test_the_admin_token_is_made_once_and_remade_when_the_database_does_not_know_it(
    database: Database, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path / "home")
    path = _ensure_admin_token(settings, database)
    first = path.read_text().strip()
    assert _known(database, first)
    assert path.stat().st_mode & 0o777 == 0o600
    assert _ensure_admin_token(settings, database).read_text().strip() == first  # kept

    path.write_text("a-token-from-another-database\n")  # an old home, a new database
    second = _ensure_admin_token(settings, database).read_text().strip()
    assert second != "a-token-from-another-database"
    assert _known(database, second)

    with database.connection(Role.ENGINE) as conn:  # an operator revoked it
        record = find_token(conn, second)
        assert record is not None
        revoke_token(conn, record.id)
    third = _ensure_admin_token(settings, database).read_text().strip()
    assert third != second
    assert _known(database, third)


class _Server:
    """What `_serve` drives of uvicorn's server: serve() until should_exit."""

    def __init__(self) -> None:
        self.should_exit = False

    async def serve(self) -> None:
        while not self.should_exit:
            await asyncio.sleep(0.01)


class _Side:
    """A worker or cron loop: run() until stop(), or fail at once."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        if self.fail:
            raise RuntimeError("the worker died")
        await self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()


def test_a_side_task_that_dies_stops_everything_with_its_error(tmp_path: Path) -> None:
    server = _Server()

    async def serve() -> None:
        await _serve(
            server,  # type: ignore[arg-type]
            _Side(fail=True),  # type: ignore[arg-type]
            _Side(),  # type: ignore[arg-type]
            demo_url=None,
            settings=Settings(home=tmp_path),
            console=Console(),
            token_path=tmp_path / "admin-token",
        )

    async def bounded() -> None:
        await asyncio.wait_for(serve(), timeout=10)  # it used to wait forever

    with pytest.raises(RuntimeError, match="the worker died"):
        asyncio.run(bounded())
    assert server.should_exit
