"""`charter workflows migrate` against the API on a real socket: the dry run, the
migration of every process in the mapped states, and what a concurrent event does to it
(re-signed on the new head, skipped once moved elsewhere, failed after its retries).
Then `charter workflows plan` and `deploy`: the plan's tables and JSON, the refusal of a
deploy that strands, --allow-stranding, and --migrate deploying then migrating."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from charter.cli import remote
from charter.core.clock import SystemClock
from charter.core.ed25519 import write_secret_key_file
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.engine.reads import Reads
from charter.sdk import Client
from tests.integration.apikit import Harness, make_harness, new_id
from tests.integration.clikit import Result, run_charter
from tests.integration.liveserver import live_server

V1: JsonObject = {
    "dsl": 2,
    "states": ["ordered", "shipped", "closed"],
    "roles": ["clerk", "ops", "AUTOMATION"],
    "actions": {
        "order": {"type": "create", "role": "clerk", "to": "ordered"},
        "ship": {
            "role": "clerk",
            "from": "ordered",
            "to": "shipped",
            "schedule": [{"id": "chase", "action": "chase", "in": "2d", "data": {}}],
        },
        "chase": {"type": "update", "role": "AUTOMATION", "from": "shipped"},
        "note": {"type": "update", "role": "clerk", "from": "*"},
        "close": {"role": "clerk", "from": "*", "to": "closed"},
    },
}
V2: JsonObject = {
    "dsl": 2,
    "states": ["ordered", "delivered", "closed"],
    "roles": ["clerk", "ops"],
    "migration": {"role": "ops"},
    "actions": {
        "order": {"type": "create", "role": "clerk", "to": "ordered"},
        "deliver": {"role": "clerk", "from": "ordered", "to": "delivered"},
        "note": {"type": "update", "role": "clerk", "from": "*"},
        "close": {"role": "clerk", "from": "*", "to": "closed"},
    },
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    # The CLI signs with the real time, so the engine runs on the real clock here.
    harness = make_harness(database, clock=SystemClock())
    harness.actor("olga", "ops")
    yield harness
    harness.http.close()


@pytest.fixture
def url(h: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app served on a socket, which the CLI finds through CHARTER_API_URL."""
    with live_server(h.http.app) as served:
        monkeypatch.setenv("CHARTER_API_URL", served)
        monkeypatch.setenv("CHARTER_TOKEN", h.admin)
        monkeypatch.setenv("COLUMNS", "200")
        yield served


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Result]:
    return lambda *args: run_charter(monkeypatch, capsys, *args)


@pytest.fixture
def ops_key(h: Harness, tmp_path: Path) -> Path:
    path = tmp_path / "ops.key"
    write_secret_key_file(path, h.keys["olga"])
    return path


def _shop(
    h: Harness, *, shipped: int, ordered: int = 0, then_v2: bool = True
) -> tuple[str, list[str], list[str]]:
    """A path deployed at v1 with processes shipped (each with a `chase` timer) and left
    ordered, then (unless not `then_v2`) redeployed at v2: (path, shipped ids, ordered ids)."""
    path = f"tests/shop-{secrets.token_hex(3)}"
    h.deploy(path, V1)
    clerk = h.keys["clerk"]
    made: list[list[str]] = [[], []]
    for index in range(shipped + ordered):
        pid = new_id("order")
        head = h.accept(sign(h.envelope(clerk, pid, "order", workflow=path), clerk))["hash"]
        if index < shipped:
            h.accept(sign(h.envelope(clerk, pid, "ship", prev=str(head), workflow=path), clerk))
        made[0 if index < shipped else 1].append(pid)
    if then_v2:
        h.deploy(path, V2)
    return path, sorted(made[0]), made[1]


def _states(h: Harness, ids: list[str]) -> list[str]:
    return [Reads(h.database).process(pid).state for pid in ids]


@pytest.mark.usefixtures("url")
def test_a_dry_run_changes_nothing_then_the_migration_moves_every_process(
    h: Harness, cli: Callable[..., Result], ops_key: Path
) -> None:
    path, shipped, ordered = _shop(h, shipped=3, ordered=1)
    before = h.governed_state()
    plan = cli("workflows", "migrate", path, "--map", "shipped=delivered", "--reason", "OPS-9",
               "--dry-run")  # fmt: skip
    assert plan.code == 0, plan.err
    assert h.governed_state() == before
    assert "dry run: 3 process(es) would move; nothing was changed" in plan.out
    rows = [line for line in plan.out.splitlines() if "order-" in line]
    cells = [[cell.strip() for cell in row.split("│")[1:4]] for row in rows]
    assert cells == [[pid, "shipped", "delivered"] for pid in shipped]
    as_json = cli("workflows", "migrate", path, "--map", "shipped=delivered", "--reason",
                  "OPS-9", "--dry-run", "--json")  # fmt: skip
    assert json.loads(as_json.out)["moves"] == [
        {"process": pid, "from": "shipped", "to": "delivered"} for pid in shipped
    ]

    done = cli("workflows", "migrate", path, "--map", "shipped=delivered", "--reason", "OPS-9",
               "--key-file", str(ops_key))  # fmt: skip
    assert done.code == 0, done.err
    assert "3 migrated, 0 skipped, 0 failed" in done.out
    assert _states(h, shipped) == ["delivered"] * 3
    assert _states(h, ordered) == ["ordered"]  # not a state the map names
    [event] = [e for e in Reads(h.database).events(shipped[0]) if e.seq == 3]
    assert event.envelope["action"] == "charter:migrate"
    assert event.envelope["input"] == {"state": "delivered", "reason": "OPS-9"}
    scheduled = h.client().process_automation(shipped[0]).scheduled
    assert [(r["schedule_id"], r["status"]) for r in scheduled] == [("chase", "cancelled")]

    # The migration shows in the history with its reason.
    history = cli("history", shipped[0])
    assert "charter:migrate" in history.out
    assert "migration OPS-9" in history.out
    again = cli("workflows", "migrate", path, "--map", "shipped=delivered", "--reason", "OPS-9",
                "--key-file", str(ops_key), "--json")  # fmt: skip
    assert json.loads(again.out) == {"migrated": 0, "skipped": 0, "failed": 0, "results": []}


