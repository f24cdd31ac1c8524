"""The sequencer publishing through real `charter witness serve` processes:
checkpoints only with the quorum's cosignatures, nothing new while the quorum is out of
reach, the same signed checkpoint offered again across a
restart, and a rolled-back log directory halting the sequencer."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from charter.core.crashpoints import LOG_AFTER_WITNESSES
from charter.core.ed25519 import SecretKey
from charter.db.database import connect
from charter.tlog.checkpoint import Checkpoint
from charter.tlog.logdir import UNPUBLISHED, WITNESS_SIZES
from charter.tlog.note import parse_note, sign_note
from charter.tlog.policy import Policy, parse_policy
from charter.tlog.witness_protocol import encode_request
from tests.acceptance.logworld import LogWorld, append_one, scratch_world
from tests.acceptance.processes import run_charter, stopped
from tests.acceptance.witnessproc import WitnessProcess
from tests.conftest import create_database, drop_database, unique_name


@pytest.fixture
def world(pg_admin_url: str, template_database: str, tmp_path: Path) -> Iterator[LogWorld]:
    with scratch_world(pg_admin_url, template_database, tmp_path / "home", "charter_logw") as world:
        yield world


@pytest.fixture
def stack(world: LogWorld, tmp_path: Path) -> Iterator[list[WitnessProcess]]:
    """Three witnesses that know the world's log; started by each test as it needs."""
    vkey = _log_vkey(world)
    witnesses = [
        WitnessProcess(tmp_path / f"w{i}", f"w{i}.example.org/witness", vkey) for i in (1, 2, 3)
    ]
    yield witnesses
    for witness in witnesses:
        witness.stop()


def _log_vkey(world: LogWorld) -> str:
    return (world.settings.key_file.parent / "log.vkey").read_text().strip()


def _require(world: LogWorld, witnesses: list[WitnessProcess], quorum: int) -> Policy:
    """Edit the policy `charter log init` wrote, as the docs say: witness lines with
    their URLs and a k-of-n quorum."""
    lines = [f"log {_log_vkey(world)}"]
    lines += [f"witness w{i} {w.vkey} {w.url}" for i, w in enumerate(witnesses, start=1)]
    names = " ".join(f"w{i}" for i in range(1, len(witnesses) + 1))
    lines += [f"group witnesses {quorum} {names}", "quorum witnesses"]
    text = "\n".join(lines) + "\n"
    world.settings.policy_path.write_text(text)
    return parse_policy(text)


def _sequencer(world: LogWorld) -> subprocess.Popen[str]:
    return world.sequencer(CHARTER_LOG_WITNESS_TIMEOUT="20")


def _stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = stopped(process)
    return process.returncode, err


def _events(world: LogWorld, count: int) -> tuple[SecretKey, str, str]:
    actor, version, (process_id,) = world.seed(1)
    _more(world, actor, version, process_id, count)
    return actor, version, process_id


def _more(world: LogWorld, actor: SecretKey, version: str, process_id: str, count: int) -> None:
    with connect(world.url) as conn:
        for _ in range(count):
            append_one(conn, actor, version, process_id)
        conn.commit()


def _held(witness: WitnessProcess, origin: str) -> int:
    response = witness.latest(origin)
    if response.status_code == 404:
        return 0
    return Checkpoint.parse(parse_note(response.content).text).size


def _offered(world: LogWorld, size: int, process: subprocess.Popen[str]) -> None:
    """Until the sequencer signed a checkpoint of `size` and offered it to the witnesses."""
    path = world.settings.log_directory().state / UNPUBLISHED
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the sequencer exited: {process.communicate()}")
        if path.is_file() and Checkpoint.parse(parse_note(path.read_bytes()).text).size == size:
            return
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint of size {size} was offered")


def _until_held(witness: WitnessProcess, origin: str, size: int) -> None:
    deadline = time.monotonic() + 120
    while _held(witness, origin) != size:
        assert time.monotonic() < deadline, f"{witness.name} never held size {size}"
        time.sleep(0.1)


