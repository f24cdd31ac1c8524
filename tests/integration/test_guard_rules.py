"""The engine's guard rules (no edit, delete or reorder, the chain never breaks, the
engine is the chokepoint, ...), each with a test. Several are proven at length
elsewhere; this module names where, and holds the ones that live nowhere else.

| rule | proof |
|---|---|
| no delete/edit/reorder | test_triggers.py (append-only, TRUNCATE), test_bookkeeping.py |
| chain never breaks | test_engine.py::test_sixteen_writers_on_one_head_exactly_one_wins, below |
| actor = public key | below; test_engine.py (unknown, retired, disabled keys) |
| no dev bypass ("0000") | below |
| keys/tokens not co-located | below |
| no action without workflow | test_engine.py (unknown_workflow, unknown_action) |
| rules at decision time | test_engine.py::test_rules_in_force_at_decision_time |
| state is authority | test_scheduled_firing.py (stale rows skipped at fire time) |
| engine is chokepoint | test_privileges.py (worker and reader cannot write) |
| every event verifiable | below; test_verification.py |
| system log append-only | test_triggers.py |
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from charter.audit.verify_stored import verify_process
from charter.core.config import Settings
from charter.core.envelope import Submission
from charter.core.errors import BadSignature
from charter.db.database import Database, Role, connect
from charter.db.migrate import migrate
from charter.firing.keys import ensure_automation_actor
from tests.integration.world import ONBOARDING, World, new_process_id, onboarding_definition

SOURCE = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    w.deploy(ONBOARDING, onboarding_definition())
    w.actor("ada", "customer")
    w.actor("automation", "AUTOMATION")
    return w


def test_no_dev_bypass_an_all_zero_signature_is_refused(world: World) -> None:
    pid = new_process_id()
    envelope = world.envelope("ada", "open", pid, None, {"name": "Ada"})
    with pytest.raises(BadSignature):
        world.engine.process_event(Submission(envelope, "0" * 128))


def test_no_dev_bypass_no_zero_signature_or_bypass_flag_in_the_source() -> None:
    # (urllib's `proxy_bypass`, which the HTTP clients use for NO_PROXY, is no flag.)
    suspicious = re.compile(r"[\"']0{64,}[\"']|\"0\" \* (64|128)|skip_signature|(?<!proxy_)bypass")
    found = [
        f"{path.relative_to(SOURCE)}:{number}"
        for path in SOURCE.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if suspicious.search(line)
    ]
    assert found == []


def test_keys_not_co_located_the_automation_secret_is_never_in_the_database(
    empty_database_url: str, tmp_path: Path
) -> None:
    with connect(empty_database_url) as conn:
        migrate(conn)
    settings = Settings(home=tmp_path / "home")
    with Database(empty_database_url, max_size=2) as database:
        secret = ensure_automation_actor(settings, database)
        assert (tmp_path / "home" / "automation.key").stat().st_mode & 0o777 == 0o600
        with database.connection(Role.READER) as conn:
            registered = conn.execute(
                "SELECT public_key FROM charter.actor_keys WHERE actor_id = 'automation'"
            ).fetchall()
            tables = [
                str(row[0])
                for row in conn.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n"
                    " ON n.oid = c.relnamespace WHERE n.nspname = 'charter' AND c.relkind = 'r'"
                    " AND has_table_privilege(c.oid, 'SELECT')"
                )
            ]
            for table in tables:
                hits = conn.execute(
                    f"SELECT count(*) FROM charter.{table} t WHERE t::text LIKE %s",
                    (f"%{secret.hex()}%",),
                ).fetchone()
                assert hits == (0,), f"the automation secret is stored in {table}"
    assert registered == [(secret.public_key_hex,)]


def test_actor_is_public_key_events_record_the_signing_key(world: World) -> None:
    pid = new_process_id()
    accepted = world.submit("ada", "open", pid, None, input_={"name": "Ada"})
    with world.database.connection(Role.READER) as conn:
        row = conn.execute(
            "SELECT actor, actor_id, envelope->>'actor' FROM charter.events WHERE hash = %s",
            (accepted.hash,),
        ).fetchone()
    key = world.keys["ada"].public_key_hex
    assert row == (key, "ada", key)


def test_every_event_verifiable_automated_events_included(world: World) -> None:
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, input_={"name": "Ada"})
    world.submit("ada", "submit_onboarding", pid, opened.hash)
    fired = world.fire_queued(pid, "start_screening")
    assert fired.event_hash is not None
    report = verify_process(world.database, pid, replay=True)
    assert report.to_json() == {"ok": True, "events": 3, "problems": []}
