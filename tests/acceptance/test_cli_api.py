"""The API and its CLI as a user meets them: `charter up`, then tokens, actors, workflows,
submit, show and history as separate processes over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.acceptance.processes import (
    charter_env,
    free_port,
    run_charter,
    start_charter,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parents[2]
ONBOARDING = "customer/retail/retail-customer"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Server:
    url: str
    env: dict[str, str]  # for CLI commands: database, API URL, home
    home: Path


@pytest.fixture
def server(empty_database_url: str) -> Iterator[Server]:
    home = Path(f"/tmp/charter-api-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = charter_env(
        CHARTER_DATABASE_URL=empty_database_url, CHARTER_HOME=str(home), CHARTER_API_URL=url
    )
    process = start_charter("up", "--port", str(port), env=env)
    try:
        wait_healthy(url, process)
        yield Server(url, env, home)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        shutil.rmtree(home, ignore_errors=True)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_user_session_from_token_to_history(server: Server, tmp_path: Path) -> None:
    token = _ok(run_charter("tokens", "create", "--scope", "*", "--name", "e2e", env=server.env))
    env = {**server.env, "CHARTER_TOKEN": token.strip()}
    public_key = _ok(run_charter("keys", "new", "--out", str(tmp_path / "ada.key"), env=env))

    added = run_charter(
        "actors", "add", "ada", "--key-file", str(tmp_path / "ada.key"), "--role", "customer",
        env=env,
    )  # fmt: skip
    assert _ok(added).strip() == "added ada (customer)"
    actors = json.loads(_ok(run_charter("actors", "list", "--json", env=env)))["actors"]
    assert {"id": "ada", "public_key": public_key.strip()}.items() <= next(
        a for a in actors if a["id"] == "ada"
    ).items()

    example = str(ROOT / "examples" / "onboarding.json")
    assert "revision 1" in _ok(run_charter("workflows", "deploy", ONBOARDING, example, env=env))
    assert ONBOARDING in _ok(run_charter("workflows", "list", env=env))
    shown = json.loads(_ok(run_charter("workflows", "show", ONBOARDING, "--json", env=env)))
    assert shown["definition"] == json.loads(Path(example).read_text())

    common = ["--key-file", str(tmp_path / "ada.key"), "--process", "customer-1"]
    opened = run_charter(
        "submit", *common, "--workflow", ONBOARDING, "--action", "open",
        "--input", '{"name": "Ada"}', env=env,
    )  # fmt: skip
    assert "seq 1" in _ok(opened)
    submitted = run_charter(
        "submit", *common, "--workflow", ONBOARDING, "--action", "submit_onboarding", env=env
    )
    assert "seq 2" in _ok(submitted)

    process = json.loads(_ok(run_charter("show", "customer-1", "--json", env=env)))
    assert process["data"]["name"] == "Ada"
    # The worker in `charter up` may already have fired the automatic screening.
    assert process["state"] in ("ready_for_screening", "screening_started")
    assert "customer-1" in _ok(run_charter("show", "customer-1", env=env))

    events = json.loads(_ok(run_charter("history", "customer-1", "--json", env=env)))["events"]
    assert [e["envelope"]["action"] for e in events[:2]] == ["open", "submit_onboarding"]
    table = _ok(run_charter("history", "customer-1", env={**env, "COLUMNS": "200"}))
    assert "submit_onboarding" in table
    assert events[1]["hash"][:12] in table


def test_errors_are_one_line_and_bodies_over_2_mib_are_413(server: Server) -> None:
    no_token = run_charter("show", "customer-1", env=server.env)
    assert no_token.returncode == 1
    (line,) = no_token.stderr.strip().splitlines()
    assert line.startswith(
        "error: this request needs a bearer token (Authorization: Bearer ...); set CHARTER_TOKEN"
    )

    oversized = b"{" + b" " * (2 * MIB) + b"}"
    declared = httpx.post(f"{server.url}/v1/events", content=oversized, timeout=30)
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "too_large"

    def chunks() -> Iterator[bytes]:
        for _ in range(32):
            yield b" " * (MIB // 16)
        yield b"!"

    streamed = httpx.post(f"{server.url}/v1/events", content=chunks(), timeout=30)
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413
    assert streamed.json()["error"]["code"] == "too_large"

    metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    assert 'charter_events_rejected_total{code="too_large"} 2.0' in metrics


SHOP = "tests/shop"
SHOP_V1 = {
    "dsl": 2,
    "states": ["ordered", "shipped"],
    "roles": ["clerk"],
    "actions": {
        "order": {"type": "create", "role": "clerk", "to": "ordered"},
        "ship": {"role": "clerk", "from": "ordered", "to": "shipped"},
    },
}
SHOP_V2 = {
    "dsl": 2,
    "states": ["ordered", "delivered"],
    "roles": ["clerk", "ops"],
    "migration": {"role": "ops"},
    "actions": {
        "order": {"type": "create", "role": "clerk", "to": "ordered"},
        "deliver": {"role": "clerk", "from": "ordered", "to": "delivered"},
    },
}


def test_an_operator_migrates_processes_a_new_revision_left_behind(
    server: Server, tmp_path: Path
) -> None:
    token = _ok(run_charter("tokens", "create", "--scope", "*", "--name", "ops", env=server.env))
    env = {**server.env, "CHARTER_TOKEN": token.strip(), "COLUMNS": "200"}
    for who, role in (("cleo", "clerk"), ("olga", "ops")):
        key = str(tmp_path / f"{who}.key")
        _ok(run_charter("keys", "new", "--out", key, env=env))
        _ok(run_charter("actors", "add", who, "--key-file", key, "--role", role, env=env))
    for version, definition in (("v1", SHOP_V1), ("v2", SHOP_V2)):
        (tmp_path / f"{version}.json").write_text(json.dumps(definition))
    _ok(run_charter("workflows", "deploy", SHOP, str(tmp_path / "v1.json"), env=env))
    clerk = ["--key-file", str(tmp_path / "cleo.key"), "--workflow", SHOP]
    for pid in ("order-1", "order-2"):
        _ok(run_charter("submit", *clerk, "--process", pid, "--action", "order", env=env))
        _ok(run_charter("submit", *clerk, "--process", pid, "--action", "ship", env=env))
    v2 = ["workflows", "deploy", SHOP, str(tmp_path / "v2.json")]
    refused = run_charter(*v2, env=env)  # it would strand the two shipped orders
    assert refused.returncode == 1
    assert "would leave 2 stranded" in refused.stderr
    _ok(run_charter(*v2, "--allow-stranding", env=env))

    migrate = ["workflows", "migrate", SHOP, "--map", "shipped=delivered", "--reason", "OPS-77"]
    plan = _ok(run_charter(*migrate, "--dry-run", env=env))
    assert "dry run: 2 process(es) would move; nothing was changed" in plan
    shown = json.loads(_ok(run_charter("show", "order-1", "--json", env=env)))
    assert shown["state"] == "shipped"

    done = _ok(run_charter(*migrate, "--key-file", str(tmp_path / "olga.key"), env=env))
    assert "2 migrated, 0 skipped, 0 failed" in done
    for pid in ("order-1", "order-2"):
        assert json.loads(_ok(run_charter("show", pid, "--json", env=env)))["state"] == "delivered"
    history = _ok(run_charter("history", "order-1", env=env))
    assert "charter:migrate" in history
    assert "migration OPS-77" in history
    assert "ok (3 events verified)" in _ok(run_charter("verify", "order-1", "--replay", env=env))
    bundle = tmp_path / "order-1.json"
    bundle.write_text(_ok(run_charter("export", "order-1", env=env)))
    offline = {**env, "CHARTER_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none"}
    assert "ok (3 events verified)" in _ok(
        run_charter("verify", "--bundle", str(bundle), env=offline)
    )
