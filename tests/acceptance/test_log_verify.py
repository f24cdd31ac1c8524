"""`charter verify --log`: what the log catches that the chain alone cannot
(a deleted tail, a restored backup, a fork), with a real sequencer, real PostgreSQL and the CLI as
a user runs it."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.core.ed25519 import SecretKey
from charter.db.database import Conn, connect
from tests.acceptance.logworld import LogWorld, append_one, insert_signed, scratch_world
from tests.acceptance.processes import run_charter


@pytest.fixture(scope="module")
def world(
    pg_admin_url: str, template_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LogWorld]:
    with scratch_world(
        pg_admin_url, template_database, tmp_path_factory.mktemp("logv") / "home", "charter_logv"
    ) as world:
        yield world


def _chain(world: LogWorld, events: int) -> tuple[SecretKey, str, str, list[str]]:
    """A process with `events` events, all logged by a sequencer run."""
    actor, version, (process_id,) = world.seed(1)
    with connect(world.url) as conn:
        hashes = [append_one(conn, actor, version, process_id) for _ in range(events)]
        conn.commit()
    sequencer = world.sequencer()
    try:
        world.wait_drained(sequencer)
    finally:
        sequencer.send_signal(signal.SIGTERM)
        sequencer.communicate(timeout=60)
    return actor, version, process_id, hashes


def _as_superuser_cut(conn: Conn, process_id: str, keep: int, head: str) -> None:
    """What attacker A1 can do: triggers off, delete the tail, rewind the head."""
    conn.execute("SET session_replication_role = replica")
    conn.execute("DELETE FROM events WHERE process_id = %s AND seq > %s", (process_id, keep))
    conn.execute(
        "UPDATE processes SET seq = %s, head_hash = %s WHERE id = %s", (keep, head, process_id)
    )
    conn.execute("RESET session_replication_role")


def _verify(world: LogWorld, *args: str) -> tuple[int, dict[str, Any]]:
    done = run_charter("verify", *args, "--json", env=world.env())
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def _codes(report: dict[str, Any]) -> list[tuple[int | None, str]]:
    return [(p["seq"], p["code"]) for p in report["problems"]]


def test_a_deleted_tail_passes_alone_and_is_log_truncated_with_the_log(world: LogWorld) -> None:
    _, _, process_id, hashes = _chain(world, 7)
    with connect(world.url) as conn:
        _as_superuser_cut(conn, process_id, 4, hashes[3])
        conn.commit()
    code, report = _verify(world, process_id)
    assert (code, report["ok"]) == (0, True), report  # the documented limit of the chain alone
    code, report = _verify(world, process_id, "--log", str(world.settings.directory))
    assert code == 1
    assert _codes(report) == [(None, "log_truncated")]
    assert report["log"]["latest_in_log"]["seq"] == 7
    assert "ends at seq 4" in report["problems"][0]["message"]


def test_an_export_carries_the_heads_log_proof_verified_offline(
    world: LogWorld, tmp_path: Path
) -> None:
    from charter.tlog.checkpoint import Cosigner

    actor, version, process_id, _ = _chain(world, 3)
    done = run_charter("export", process_id, env=world.env())
    assert done.returncode == 0, done.stderr
    bundle = json.loads(done.stdout)
    assert bundle["format"] == "charter-export/2"
    assert (bundle["log"]["seq"], bundle["log"]["unlogged"]) == (3, 0)
    assert bundle["log"]["proof"].startswith("c2sp.org/tlog-proof@v1\nindex ")
    path = tmp_path / "bundle.json"
    path.write_text(done.stdout)
    bundle_args = ("--bundle", str(path), "--no-replay")  # the seeded workflow is a stub
    salt = str(world.settings.salt_file)
    # The policy `charter log init` wrote (no witnesses) is the default; the salt is optional.
    code, report = _verify(world, *bundle_args, "--salt", salt, "--require-log")
    assert (code, report["ok"]) == (0, True), report
    assert report["log"]["proven"] is True
    assert report["log"]["checkpoint_size"] == world.log.size()
    text = run_charter("verify", *bundle_args, env=world.env()).stdout
    assert "log: seq 3 proven in charter.test/log" in text

    # A policy that requires a witness: the log's own signature is not enough.
    vkey = (world.settings.key_file.parent / "log.vkey").read_text().strip()
    witness = Cosigner.generate("audit.test/w1")
    policy = tmp_path / "witnessed.policy"
    policy.write_text(f"log {vkey}\nwitness w1 {witness.verifier().vkey}\nquorum w1\n")
    code, report = _verify(world, *bundle_args, "--policy", str(policy))
    assert code == 1
    assert _codes(report) == [(None, "checkpoint_untrusted")]

    # A head not logged yet: the proof covers seq 3, seq 4 is counted as unlogged.
    with connect(world.url) as conn:
        append_one(conn, actor, version, process_id)
        conn.commit()
    done = run_charter("export", process_id, "--wait-log", "0", env=world.env())
    path.write_text(done.stdout)
    assert json.loads(done.stdout)["log"]["unlogged"] == 1
    code, report = _verify(world, *bundle_args, "--require-log", "--log-grace", "0")
    assert code == 1
    assert _codes(report) == [(4, "not_logged")]
    with connect(world.url) as conn:  # leave the queue as the other tests expect it
        conn.execute("DELETE FROM log_pending")
        conn.commit()


def test_another_event_at_a_logged_seq_is_log_fork_and_halts_the_sequencer(
    world: LogWorld,
) -> None:
    actor, version, process_id, hashes = _chain(world, 3)
    with connect(world.url) as conn:
        _as_superuser_cut(conn, process_id, 2, hashes[1])
        conn.execute("DELETE FROM log_pending")  # a fork offered for logging...
        forged = insert_signed(conn, actor, version, process_id, seq=3, prev=hashes[1])
        conn.commit()
    code, report = _verify(world, process_id, "--log", str(world.settings.directory))
    assert code == 1
    assert _codes(report) == [(3, "log_fork")]
    assert forged in report["problems"][0]["message"]
    halted = run_charter("log", "sequence", env=world.env())  # ...is refused
    assert halted.returncode == 3
    assert "db_behind_log" in halted.stderr
    with connect(world.url) as conn:  # the fork stays queued, unlogged: undo for the others
        conn.execute("DELETE FROM log_pending")
        conn.commit()


def test_an_event_not_yet_logged_is_informational_unless_required(world: LogWorld) -> None:
    actor, version, process_id, _ = _chain(world, 2)
    with connect(world.url) as conn:
        append_one(conn, actor, version, process_id)
        conn.commit()
    log = str(world.settings.directory)
    code, report = _verify(world, process_id, "--log", log, "--log-grace", "0")
    assert (code, report["ok"]) == (0, True)
    assert report["log"]["unlogged"] == 1
    assert report["log"]["not_logged"] == 1
    code, report = _verify(world, process_id, "--log", log, "--log-grace", "0", "--require-log")
    assert code == 1
    assert _codes(report) == [(3, "not_logged")]
    code, report = _verify(world, process_id, "--log", log, "--require-log")
    assert code == 0  # within the grace period
    text = run_charter("verify", process_id, "--log", log, env=world.env()).stdout
    assert "latest logged seq 2, 1 event(s) not logged yet" in text


def test_verify_all_with_the_log_lists_each_truncated_process(world: LogWorld) -> None:
    _, _, process_id, hashes = _chain(world, 3)
    with connect(world.url) as conn:
        _as_superuser_cut(conn, process_id, 1, hashes[0])
        conn.commit()
    done = run_charter(
        "verify", "--all", "--jobs", "1", "--log", str(world.settings.directory), "--json",
        env=world.env(),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    failed = {
        f["process"]: [p["code"] for p in f["problems"]] for f in json.loads(done.stdout)["failed"]
    }
    assert failed[process_id] == ["log_truncated"]


def test_a_log_directory_older_than_the_trusted_checkpoint_is_log_rollback(
    world: LogWorld, tmp_path: Path
) -> None:
    import shutil

    old = tmp_path / "old-log"
    shutil.copytree(world.settings.directory, old)
    _, _, process_id, _ = _chain(world, 2)
    log = str(world.settings.directory)
    _verify(world, process_id, "--log", log)  # the verifier now trusts the newer size
    code, report = _verify(world, process_id, "--log", str(old))
    assert code == 1
    assert (None, "log_rollback") in _codes(report)


def test_a_trusted_checkpoint_of_the_same_size_with_another_root_is_equivocation(
    world: LogWorld, tmp_path: Path
) -> None:
    from charter.audit.log_check import trust_path
    from charter.tlog.checkpoint import Checkpoint, sign_checkpoint

    _, _, process_id, _ = _chain(world, 2)
    size = world.log.size()
    signer = world.settings.signer()  # an attacker with the log key signs a forked tree
    forged = sign_checkpoint(Checkpoint(signer.name, size, bytes(32)), signer)
    trusted = trust_path(world.home / "trust", signer.name)
    trusted.parent.mkdir(parents=True, exist_ok=True)
    trusted.write_bytes(forged)
    code, report = _verify(world, process_id, "--log", str(world.settings.directory))
    assert code == 1
    assert (None, "checkpoint_equivocation") in _codes(report)
    trusted.unlink()


def test_mirror_copies_a_verified_log_and_refuses_a_fork(world: LogWorld, tmp_path: Path) -> None:
    import shutil

    from charter.tlog.checkpoint import Checkpoint, sign_checkpoint
    from charter.tlog.logdir import LogDirectory
    from charter.tlog.merkle import leaf_hash, root_of
    from charter.tlog.tiles import build_tiles

    _, _, process_id, _ = _chain(world, 3)
    copy = tmp_path / "mirror"
    source = str(world.settings.directory)
    done = run_charter("log", "mirror", source, str(copy), env=world.env())
    assert done.returncode == 0, done.stderr
    size = world.log.size()
    assert f"mirrored size {size} (was 0)" in done.stdout
    code, report = _verify(world, process_id, "--log", str(copy))
    assert (code, report["log"]["checkpoint_size"]) == (0, size)

    # A log holder (A2) rewrites the directory: same size, another tree, signed anew.
    forked = tmp_path / "forked"
    shutil.copytree(world.settings.directory, forked)
    entries = [e.encode() for e in LogDirectory(forked).entries(0, size)]
    entries[-1] = entries[-1][:-1] + bytes([entries[-1][-1] ^ 1])
    for path, data in build_tiles(entries).items():
        (forked / path).write_bytes(data)
    signer = world.settings.signer()
    root = root_of([leaf_hash(e) for e in entries])
    (forked / "checkpoint").write_bytes(
        sign_checkpoint(Checkpoint(signer.name, size, root), signer)
    )
    # The fork lacks the witness's cosignature: untrusted under the policy init wrote.
    refused = run_charter("log", "mirror", str(forked), str(copy), env=world.env())
    assert refused.returncode == 1, refused.stderr
    assert "the witness quorum local is not met" in refused.stderr
    # Trusting the log key alone, the copy itself shows the fork.
    unwitnessed = tmp_path / "log-only.policy"
    vkey = (world.settings.key_file.parent / "log.vkey").read_text().strip()
    unwitnessed.write_text(f"log {vkey}\nquorum none\n")
    refused = run_charter(
        "log", "mirror", str(forked), str(copy), "--policy", str(unwitnessed), env=world.env()
    )
    assert refused.returncode == 3, refused.stderr
    assert "checkpoint_equivocation" in refused.stderr


def test_a_deleted_process_is_process_missing_with_its_index_range(world: LogWorld) -> None:
    from charter.tlog.entry import process_key

    _, _, process_id, hashes = _chain(world, 3)
    with connect(world.url) as conn:  # A1: the whole process gone, row and events
        conn.execute("SET session_replication_role = replica")
        conn.execute("DELETE FROM events WHERE process_id = %s", (process_id,))
        conn.execute("DELETE FROM processes WHERE id = %s", (process_id,))
        conn.execute("RESET session_replication_role")
        indexes = [
            r[0]
            for r in conn.execute(
                "SELECT idx FROM log_entries WHERE process_id = %s ORDER BY idx", (process_id,)
            )
        ]
        conn.commit()
    assert len(indexes) == 3
    log = str(world.settings.directory)
    alone = run_charter("verify", "--all", "--jobs", "1", "--json", env=world.env())
    assert process_id not in alone.stdout  # the chains alone cannot know it existed
    done = run_charter(
        "verify", "--all", "--jobs", "1", "--log", log, "--require-log", "--json",
        env=world.env(),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    key = process_key(world.settings.salt(), process_id).hex()
    (gone,) = [m for m in summary["missing"] if m["process_key"] == key]
    assert gone["code"] == "process_missing"
    assert (gone["first_index"], gone["last_index"]) == (indexes[0], indexes[-1])
    assert (gone["last_seq"], gone["last_hash"], gone["entries"]) == (3, hashes[-1], 3)
    assert f"indexes {indexes[0]}..{indexes[-1]}, last logged seq 3" in gone["message"]
    text = run_charter("verify", "--all", "--jobs", "1", "--log", log, env=world.env()).stdout
    assert key in text.replace("\n", "")
    assert "logged process(es) missing from the database" in text
    # Asked for by its id, the process the database lost is named missing, not unknown.
    code, report = _verify(world, process_id, "--log", log)
    assert code == 1
    assert _codes(report) == [(None, "process_missing")]
    assert report["log"]["missing"]["last_seq"] == 3


def test_the_default_local_witness_cosigns_and_catches_a_rolled_back_directory(
    world: LogWorld, tmp_path: Path
) -> None:
    import shutil

    old = tmp_path / "old-log"
    shutil.copytree(world.settings.directory, old)
    _, _, process_id, _ = _chain(world, 2)
    local = (world.home / "local-witness").resolve().as_uri()
    policy, salt = str(world.settings.policy_path), str(world.settings.salt_file)

    def auditor(log: Path, name: str) -> tuple[int, dict[str, Any]]:
        env = world.env(CHARTER_HOME=str(tmp_path / name))  # no trust state of its own
        done = run_charter(
            "verify", process_id, "--log", str(log), "--policy", policy, "--salt", salt,
            "--json", env=env,
        )  # fmt: skip
        return done.returncode, json.loads(done.stdout)

    code, report = auditor(world.settings.directory, "a1")
    assert code == 0, report
    assert report["log"]["witnesses"] == ["local"]  # the published checkpoint is cosigned
    assert report["log"]["witnesses_asked"] == [local]
    code, report = auditor(old, "a2")
    assert code == 1
    assert (None, "log_rollback") in _codes(report)
    status = json.loads(run_charter("log", "status", "--json", env=world.env()).stdout)
    assert status["witnessing"]["mode"] == "local"
