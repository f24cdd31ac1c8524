"""`charter serve` with a log configured: it sequences (in a child process) and serves
the log's checkpoint, tiles, proofs and status from the log directory."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from charter.db.database import connect
from charter.tlog.checkpoint import open_checkpoint
from charter.tlog.entry import LogEntry
from charter.tlog.merkle import verify_consistency
from charter.tlog.note import Ed25519Verifier, b64decode
from charter.tlog.policy import parse_policy
from charter.tlog.proof import TlogProof, verify_proof
from tests.acceptance.logworld import LogWorld, append_one, scratch_world
from tests.acceptance.processes import free_port, run_charter, start_charter, wait_healthy


@pytest.fixture
def world(pg_admin_url: str, template_database: str, tmp_path: Path) -> Iterator[LogWorld]:
    with scratch_world(pg_admin_url, template_database, tmp_path / "home", "charter_logh") as world:
        yield world


def _size(api: str, want: int) -> dict[str, object]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status: dict[str, object] = httpx.get(f"{api}/v1/log/status").json()
        if status["size"] == want and status["pending"] == 0:
            return status
        time.sleep(0.1)
    raise AssertionError(f"the log did not reach size {want}")


def test_serve_sequences_and_serves_the_log(world: LogWorld) -> None:
    actor, version, (process_id,) = world.seed(1)
    with connect(world.url) as conn:
        hashes = [append_one(conn, actor, version, process_id) for _ in range(3)]
        conn.commit()
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    server = start_charter("serve", "--port", str(port), env=world.env(CHARTER_LOG_PUBLIC="1"))
    try:
        wait_healthy(api, server)
        status = _size(api, 3)
        assert status["origin"] == "charter.test/log"
        assert status["halted"] is None

        answer = httpx.get(f"{api}/v1/log/checkpoint")
        assert answer.headers["content-type"] == "text/plain; charset=utf-8"
        vkey = (world.settings.key_file.parent / "log.vkey").read_text().strip()
        opened = open_checkpoint(answer.content, [Ed25519Verifier.from_vkey(vkey)])
        assert opened.checkpoint.size == 3

        bundle = httpx.get(f"{api}/v1/log/tile/entries/000.p/3")
        assert bundle.status_code == 200
        assert bundle.content == (world.settings.directory / "tile/entries/000.p/3").read_bytes()
        assert httpx.get(f"{api}/v1/log/tile/0/000.p/7").json()["error"]["code"] == "tile_missing"
        assert (
            httpx.get(f"{api}/v1/log/tile/0/x000/001").json()["error"]["code"]
            == "tile_path_malformed"
        )

        text = httpx.get(f"{api}/v1/log/proof/{hashes[1]}").text
        policy = parse_policy((world.settings.key_file.parent / "charter.policy").read_bytes())
        entry = LogEntry.for_event(
            log_salt=world.settings.salt(), process_id=process_id, seq=2, event_hash_hex=hashes[1]
        )
        trusted = verify_proof(TlogProof.parse(text), entry.leaf_hash(), policy)
        assert trusted.checkpoint.size == 3
        missing = httpx.get(f"{api}/v1/log/proof/{'0' * 64}")
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_logged")

        with connect(world.url) as conn:
            append_one(conn, actor, version, process_id)
            conn.commit()
        assert _size(api, 4)["size"] == 4
        later = open_checkpoint(
            httpx.get(f"{api}/v1/log/checkpoint").content, [Ed25519Verifier.from_vkey(vkey)]
        ).checkpoint
        lines = httpx.get(f"{api}/v1/log/consistency", params={"from": 3, "to": 4}).text
        proof = [b64decode(line) for line in lines.splitlines()]
        verify_consistency(3, 4, proof, opened.checkpoint.root, later.root)
        too_far = httpx.get(f"{api}/v1/log/consistency", params={"from": 3, "to": 9})
        assert too_far.json()["error"]["code"] == "log_proof_range"

        copy = world.home / "http-mirror"
        mirrored = run_charter("log", "mirror", f"{api}/v1/log/", str(copy), env=world.env())
        assert mirrored.returncode == 0, mirrored.stderr
        assert (copy / "checkpoint").read_bytes() == (
            world.settings.directory / "checkpoint"
        ).read_bytes()

        old_proof = httpx.get(f"{api}/v1/log/proof/{hashes[1]}", params={"size": 3}).text
        assert verify_proof(TlogProof.parse(old_proof), entry.leaf_hash(), policy).checkpoint == (
            opened.checkpoint
        )
        never = httpx.get(f"{api}/v1/log/proof/{hashes[1]}", params={"size": 2})
        assert (never.status_code, never.json()["error"]["code"]) == (404, "not_logged")

        cli = run_charter("log", "proof", hashes[1], env=world.env())
        assert cli.returncode == 0, cli.stderr
        assert cli.stdout == httpx.get(f"{api}/v1/log/proof/{hashes[1]}").text
        metrics = httpx.get(f"{api}/metrics").text
        assert "charter_log_size 4.0" in metrics
        assert "charter_log_entries_integrated_total 4.0" in metrics
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert "sequencing charter.test/log" in out


def test_log_reads_need_the_log_read_scope_unless_public(world: LogWorld) -> None:
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    server = start_charter("serve", "--port", str(port), env=world.env())
    try:
        wait_healthy(api, server)
        answer = httpx.get(f"{api}/v1/log/checkpoint")
        assert (answer.status_code, answer.json()["error"]["code"]) == (401, "unauthorized")
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
