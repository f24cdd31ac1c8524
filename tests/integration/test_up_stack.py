"""`charter up`'s own pieces: the admin token it hands out must be one the database
knows, and a child process that dies stops the others and is named, instead of hanging."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from charter.auth.tokens import find_token, revoke_token
from charter.cli.children import Died, Family, clean_exit, die_with_parent
from charter.cli.stack import _ensure_admin_token
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


def _sleeper(parent: int) -> None:
    """A child that runs until its parent's SIGTERM."""
    die_with_parent(parent)
    time.sleep(60)


def _failing() -> None:
    raise SystemExit(3)


def test_a_child_that_exits_stops_the_others_and_is_named() -> None:
    context = multiprocessing.get_context("spawn")
    sleeper = context.Process(target=_sleeper, args=(os.getpid(),), name="api")
    failing = context.Process(target=_failing, name="worker")
    family = Family([sleeper, failing])
    family.start()
    try:
        died = asyncio.run(asyncio.wait_for(family.run(), timeout=30))
    finally:
        codes = family.stop()
    assert died == Died("worker", failing.pid, 3)
    assert died.message == (
        f"the worker process (pid {failing.pid}) exited with code 3; stopping everything"
    )
    assert codes == [-signal.SIGTERM, 3]  # the sleeper was stopped by SIGTERM


def test_a_failing_demo_stops_the_wait_with_its_error() -> None:
    context = multiprocessing.get_context("spawn")
    family = Family([context.Process(target=_sleeper, args=(os.getpid(),), name="api")])
    family.start()

    async def demo() -> None:
        raise RuntimeError("the demo failed")

    try:
        with pytest.raises(RuntimeError, match="the demo failed"):
            asyncio.run(asyncio.wait_for(family.run(demo()), timeout=30))
    finally:
        assert all(clean_exit(code) for code in family.stop())
