"""The API commands of the CLI, in-process against the app on this module's database:
tokens, actors, workflows (and lint-history), submit (with stale-head retries), show, history."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from charter.audit.personal_lint import current_revision, personal_in_clear
from charter.cli import main as cli_main
from charter.cli import remote
from charter.core.clock import SystemClock
from charter.core.ed25519 import SecretKey, write_secret_key_file
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.engine.reads import Reads
from charter.sdk import Client
from tests.integration.apikit import (
    ERRANDS,
    ERRANDS_DEFINITION,
    Harness,
    bearer,
    make_harness,
    new_id,
)

A_KEY = SecretKey.generate().public_key_hex


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    # The CLI signs with the real time, so the engine runs on the real clock here.
    harness = make_harness(database, clock=SystemClock())
    yield harness
    harness.http.close()


@pytest.fixture
def cli(
    h: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[CliRunner]:
    monkeypatch.setenv("CHARTER_DATABASE_URL", h.database.url)
    monkeypatch.setenv("COLUMNS", "200")  # tables as wide as a terminal, not truncated
    monkeypatch.setattr(remote, "client", lambda: h.client())
    yield CliRunner(monkeypatch, capsys)
    h.http.event_hooks = {"request": [], "response": []}


@dataclass(frozen=True)
class CliRunner:
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *args: str) -> Result:
        """Run `charter ARGS` through the real entry point (one-line errors, exit codes)."""
        self.capsys.readouterr()
        self.monkeypatch.setattr(sys, "argv", ["charter", *args])
        try:
            cli_main.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:
            code = 0
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)


@pytest.fixture
def clerk_key(h: Harness, tmp_path: Path) -> Path:
    path = tmp_path / "clerk.key"
    write_secret_key_file(path, h.keys["clerk"])
    return path


def _one_error_line(result: Result) -> str:
    assert result.code == 1, result
    lines = result.err.strip().splitlines()
    assert lines[-1].startswith("error: ")
    return lines[-1]


# --- tokens ----------------------------------------------------------------------------


def test_tokens_create_prints_a_working_token_once(h: Harness, cli: CliRunner) -> None:
    made = cli(
        "tokens", "create", "--scope", "processes:read", "--name", "ci", "--principal", "bot"
    )
    assert made.code == 0, made.err
    token = made.out.strip()
    assert token.startswith("ch_")
    assert "\n" not in token
    assert h.http.get("/v1/workflows", headers=bearer(token)).status_code == 200
    assert h.http.post("/v1/workflows", content=b"{}", headers=bearer(token)).status_code == 403

    token_id = made.err.split()[2].rstrip(";")
    listed = cli("tokens", "list")
    assert listed.code == 0
    row = next(line for line in listed.out.splitlines() if " bot " in line)
    assert "processes:read" in row
    assert token_id in row
    assert token not in listed.out
    records = json.loads(cli("tokens", "list", "--json").out)["tokens"]
    assert {"id": token_id, "name": "ci", "principal": "bot"}.items() <= next(
        r for r in records if r["id"] == token_id
    ).items()
    assert cli("tokens", "revoke", token_id).code == 0
    assert h.http.get("/v1/workflows", headers=bearer(token)).status_code == 401


def test_tokens_create_refuses_an_unknown_scope(cli: CliRunner) -> None:
    result = cli("tokens", "create", "--scope", "everything")
    assert "unknown scope(s) ['everything']" in _one_error_line(result)


# --- actors ----------------------------------------------------------------------------


def test_actors_add_and_list(h: Harness, cli: CliRunner, tmp_path: Path) -> None:
    key_file = tmp_path / "dave.key"
    dave = SecretKey.generate()
    write_secret_key_file(key_file, dave)
    added = cli("actors", "add", "dave", "--key-file", str(key_file), "--role", "clerk")
    assert added.code == 0, added.err
    assert added.out.strip() == "added dave (clerk)"
    erin = SecretKey.generate().public_key_hex
    as_json = cli(
        "actors", "add", "erin", "--public-key", erin, "--role", "boss", "--role", "clerk", "--json"
    )
    assert json.loads(as_json.out)["roles"] == ["boss", "clerk"]

    table = cli("actors", "list")
    assert table.code == 0
    assert "dave" in table.out
    assert dave.public_key_hex[:16] in table.out
    listed = {a["id"]: a for a in json.loads(cli("actors", "list", "--json").out)["actors"]}
    assert listed["erin"]["public_key"] == erin


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mallory", "--public-key", A_KEY, "--role", "AUTOMATION"], "may hold AUTOMATION"),
        (["mallory", "--role", "clerk"], "exactly one of --public-key and --key-file"),
        (["mallory", "--public-key", "00" * 32, "--role", "clerk"], "invalid public key"),
    ],
)
def test_actors_add_errors_are_one_line(cli: CliRunner, args: list[str], message: str) -> None:
    assert message in _one_error_line(cli("actors", "add", *args))


# --- workflows -------------------------------------------------------------------------


def test_workflows_deploy_list_and_show(cli: CliRunner, tmp_path: Path) -> None:
    file = tmp_path / "errands.json"
    file.write_text(json.dumps(ERRANDS_DEFINITION))
    deployed = cli("workflows", "deploy", "tests/deployed-by-cli", str(file))
    assert deployed.code == 0, deployed.err
    assert deployed.out.startswith("deployed tests/deployed-by-cli revision 1 (version ")
    again = cli("workflows", "deploy", "tests/deployed-by-cli", str(file))
    assert again.code == 0, again.err
    assert again.out.startswith("unchanged: tests/deployed-by-cli revision 1 (version ")

    listed = cli("workflows", "list")
    assert "tests/deployed-by-cli" in listed.out
    paths = {w["path"] for w in json.loads(cli("workflows", "list", "--json").out)["workflows"]}
    assert {"tests/deployed-by-cli", ERRANDS} <= paths

    shown = json.loads(cli("workflows", "show", "tests/deployed-by-cli", "--json").out)
    assert shown["definition"] == ERRANDS_DEFINITION
    table = cli("workflows", "show", "tests/deployed-by-cli")
    assert table.code == 0
    assert '"approve"' in table.out
    assert "revisions" in table.out


def test_deploying_an_invalid_workflow_lists_the_problems(cli: CliRunner, tmp_path: Path) -> None:
    file = tmp_path / "broken.json"
    file.write_text(json.dumps({"dsl": 2, "states": ["a"], "roles": [], "actions": {}}))
    result = cli("workflows", "deploy", "tests/broken", str(file))
    line = _one_error_line(result)
    assert "problem(s)" in line
    assert "workflow problems" in result.err


def test_showing_an_unknown_workflow_is_one_line(cli: CliRunner) -> None:
    line = _one_error_line(cli("workflows", "show", "tests/none"))
    assert line == "error: no workflow is deployed at 'tests/none'"


# --- submit, show, history -------------------------------------------------------------


def test_submit_then_show_and_history(h: Harness, cli: CliRunner, clerk_key: Path) -> None:
    created = cli(
        "submit", "--key-file", str(clerk_key), "--process", "cli-1", "--workflow", ERRANDS,
        "--action", "create", "--input", '{"amount": 42}',
    )  # fmt: skip
    assert created.code == 0, created.err
    assert created.out.startswith("accepted cli-1 seq 1 hash ")
    assert created.out.strip().endswith("state open")
    note = clerk_key.parent / "note.json"
    note.write_text('{"text": "from a file"}')
    noted = cli(
        "submit", "--key-file", str(clerk_key), "--process", "cli-1", "--workflow", ERRANDS,
        "--action", "note", "--input", f"@{note}", "--json",
    )  # fmt: skip
    assert noted.code == 0, noted.err
    answer = json.loads(noted.out)
    assert answer["seq"] == 2
    assert answer["process"]["data"] == {"amount": 42}

    shown = cli("show", "cli-1")
    assert shown.code == 0
    assert "process cli-1" in shown.out
    assert "open" in shown.out
    assert '"amount": 42' in shown.out
    process = json.loads(cli("show", "cli-1", "--json").out)
    assert process["head"] == answer["hash"]
    assert process["children"] == []

    history = cli("history", "cli-1")
    assert history.code == 0
    lines = [line for line in history.out.splitlines() if "clerk" in line]
    assert len(lines) == 2
    assert "create" in lines[0]
    assert "note" in lines[1]
    assert answer["hash"][:12] in lines[1]
    assert answer["hash"] not in history.out  # shortened in the table
    events = json.loads(cli("history", "cli-1", "--json").out)["events"]
    assert [e["envelope"]["action"] for e in events] == ["create", "note"]
    assert events[1]["hash"] == answer["hash"]


def _race_each_submission(h: Harness, process_id: str, *, times: int) -> list[int]:
    """Just before the CLI's event is sent, another writer extends the chain (up to
    `times`): the event is stale, and the refusal names the new head."""
    raced: list[int] = []
    clerk = h.keys["clerk"]

    def extend(request: httpx.Request) -> None:
        if request.method != "POST" or request.url.path != "/v1/events":
            return
        if len(raced) >= times:
            return
        head = Reads(h.database).process(process_id).head
        envelope = h.envelope(clerk, process_id, "note", {"racer": len(raced)}, prev=head)
        h.engine.process_event(sign(envelope, clerk))
        raced.append(1)

    h.http.event_hooks = {"request": [extend], "response": []}
    return raced


def test_submit_resigns_on_the_head_a_stale_prev_names(
    h: Harness, cli: CliRunner, clerk_key: Path
) -> None:
    process_id, _ = h.open_process()
    raced = _race_each_submission(h, process_id, times=2)
    result = cli(
        "submit", "--key-file", str(clerk_key), "--process", process_id, "--workflow", ERRANDS,
        "--action", "note", "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert len(raced) == 2
    assert result.err.count("stale head; re-signed on the new head") == 2
    assert json.loads(result.out)["seq"] == 4  # create, two racers, ours


def test_submit_gives_up_after_its_retries(h: Harness, cli: CliRunner, clerk_key: Path) -> None:
    process_id, _ = h.open_process()
    _race_each_submission(h, process_id, times=10)
    result = cli(
        "submit", "--key-file", str(clerk_key), "--process", process_id, "--workflow", ERRANDS,
        "--action", "note", "--retries", "1",
    )  # fmt: skip
    assert "re-read the head and sign again" in _one_error_line(result)
    assert result.err.count("stale head") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--action", "approve"], "needs one of the roles ['boss']"),
        (["--action", "create", "--input", "[1]"], "--input must be a JSON object"),
        (["--action", "create", "--input", '{"a": NaN}'], "NaN is not a JSON number"),
        (["--action", "create", "--input", "@/no/such/file"], "cannot read the input file"),
    ],
)
def test_submit_errors_are_one_line(
    h: Harness, cli: CliRunner, clerk_key: Path, args: list[str], message: str
) -> None:
    process_id, _ = h.open_process()
    result = cli(
        "submit", "--key-file", str(clerk_key), "--process", process_id, "--workflow", ERRANDS,
        *args,
    )  # fmt: skip
    assert message in _one_error_line(result)


def test_show_and_history_of_an_unknown_process(cli: CliRunner) -> None:
    assert _one_error_line(cli("show", "nope")) == "error: no process 'nope'"
    assert _one_error_line(cli("history", "nope")) == "error: no process 'nope'"


def test_an_unreachable_api_is_one_line(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "client", lambda: Client("http://127.0.0.1:1", "t"))
    line = _one_error_line(cli("actors", "list"))
    assert line.startswith("error: cannot reach the Charter API at http://127.0.0.1:1")


def test_a_call_without_a_token_says_to_set_charter_token_and_where_up_wrote_one(
    h: Harness, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CHARTER_TOKEN", raising=False)
    monkeypatch.setattr(remote, "client", lambda: Client(str(h.http.base_url), None, http=h.http))
    token_file = tmp_path / "home" / "admin-token"
    line = _one_error_line(cli("show", "cli-1"))
    assert line.startswith("error: this request needs a bearer token")
    assert "set CHARTER_TOKEN" in line
    assert f'export CHARTER_TOKEN="$(cat {token_file})"' in line
    assert "charter tokens create" in line
    error = json.loads(cli("show", "cli-1", "--json").err)["error"]
    assert error["code"] == "unauthorized"
    assert str(token_file) in error["hint"]


def test_a_token_the_api_does_not_know_names_charter_token_and_the_api(
    h: Harness, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CHARTER_TOKEN", "not-a-token")
    monkeypatch.setattr(
        remote, "client", lambda: Client(str(h.http.base_url), "not-a-token", http=h.http)
    )
    line = _one_error_line(cli("show", "cli-1"))
    assert line.startswith("error: the bearer token is not known; CHARTER_TOKEN holds a token")
    assert str(tmp_path / "home" / "admin-token") in line


PEOPLE = "tests/cli-people"
PEOPLE_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk", "dpo"],
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "input": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "x-personal": True},
                    "dob": {"type": "string", "x-personal": True},
                    "country": {"type": "string"},
                },
            },
            "mutate": {"$set": {"name": "{{ input.name }}", "country": "{{ input.country }}"}},
        },
        "note": {"type": "update", "role": "clerk", "from": "*"},
    },
}


def test_submit_sends_personal_fields_as_disclosures(
    h: Harness, cli: CliRunner, clerk_key: Path
) -> None:
    h.deploy(PEOPLE, PEOPLE_DEFINITION)
    assert "disclosures" in cli("submit", "--help").out
    ada = '{"name": "Ada Lovelace", "dob": "1815-12-10", "country": "GB"}'
    created = cli(
        "submit", "--key-file", str(clerk_key), "--process", "cli-ada", "--workflow", PEOPLE,
        "--action", "open", "--input", ada, "--json",
    )  # fmt: skip
    assert created.code == 0, created.err
    assert json.loads(created.out)["process"]["data"] == {"name": "Ada Lovelace", "country": "GB"}
    noted = cli("submit", "--key-file", str(clerk_key), "--process", "cli-ada",
                "--action", "note")  # fmt: skip
    assert noted.code == 0, noted.err
    reader = h.token("processes:read", "personal:read")
    events = h.http.get(
        "/v1/processes/cli-ada/events", params={"disclosures": "true"}, headers=bearer(reader)
    ).json()["items"]
    opened, note = events[0], events[1]
    assert opened["envelope"]["v"] == 2
    assert opened["envelope"]["input"] == {"country": "GB"}
    assert sorted(opened["envelope"]["sd"]) == ["/dob", "/name"]
    assert "Ada" not in json.dumps(opened["envelope"])
    assert sorted(opened["disclosures"]) == ["/dob", "/name"]
    assert '"Ada Lovelace"' in opened["disclosures"]["/name"]
    assert (note["envelope"]["v"], note["disclosures"]) == (1, {})


def test_erase_signs_a_charter_erase_and_the_values_are_gone(
    h: Harness, cli: CliRunner, clerk_key: Path
) -> None:
    h.deploy(PEOPLE, PEOPLE_DEFINITION)
    ada = '{"name": "Ada Lovelace", "dob": "1815-12-10", "country": "GB"}'
    created = cli("submit", "--key-file", str(clerk_key), "--process", "cli-erase",
                  "--workflow", PEOPLE, "--action", "open", "--input", ada)  # fmt: skip
    assert created.code == 0, created.err
    dpo_key = clerk_key.parent / "dpo.key"
    write_secret_key_file(dpo_key, h.keys.get("dpo") or h.actor("dpo", "dpo"))
    assert "--withhold-personal" in cli("export", "--help").out
    assert "Art. 17" in cli("erase", "--help").out
    base = ["erase", "cli-erase", "--basis", "art17-1a", "--key-file", str(dpo_key)]
    spaced = cli(*base, "--request", "Ada asked by phone")
    assert "ticket reference" in _one_error_line(spaced)
    bad = cli(*base, "--request", "DSR-1", "--pointer", "name")
    assert "a JSON pointer such as /name" in _one_error_line(bad)
    refused = cli("erase", "cli-erase", "--basis", "art17-1a", "--request", "DSR-1",
                  "--key-file", str(clerk_key))  # fmt: skip
    assert "forbidden_role" in refused.err or "needs one of the roles" in refused.err
    erased = cli(*base, "--request", "DSR-2026-0042", "--pointer", "/name", "--json")
    assert erased.code == 0, erased.err
    answer = json.loads(erased.out)
    assert answer["process"]["data"] == {"name": {"erased": True}, "country": "GB"}
    events = h.http.get("/v1/processes/cli-erase/events", headers=bearer(h.admin)).json()
    erase_event = events["items"][-1]["envelope"]
    assert erase_event["action"] == "charter:erase"
    assert erase_event["input"] == {
        "basis": "art17-1a",
        "request": "DSR-2026-0042",
        "scope": {"events": "all", "pointers": ["/name"]},
    }
    rest = cli(*base, "--request", "DSR-2026-0042")
    assert rest.code == 0, rest.err
    assert rest.out.startswith("erased: cli-erase seq 3 hash ")
    again = cli(*base, "--request", "DSR-2026-0042")
    assert "nothing to erase" in _one_error_line(again)
    verified = cli("verify", "cli-erase", "--replay")
    assert verified.code == 0, verified.out
    assert "personal values: 2 erased, 0 withheld" in verified.out
    withheld = cli("export", "cli-erase", "--withhold-personal")
    assert withheld.code == 0, withheld.err
    assert json.loads(withheld.out)["disclosures_withheld"] is True
    assert "Lovelace" not in withheld.out


def test_hold_and_release_sign_their_events_and_a_hold_stops_an_erasure(
    h: Harness, cli: CliRunner, clerk_key: Path
) -> None:
    held: JsonObject = {**PEOPLE_DEFINITION, "roles": ["clerk", "dpo", "legal"],
            "retention": {"after": "1y", "states": ["open"], "hold_role": "legal"}}  # fmt: skip
    h.deploy(f"{PEOPLE}-held", held)
    ada = '{"name": "Ada Lovelace", "country": "GB"}'
    created = cli("submit", "--key-file", str(clerk_key), "--process", "cli-held",
                  "--workflow", f"{PEOPLE}-held", "--action", "open", "--input", ada)  # fmt: skip
    assert created.code == 0, created.err
    legal_key, dpo_key = clerk_key.parent / "legal.key", clerk_key.parent / "dpo.key"
    write_secret_key_file(legal_key, h.keys.get("legal") or h.actor("legal", "legal"))
    write_secret_key_file(dpo_key, h.keys.get("dpo") or h.actor("dpo", "dpo"))
    spaced = cli("hold", "cli-held", "--reason", "court order", "--key-file", str(legal_key))
    assert "ticket reference" in _one_error_line(spaced)
    holding = cli("hold", "cli-held", "--reason", "LEGAL-2026-17", "--key-file", str(legal_key))
    assert holding.code == 0, holding.err
    assert holding.out.startswith("held: cli-held seq 2 hash ")
    erase = ["erase", "cli-held", "--basis", "art17-1a", "--request", "DSR-9",
             "--key-file", str(dpo_key)]  # fmt: skip
    assert "legal hold" in _one_error_line(cli(*erase))
    released = cli("release", "cli-held", "--reason", "LEGAL-2026-17", "--key-file",
                   str(legal_key), "--json")  # fmt: skip
    assert released.code == 0, released.err
    assert json.loads(released.out)["seq"] == 3
    assert cli(*erase).code == 0


def test_submit_on_an_existing_process_needs_no_workflow(
    h: Harness, cli: CliRunner, clerk_key: Path
) -> None:
    process_id, _ = h.open_process()
    noted = cli("submit", "--key-file", str(clerk_key), "--process", process_id,
                "--action", "note", "--json")  # fmt: skip
    assert noted.code == 0, noted.err
    assert json.loads(noted.out)["seq"] == 2
    fresh = cli("submit", "--key-file", str(clerk_key), "--process", "cli-new",
                "--action", "create")  # fmt: skip
    assert "process 'cli-new' does not exist yet: name the workflow" in _one_error_line(fresh)


def _unmarked(definition: JsonObject) -> JsonObject:
    """`definition` before its fields were marked personal (and so without `erasure`)."""
    plain: dict[str, Any] = copy.deepcopy(definition)
    plain.pop("erasure")
    for action in plain["actions"].values():
        for schema in action.get("input", {}).get("properties", {}).values():
            schema.pop("x-personal", None)
    return plain


def test_lint_history_lists_the_events_that_hold_a_personal_value_in_clear(
    h: Harness, cli: CliRunner, clerk_key: Path
) -> None:
    path, clerk = f"{PEOPLE}-{new_id('lint')}", h.keys["clerk"]
    h.deploy(path, _unmarked(PEOPLE_DEFINITION))
    early = new_id("early")
    ada: JsonObject = {"name": "Ada Lovelace", "country": "GB"}
    opened = h.accept(sign(h.envelope(clerk, early, "open", ada, workflow=path), clerk))
    noted = h.accept(sign(h.envelope(clerk, early, "note", {}, prev=str(opened["hash"]),
                                     workflow=path), clerk))  # fmt: skip
    # Nothing is marked yet: nothing to report.
    clean = cli("workflows", "lint-history", path)
    assert clean.code == 0, clean.err
    assert clean.out.strip() == f"no personal value in clear at {path} (revision 1)"
    h.deploy(path, PEOPLE_DEFINITION)
    # Signed as v2 now (the SDK learns the marks): nothing of it is in clear.
    late = cli("submit", "--key-file", str(clerk_key), "--process", new_id("late"),
               "--workflow", path, "--action", "open", "--input", json.dumps(ada))  # fmt: skip
    assert late.code == 0, late.err
    assert "--json" in cli("workflows", "lint-history", "--help").out
    listed = cli("workflows", "lint-history", path, "--json")
    assert listed.code == 1, listed.err
    report = json.loads(listed.out)
    assert (report["path"], report["revision"]) == (path, 2)
    assert report["in_clear"] == [
        {"process": early, "seq": 1, "action": "open", "pointer": "/name",
         "hash": opened["hash"]},
    ]  # fmt: skip
    table = cli("workflows", "lint-history", path)
    assert table.code == 1
    assert early in table.out
    assert str(opened["hash"]) in table.out
    assert "/name" in table.out
    assert "cannot be erased" in table.out
    assert str(noted["hash"]) not in table.out
    for value in ("Ada", "Lovelace"):
        assert value not in table.out + listed.out, value
    # Read a page of one event at a time, the history gives the same answer.
    revision = current_revision(h.database, path)
    paged = [item.to_json() for item in personal_in_clear(h.database, revision, batch=1)]
    assert paged == report["in_clear"]
    line = _one_error_line(cli("workflows", "lint-history", "tests/none"))
    assert line == "error: no workflow is deployed at 'tests/none'"
