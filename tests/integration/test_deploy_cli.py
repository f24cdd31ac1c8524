"""`charter workflows plan` and `charter workflows deploy` against the API on a real socket:
the plan's tables and JSON, the refusal of a deploy that strands, --allow-stranding, and
--migrate deploying then moving every stranded process with a signed charter:migrate."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from charter.cli import main as cli_main
from charter.core.clock import SystemClock
from charter.core.ed25519 import write_secret_key_file
from charter.core.envelope import sign
from charter.db.database import Database
from charter.engine.reads import Reads
from charter.sdk import Client
from tests.integration.apikit import Harness, make_harness, new_id
from tests.integration.liveserver import live_server
from tests.integration.test_migrate_cli import V1, V2


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database, clock=SystemClock())  # the CLI signs with real time
    harness.actor("olga", "ops")
    yield harness
    harness.http.close()


@pytest.fixture
def url(h: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with live_server(h.http.app) as served:
        monkeypatch.setenv("CHARTER_API_URL", served)
        monkeypatch.setenv("CHARTER_TOKEN", h.admin)
        monkeypatch.setenv("COLUMNS", "200")
        yield served


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Result]:
    def run(*args: str) -> Result:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["charter", *args])
        try:
            cli_main.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:
            code = 0
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def v2_file(tmp_path: Path) -> str:
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(V2))
    return str(path)


def _shop(h: Harness, shipped: int, ordered: int = 1) -> tuple[str, list[str], list[str]]:
    """A path at V1 with processes shipped (each with a `chase` timer) and left ordered."""
    path = f"tests/deploy-{secrets.token_hex(3)}"
    h.deploy(path, V1)
    clerk = h.keys["clerk"]
    made: tuple[list[str], list[str]] = ([], [])
    for index in range(shipped + ordered):
        pid = new_id("order")
        head = h.accept(sign(h.envelope(clerk, pid, "order", workflow=path), clerk))["hash"]
        if index < shipped:
            h.accept(sign(h.envelope(clerk, pid, "ship", prev=str(head), workflow=path), clerk))
        made[0 if index < shipped else 1].append(pid)
    return path, sorted(made[0]), made[1]


def _revisions(h: Harness, path: str) -> int:
    return len(Client(str(h.http.base_url), h.admin, http=h.http).workflow(path).revisions)


@pytest.mark.usefixtures("url")
def test_plan_prints_what_a_deploy_would_strand_and_exits_1(
    h: Harness, cli: Callable[..., Result], v2_file: str
) -> None:
    path, shipped, _ = _shop(h, shipped=2)
    done = cli("workflows", "plan", path, v2_file)
    assert done.code == 1, done.err
    assert "2 stranded, 2 orphaned work, 2 diverging" in done.out
    assert all(pid in done.out for pid in shipped)
    assert "its state is not in the new definition" in done.out
    assert "the new definition has no such action" in done.out
    as_json = cli("workflows", "plan", path, v2_file, "--json")
    answer = json.loads(as_json.out)
    assert answer["counts"] == {"stranded": 2, "orphaned_work": 2, "diverging": 2}
    assert [s["process"] for s in answer["stranded"]] == shipped
    assert {o["schedule_id"] for o in answer["orphaned_work"]} == {"chase"}
    assert _revisions(h, path) == 1
    # Against itself, nothing is stranded: exit 0.
    v1_file = Path(v2_file).with_name("v1.json")
    v1_file.write_text(json.dumps(V1))
    assert cli("workflows", "plan", path, str(v1_file)).code == 0


@pytest.mark.usefixtures("url")
def test_deploy_refuses_to_strand_unless_allowed(
    h: Harness, cli: Callable[..., Result], v2_file: str
) -> None:
    path, _, _ = _shop(h, shipped=1)
    refused = cli("workflows", "deploy", path, v2_file)
    assert refused.code != 0
    assert "would leave 1 stranded, 1 orphaned work" in refused.err
    assert "1 stranded, 1 orphaned work" in refused.out
    assert _revisions(h, path) == 1
    allowed = cli("workflows", "deploy", path, v2_file, "--allow-stranding", "--json")
    assert allowed.code == 0, allowed.err
    assert json.loads(allowed.out)["allow_stranding"] is True
    assert _revisions(h, path) == 2


@pytest.mark.usefixtures("url")
def test_deploy_with_migrate_moves_every_stranded_process(
    h: Harness, cli: Callable[..., Result], v2_file: str, tmp_path: Path
) -> None:
    path, shipped, ordered = _shop(h, shipped=3)
    key = tmp_path / "ops.key"
    write_secret_key_file(key, h.keys["olga"])
    missing = cli("workflows", "deploy", path, v2_file, "--migrate", "shipped=delivered")
    assert missing.code == 2
    assert "--key-file and --reason" in missing.err
    done = cli("workflows", "deploy", path, v2_file, "--migrate", "shipped=delivered",
               "--key-file", str(key), "--reason", "OPS-77")  # fmt: skip
    assert done.code == 0, done.err
    assert "deployed" in done.out
    assert "3 migrated, 0 skipped, 0 failed" in done.out
    reads = Reads(h.database)
    assert [reads.process(pid).state for pid in shipped] == ["delivered"] * 3
    assert reads.process(ordered[0]).state == "ordered"
    latest = Client(str(h.http.base_url), h.admin, http=h.http).workflow(path)
    assert latest.deployment.migration_map == {"shipped": "delivered"}
    # The chase timers are cancelled by the migrations: nothing is left orphaned.
    after = cli("workflows", "plan", path, v2_file, "--json")
    assert json.loads(after.out)["counts"] == {"stranded": 0, "orphaned_work": 0, "diverging": 3}
    assert after.code == 0
    last = reads.events(shipped[0])[-1]
    assert last.envelope["action"] == "charter:migrate"
    assert last.envelope["input"] == {"state": "delivered", "reason": "OPS-77", "cancel": ["chase"]}


def test_the_worked_example_of_docs_lifecycle_is_what_these_tests_run() -> None:
    text = (Path(__file__).parents[2] / "docs" / "lifecycle.md").read_text()
    blocks = [block.split("```", 1)[0] for block in text.split("```json\n")[1:]]
    assert [json.loads(block) for block in blocks] == [V1, V2]