def test_two_of_three_publish_only_with_the_quorum_and_resume_after_an_outage(
    world: LogWorld, stack: list[WitnessProcess]
) -> None:
    w1, w2, w3 = stack
    for witness in stack:
        witness.start()
    policy = _require(world, stack, 2)
    origin = world.settings.signer().name
    actor, version, process_id = _events(world, 6)
    sequencer = _sequencer(world)
    try:
        world.wait_drained(sequencer)
        note = world.log.checkpoint_note()
        assert note is not None
        trusted = policy.verify_checkpoint(note)
        assert trusted.checkpoint.size == 6
        assert len(trusted.witnesses) >= 2  # published as soon as two cosigned
        world.check_consistent()

        # Two witnesses down: w3 alone cosigns, which is not the quorum.
        w1.stop()
        w2.stop()
        _more(world, actor, version, process_id, 3)
        _offered(world, 9, sequencer)
        _until_held(w3, origin, 9)
        assert world.log.size() == 6  # not published: the checkpoint file did not move
        assert world.pending() == 3
        assert policy.verify_checkpoint(world.log.checkpoint_note() or b"").checkpoint.size == 6
    finally:
        code, err = _stop(sequencer)
    assert code == 0, err
    assert "checkpoint not published" in err
    assert err.count("checkpoint 9 lacks the quorum") == 1  # said once, not every tick

    # More events while stopped; after a restart the signed checkpoint of size 9 (which
    # w3 holds) is offered first, so no witness sees two trees of one size.
    _more(world, actor, version, process_id, 2)
    w1.start()
    sequencer = _sequencer(world)
    try:
        world.wait_drained(sequencer)
    finally:
        code, err = _stop(sequencer)
    assert code == 0, err
    assert "offering the unpublished checkpoint 9 again" in err
    note = world.log.checkpoint_note()
    assert note is not None
    trusted = policy.verify_checkpoint(note)
    assert trusted.checkpoint.size == 11
    assert set(trusted.witnesses) >= {"w1", "w3"}
    assert not list((w3.state / "refused").glob("**/*.json"))  # w3 refused nothing
    kept = json.loads((world.log.state / WITNESS_SIZES).read_text())
    assert (kept["w1"], kept["w3"]) == (11, 11)  # what the next start sends as `old`
    world.check_consistent()
    with connect(world.url) as conn:
        witnessed = conn.execute("SELECT bool_and(witnessed) FROM log_checkpoints WHERE size > 0")
        assert witnessed.fetchone() == (True,)


def test_a_crash_after_the_witness_cosigned_republishes_the_same_checkpoint(
    world: LogWorld, stack: list[WitnessProcess]
) -> None:
    w1 = stack[0].start()
    policy = _require(world, [w1], 1)
    origin = world.settings.signer().name
    actor, version, process_id = _events(world, 3)
    crashing = world.sequencer(
        CHARTER_CRASH_POINT=LOG_AFTER_WITNESSES, CHARTER_LOG_WITNESS_TIMEOUT="20"
    )
    crashing.communicate(timeout=120)
    assert crashing.returncode == -signal.SIGKILL
    assert _held(w1, origin) == 3  # the witness holds what the log never wrote
    assert world.log.size() == 0
    _more(world, actor, version, process_id, 2)
    sequencer = _sequencer(world)
    try:
        world.wait_drained(sequencer)
    finally:
        code, err = _stop(sequencer)
    assert code == 0, err
    assert "offering the unpublished checkpoint 3 again" in err
    assert policy.verify_checkpoint(world.log.checkpoint_note() or b"").checkpoint.size == 5
    assert _held(w1, origin) == 5
    assert not list((w1.state / "refused").glob("**/*.json"))
    assert len(world.check_consistent()) == 5


def _verify(world: LogWorld, *args: str) -> tuple[int, dict[str, Any]]:
    done = run_charter("verify", *args, "--json", env=world.env())
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_verify_log_accepts_the_cosigned_checkpoint_and_refuses_one_without(
    world: LogWorld, stack: list[WitnessProcess], tmp_path: Path
) -> None:
    w1 = stack[0].start()
    _require(world, [w1], 1)
    _, _, process_id = _events(world, 3)
    sequencer = _sequencer(world)
    try:
        world.wait_drained(sequencer)
    finally:
        _stop(sequencer)
    policy = str(world.settings.policy_path)
    code, report = _verify(world, process_id, "--log", str(world.log.root), "--policy", policy)
    assert (code, report["ok"]) == (0, True), report
    assert report["log"]["witnesses"] == ["w1"]
    # The witness holds exactly this tree: nothing to report.
    code, report = _verify(
        world, process_id, "--log", str(world.log.root), "--policy", policy, "--witness", w1.url
    )
    assert (code, report["ok"]) == (0, True), report

    # The same checkpoint with the log's signature alone: the quorum is not met.
    stripped = tmp_path / "stripped"
    shutil.copytree(world.log.root, stripped)
    note = world.log.checkpoint_note()
    assert note is not None
    alone = sign_note(parse_note(note).text, [world.settings.signer()])
    (stripped / "checkpoint").write_bytes(alone)
    code, report = _verify(world, process_id, "--log", str(stripped), "--policy", policy)
    assert code == 1
    assert [p["code"] for p in report["problems"]] == ["checkpoint_untrusted"]


