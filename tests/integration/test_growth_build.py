"""The growth benchmark's loader (bench/growth_build.py) COPYs events in with triggers
off: what it leaves must be what the engine would have written — chains Charter verifies,
heads an appended event extends, and the migrated schema unchanged."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from charter.audit.verify_stored import verify_process
from charter.core.envelope import Envelope, sign
from charter.core.errors import StalePrev
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database
from charter.engine.process_event import Engine

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import growth_build

SHAPE = growth_build.Shape(processes=5, events_per_process=4)


def bump(index: int, prev: str, n: int) -> Envelope:
    key = growth_build.actor_key(index % growth_build.ACTORS)
    return Envelope(
        v=1,
        process=growth_build.process_id(index),
        workflow=growth_build.WORKFLOW,
        action="bump",
        input={"n": n},
        prev=prev,
        actor=key.public_key_hex,
        at=format_rfc3339(datetime.now(UTC)),
    )


def test_a_loaded_database_verifies_and_takes_appends(empty_database_url: str) -> None:
    growth_build.build(empty_database_url, empty_database_url, SHAPE, workers=1)
    with psycopg.connect(empty_database_url) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM charter.events), (SELECT count(*) FROM charter.processes)"
        ).fetchone()
        head = conn.execute(
            "SELECT head_hash, seq FROM charter.processes WHERE id = %s",
            (growth_build.process_id(2),),
        ).fetchone()
    assert counts == (SHAPE.events, SHAPE.processes)
    assert head is not None
    with Database(empty_database_url, max_size=2) as database:
        for index in range(SHAPE.processes):
            report = verify_process(database, growth_build.process_id(index), replay=True)
            assert report.ok, report.to_json()
        engine = Engine(database)
        key = growth_build.actor_key(2 % growth_build.ACTORS)
        accepted = engine.process_event(sign(bump(2, head[0], 5), key))
        assert accepted.seq == head[1] + 1
        assert accepted.process.data == {"count": SHAPE.events_per_process}
        with pytest.raises(StalePrev):  # the loaded head is the head the engine keeps
            engine.process_event(sign(bump(2, head[0], 6), key))
        report = verify_process(database, growth_build.process_id(2), replay=True)
        assert report.ok, report.to_json()