@pytest.mark.usefixtures("url")
def test_what_the_command_refuses_before_it_signs_anything(
    h: Harness, cli: Callable[..., Result], ops_key: Path
) -> None:
    path, _, _ = _shop(h, shipped=1)
    key = ["--key-file", str(ops_key)]
    cases = [
        (["--map", "shipped=gone", "--reason", "OPS-1", *key], "has no state 'gone'"),
        (["--map", "shipped", "--reason", "OPS-1", *key], "expected OLD=NEW"),
        (["--map", "a=b", "--map", "a=c", "--reason", "OPS-1", *key], "names 'a' twice"),
        (["--map", "shipped=delivered", "--reason", "two words", *key], "a ticket reference"),
        (["--map", "shipped=delivered", "--reason", "OPS-1"], "--key-file is needed"),
    ]
    before = h.governed_state()
    for args, says in cases:
        refused = cli("workflows", "migrate", path, *args)
        assert refused.code != 0, args
        assert says in refused.err, (args, refused.err)
    h.deploy(f"{path}-plain", V1)
    plain = cli("workflows", "migrate", f"{path}-plain", "--map", "shipped=closed", "--reason",
                "OPS-1", *key)  # fmt: skip
    assert "has no `migration` block" in plain.err
    assert h.governed_state() == before


def _racing_client(h: Harness, url: str, race: Callable[[str], None]) -> Callable[[], Client]:
    """A client for the CLI that calls `race(process id)` just before each event it sends:
    the event another writer commits then is a real concurrent one."""

    def before_send(request: httpx.Request) -> None:
        if request.method == "POST" and request.url.path == "/v1/events":
            race(json.loads(request.content)["envelope"]["process"])

    def client() -> Client:
        http = httpx.Client(base_url=url, event_hooks={"request": [before_send], "response": []})
        return _Closing(url, h.admin, http=http)

    return client


class _Closing(Client):
    """A client that closes the httpx client it was handed."""

    def close(self) -> None:
        self._http.close()


def test_a_concurrent_event_is_signed_over_skipped_or_given_up_on(
    h: Harness,
    cli: Callable[..., Result],
    ops_key: Path,
    url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, (noted, closed, busy), _ = _shop(h, shipped=3)
    clerk = h.keys["clerk"]
    raced: dict[str, int] = {}

    def race(pid: str) -> None:
        # `noted` gets one note (same state: re-signed); `closed` is closed (skipped);
        # `busy` gets a note before every send (given up on after the retries).
        if (pid == noted and raced.get(pid)) or (pid == closed and raced.get(pid)):
            return
        raced[pid] = raced.get(pid, 0) + 1
        head = Reads(h.database).process(pid).head
        action = "close" if pid == closed else "note"
        h.accept(sign(h.envelope(clerk, pid, action, prev=head, workflow=path), clerk))

    monkeypatch.setattr(remote, "client", _racing_client(h, url, race))
    result = cli("workflows", "migrate", path, "--map", "shipped=delivered", "--reason", "OPS-3",
                 "--key-file", str(ops_key), "--retries", "2", "--json")  # fmt: skip
    assert result.code == 1, result.err  # one failed
    answer = json.loads(result.out)
    by_process = {r["process"]: r for r in answer["results"]}
    assert by_process[noted]["result"] == "migrated"
    assert by_process[noted]["seq"] == 4  # order, ship, the racing note, the migration
    assert by_process[closed] | {"detail": ""} == {
        "process": closed, "from": "shipped", "to": "delivered", "result": "skipped",
        "code": "stale_prev", "detail": "", "seq": None,
    }  # fmt: skip
    assert "moved it to 'closed'" in by_process[closed]["detail"]
    assert (by_process[busy]["result"], by_process[busy]["code"]) == ("failed", "stale_prev")
    assert raced[busy] == 3  # the first send and two re-signs, each raced
    assert (answer["migrated"], answer["skipped"], answer["failed"]) == (1, 1, 1)
    assert _states(h, [noted, closed, busy]) == ["delivered", "closed", "shipped"]


# --- charter workflows plan and deploy -----------------------------------------------------


@pytest.fixture
def v2_file(tmp_path: Path) -> str:
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(V2))
    return str(path)


def _revisions(h: Harness, path: str) -> int:
    return len(Client(str(h.http.base_url), h.admin, http=h.http).workflow(path).revisions)


@pytest.mark.usefixtures("url")
def test_plan_prints_what_a_deploy_would_strand_and_exits_1(
    h: Harness, cli: Callable[..., Result], v2_file: str
) -> None:
    path, shipped, _ = _shop(h, shipped=2, ordered=1, then_v2=False)
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
    path, _, _ = _shop(h, shipped=1, ordered=1, then_v2=False)
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
    path, shipped, ordered = _shop(h, shipped=3, ordered=1, then_v2=False)
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