def test_a_rolled_back_log_directory_is_refused_by_the_witness_and_halts_the_sequencer(
    world: LogWorld, stack: list[WitnessProcess], tmp_path: Path, pg_admin_url: str
) -> None:
    w1 = stack[0].start()
    _require(world, [w1], 1)
    origin = world.settings.signer().name
    actor, version, process_id = _events(world, 2)
    sequencer = _sequencer(world)
    try:
        world.wait_drained(sequencer)
    finally:
        _stop(sequencer)
    # A backup of the whole host at size 2: the log directory, its state and the database.
    backup = tmp_path / "log-backup"
    shutil.copytree(world.log.root, backup)
    shutil.copytree(world.log.state, tmp_path / "state-backup")
    old_note = world.log.checkpoint_note()
    assert old_note is not None
    snapshot = unique_name("charter_logw_snap")
    create_database(pg_admin_url, snapshot, template=str(conninfo_to_dict(world.url)["dbname"]))
    try:
        _more(world, actor, version, process_id, 4)
        sequencer = _sequencer(world)
        try:
            world.wait_drained(sequencer)
        finally:
            _stop(sequencer)
        assert _held(w1, origin) == 6

        # The witness refuses the old checkpoint: it holds a larger tree (409, its size).
        refused = w1.add(encode_request(6, [], old_note))
        assert refused.status_code in (400, 409)
        refused = w1.add(encode_request(2, [], old_note))
        assert (refused.status_code, refused.text) == (409, "6\n")

        # Only the directory restored: the database knows more than it holds.
        shutil.rmtree(world.log.root)
        shutil.copytree(backup, world.log.root)
        halted = run_charter("log", "sequence", env=world.env())
        assert halted.returncode == 3
        assert "log_behind_db" in halted.stderr
        # A verifier shown the restored directory (a mirror rolled back with it) and
        # asking the witness learns the log went further.
        code, report = _verify(
            world, process_id, "--log", str(world.log.root),
            "--policy", str(world.settings.policy_path), "--witness", w1.url,
        )  # fmt: skip
        assert code == 1
        rollback = [p for p in report["problems"] if p["code"] == "log_rollback"]
        assert rollback, report
        assert f"the witness {w1.url} cosigned size 6" in rollback[0]["message"]

        # The whole host restored (directory and database agree at size 2), then a new
        # event: only the witness knows the log went further.
        shutil.rmtree(world.log.root)
        shutil.copytree(backup, world.log.root)
        shutil.rmtree(world.log.state)
        shutil.copytree(tmp_path / "state-backup", world.log.state)
        restored = LogWorld(make_conninfo(world.url, dbname=snapshot), world.home)
        _more(restored, actor, version, process_id, 1)
        halted = run_charter("log", "sequence", env=restored.env(CHARTER_LOG_WITNESS_TIMEOUT="20"))
        assert halted.returncode == 3, halted.stderr
        assert "log_behind_witness" in halted.stderr
        assert restored.log.halted() is not None
        assert (restored.log.halted() or {})["code"] == "log_behind_witness"
        assert restored.log.size() == 2  # nothing published over the witnessed tree
        assert _held(w1, origin) == 6

        # The same restore, regrown past the witnessed size (7 > 6): the witness cannot
        # be shown consistency (422), which halts too rather than retrying forever.
        shutil.rmtree(world.log.root)
        shutil.copytree(backup, world.log.root)
        shutil.rmtree(world.log.state)
        shutil.copytree(tmp_path / "state-backup", world.log.state)
        _more(restored, actor, version, process_id, 4)
        halted = run_charter("log", "sequence", env=restored.env(CHARTER_LOG_WITNESS_TIMEOUT="20"))
        assert halted.returncode == 3, halted.stderr
        assert "log_behind_witness" in halted.stderr
        assert "refused checkpoint 7 as inconsistent" in halted.stderr
        assert restored.log.size() == 2
        assert _held(w1, origin) == 6
        assert list((w1.state / "refused").glob("*/inconsistent-*.json"))  # its evidence
    finally:
        drop_database(pg_admin_url, snapshot)


