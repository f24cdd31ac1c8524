"""`charter workflows test` as a user runs it, in a process of its own: the shipped
scenarios pass, a failure and a malformed file give their exit codes and messages, the
JSON report, and the scratch database is gone afterwards — after a failure and after
Ctrl-C or SIGTERM too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHARTER = str(Path(sys.executable).parent / "charter")
SHIPPED = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "scenarios").glob("*.json"))


def charter(*args: str, admin_url: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CHARTER_TEST_ADMIN_URL"}
    database = ["--database", admin_url] if admin_url else []
    return subprocess.run(
        [CHARTER, "workflows", "test", *args, *database],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def scratch_databases(admin_url: str, pid: int | None = None) -> list[str]:
    pattern = f"charter_scenarios_{pid}_%" if pid else "charter_scenarios_%"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (pattern,)
        ).fetchall()
    return [str(row[0]) for row in rows]


def write(directory: Path, name: str, doc: Any) -> str:
    path = directory / name
    path.write_text(json.dumps(doc))
    return str(path)


def onboarding_spec(steps: list[Any]) -> dict[str, Any]:
    return {
        "workflow": str(ROOT / "examples" / "onboarding.json"),
        "start": "2026-06-18T10:00:00Z",
        "actors": {"alice": ["customer"], "ann": ["analyst"]},
        "steps": steps,
    }


def test_the_shipped_scenarios_pass(pg_admin_url: str) -> None:
    assert len(SHIPPED) >= 4
    done = charter(*SHIPPED, admin_url=pg_admin_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        *(f"PASS {path}" for path in SHIPPED),
        f"{len(SHIPPED)} passed, 0 failed",
    ]


def test_without_a_server_an_embedded_one_is_used() -> None:
    done = charter(SHIPPED[0], admin_url=None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"PASS {SHIPPED[0]}", "1 passed, 0 failed"]


def test_a_failing_scenario_exits_1_and_leaves_nothing_behind(
    pg_admin_url: str, tmp_path: Path
) -> None:
    failing = write(tmp_path, "late.scenario.json", onboarding_spec([
        {"act": "alice", "action": "open", "input": {"name": "Ada"}},
        {"act": "alice", "action": "submit_onboarding"},
        {"advance": "47h"},
        {"expect": {"state": "escalated"}},
    ]))  # fmt: skip
    # Other tests of this session may hold scratch databases of their own: compare.
    before = set(scratch_databases(pg_admin_url))
    done = charter(SHIPPED[0], failing, admin_url=pg_admin_url)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        f"PASS {SHIPPED[0]}",
        f'FAIL {failing}: step 4: expected state "escalated", got "screening_started"',
        "1 passed, 1 failed",
    ]
    assert set(scratch_databases(pg_admin_url)) == before


def test_the_json_report(pg_admin_url: str, tmp_path: Path) -> None:
    refused = write(tmp_path, "refused.scenario.json", onboarding_spec([
        {"act": "ann", "action": "approve"},
    ]))  # fmt: skip
    done = charter(SHIPPED[0], refused, "--json", admin_url=pg_admin_url)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert (report["passed"], report["failed"], report["problems"]) == (1, 1, [])
    passed, failed = report["scenarios"]
    assert passed["status"] == "pass"
    assert passed["file"] == SHIPPED[0]
    assert passed["failure"] is None
    assert passed["virtual_time"]["start"] == "2026-06-18T10:00:00.000Z"
    assert set(passed) == {"file", "status", "steps", "ran", "failure", "process",
                           "virtual_time", "events", "seconds"}  # fmt: skip
    assert failed["status"] == "fail"
    assert failed["failure"]["step"] == 1
    assert failed["failure"]["pointer"] == "/steps/0"
    assert failed["failure"]["message"].startswith(
        "expected ann's approve to be accepted, got wrong_state: "
    )


def test_a_malformed_file_exits_2_and_runs_nothing(pg_admin_url: str, tmp_path: Path) -> None:
    malformed = write(tmp_path, "typo.scenario.json", onboarding_spec([
        {"act": "alice", "action": "open", "input": {"name": "Ada"}},
        {"expect": {"sate": "draft"}},
        {"act": "bob", "action": "approve"},
    ]))  # fmt: skip
    done = charter(SHIPPED[0], malformed, admin_url=pg_admin_url)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"malformed {malformed}: /steps/1/expect: expects nothing: name state, data, timers, "
        "queue, events or last_error",
        f"malformed {malformed}: /steps/1/expect/sate: unknown key 'sate' (allowed: data, "
        "events, last_error, process, queue, state, timers)",
        f"malformed {malformed}: /steps/2/act: unknown actor 'bob': /actors declares "
        "['alice', 'ann']",
        "3 problem(s) in 1 file(s); nothing was run",
    ]
    as_json = charter(malformed, "--json", admin_url=pg_admin_url)
    assert as_json.returncode == 2
    problems = json.loads(as_json.stdout)["problems"]
    assert [p["pointer"] for p in problems] == ["/steps/1/expect", "/steps/1/expect/sate",
                                                "/steps/2/act"]  # fmt: skip
    assert {p["file"] for p in problems} == {malformed}


def test_a_missing_file_is_malformed(pg_admin_url: str, tmp_path: Path) -> None:
    done = charter(str(tmp_path / "nothing.json"), admin_url=pg_admin_url)
    assert done.returncode == 2
    assert "nothing.json: /: cannot read: No such file or directory" in done.stderr


RUNAWAY: dict[str, Any] = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "schedule": [{"id": "tick", "action": "tick", "every": "1s", "data": {}}]},
        "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
    },
}  # fmt: skip


@contextmanager
def long_run(admin_url: str, directory: Path) -> Iterator[subprocess.Popen[str]]:
    """A run busy firing a schedule every virtual second, once its database exists."""
    (directory / "runaway.json").write_text(json.dumps(RUNAWAY))
    spec = write(directory, "runaway.scenario.json", {
        "workflow": "runaway.json", "actors": {"alice": ["customer"]},
        "steps": [{"act": "alice", "action": "open"}, {"advance": "1y"}],
    })  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "CHARTER_TEST_ADMIN_URL"}
    process = subprocess.Popen(
        [CHARTER, "workflows", "test", spec, "--database", admin_url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not scratch_databases(admin_url, process.pid):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run made no database"
            time.sleep(0.05)
        time.sleep(0.5)  # well into firing
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_an_interrupted_run_drops_its_database(
    pg_admin_url: str, tmp_path: Path, sent: signal.Signals, code: int
) -> None:
    with long_run(pg_admin_url, tmp_path) as process:
        process.send_signal(sent)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == code, stderr
        assert stderr.splitlines() == ["interrupted: the scratch database was dropped"]
        assert scratch_databases(pg_admin_url, process.pid) == []