def test_a_fresh_verifier_asks_the_policys_witnesses_by_default(
    world: LogWorld, stack: list[WitnessProcess], tmp_path: Path
) -> None:
    from charter.tlog.checkpoint import sign_checkpoint
    from charter.tlog.logdir import LogDirectory
    from charter.tlog.merkle import leaf_hash, root_of
    from charter.tlog.tiles import build_tiles

    w1 = stack[0].start()
    _require(world, [w1], 1)
    actor, version, process_id = _events(world, 2)
    sequencer = _sequencer(world)
    try:
        world.wait_drained(sequencer)
    finally:
        _stop(sequencer)
    old = tmp_path / "old-log"  # a copy at size 2: what a rolled-back mirror shows
    shutil.copytree(world.log.root, old)
    _more(world, actor, version, process_id, 3)
    sequencer = _sequencer(world)
    try:
        world.wait_drained(sequencer)
    finally:
        _stop(sequencer)
    policy, salt = str(world.settings.policy_path), str(world.settings.salt_file)
    auditors = iter(range(100))

    def fresh(*args: str) -> tuple[int, dict[str, Any]]:
        """`verify --json` by an auditor with no trust state of its own and no --witness."""
        home = tmp_path / f"auditor-{next(auditors)}"
        env = world.env(CHARTER_HOME=str(home))
        done = run_charter("verify", *args, "--policy", policy, "--json", env=env)
        assert done.stdout, done.stderr
        return done.returncode, json.loads(done.stdout)

    def codes(report: dict[str, Any]) -> list[str]:
        return [p["code"] for p in report["problems"]]

    log = str(world.log.root)
    code, report = fresh(process_id, "--log", log, "--salt", salt)
    assert (code, report["log"]["witnesses_asked"], report["log"]["offline"]) == (
        0, [w1.url], False,
    )  # fmt: skip
    code, report = fresh(process_id, "--log", str(old), "--salt", salt)
    assert code == 1
    assert "log_rollback" in codes(report)

    # A2 forks the log at the witnessed size; a policy that names the witness without
    # requiring its cosignature still has it asked, and the fork shows.
    forked = tmp_path / "forked"
    shutil.copytree(world.log.root, forked)
    size = world.log.size()
    entries = [e.encode() for e in LogDirectory(forked).entries(0, size)]
    entries[0] = entries[0][:-1] + bytes([entries[0][-1] ^ 1])
    for path, data in build_tiles(entries).items():
        (forked / path).write_bytes(data)
    signer = world.settings.signer()
    root = root_of([leaf_hash(e) for e in entries])
    (forked / "checkpoint").write_bytes(
        sign_checkpoint(Checkpoint(signer.name, size, root), signer)
    )
    monitored = tmp_path / "monitored.policy"
    monitored.write_text(f"log {_log_vkey(world)}\nwitness w1 {w1.vkey} {w1.url}\nquorum none\n")
    home = tmp_path / "auditor-fork"
    done = run_charter(
        "verify", process_id, "--log", str(forked), "--policy", str(monitored),
        "--salt", salt, "--json", env=world.env(CHARTER_HOME=str(home)),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "checkpoint_equivocation" in codes(json.loads(done.stdout))

    # A bundle is held against the witness too; a mirror refuses the rolled-back source.
    exported = run_charter("export", process_id, env=world.env())
    assert exported.returncode == 0, exported.stderr
    bundle = tmp_path / "bundle.json"
    bundle.write_text(exported.stdout)
    code, report = fresh("--bundle", str(bundle), "--no-replay")
    assert (code, report["log"]["witnesses_asked"]) == (0, [w1.url]), report
    mirror = tmp_path / "mirror"
    refused = run_charter("log", "mirror", str(old), str(mirror), env=world.env())
    assert refused.returncode == 3, refused.stderr
    assert "log_rollback" in refused.stderr
    assert not mirror.exists() or not any(mirror.iterdir())
    copied = run_charter("log", "mirror", log, str(mirror), env=world.env())
    assert copied.returncode == 0, copied.stderr
    assert f"witnesses asked: {w1.url}" in copied.stdout

    # The witness down: every check says so, unless --offline, which the report states.
    w1.stop()
    code, report = fresh(process_id, "--log", log, "--salt", salt)
    assert code == 1
    assert codes(report) == ["witness_unreachable"]
    code, report = fresh(process_id, "--log", log, "--salt", salt, "--offline")
    assert (code, report["log"]["offline"], report["log"]["witnesses_asked"]) == (0, True, [])
    text = run_charter(
        "verify", process_id, "--log", log, "--policy", policy, "--salt", salt, "--offline",
        env=world.env(CHARTER_HOME=str(tmp_path / "auditor-text")),
    ).stdout  # fmt: skip
    assert "offline: no witness was asked" in text
    code, report = fresh("--bundle", str(bundle), "--no-replay")
    assert (code, codes(report)) == (1, ["witness_unreachable"])
    code, report = fresh("--bundle", str(bundle), "--no-replay", "--offline")
    assert (code, report["log"]["offline"]) == (0, True)
    down = run_charter("log", "mirror", log, str(tmp_path / "mirror2"), env=world.env())
    assert down.returncode == 1
    assert "witness_unreachable" in down.stderr
    offline = run_charter(
        "log", "mirror", log, str(tmp_path / "mirror2"), "--offline", env=world.env()
    )
    assert offline.returncode == 0, offline.stderr
