"""`charter witness serve` as a real process: the tlog-witness protocol over HTTP, its
state across kill -9, the race tlog-witness warns about, and the CLI around it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from charter.tlog.checkpoint import Checkpoint, open_checkpoint
from charter.tlog.note import Ed25519Signer, b64encode, parse_note
from charter.tlog.witness_protocol import checkpoint_path, encode_request
from tests.acceptance.processes import run_charter
from tests.acceptance.witnessproc import WitnessProcess
from tests.unit.witnesskit import TestLog


@pytest.fixture
def log() -> TestLog:
    return TestLog()


@pytest.fixture
def witness(tmp_path: Path, log: TestLog) -> Iterator[WitnessProcess]:
    process = WitnessProcess(tmp_path / "w1", "witness.example.org/w1", log).start()
    yield process
    process.stop()


def _size(witness: WitnessProcess, log: TestLog) -> int:
    response = witness.latest(log.origin)
    assert response.status_code == 200
    return Checkpoint.parse(parse_note(response.content).text).size


def _refused(witness: WitnessProcess) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(witness.state.glob("refused/*/*.json"))]


def test_add_checkpoint_statuses_as_the_spec_words_them(
    witness: WitnessProcess, log: TestLog
) -> None:
    # Never seen: the monitoring URL is a 404.
    assert witness.latest(log.origin).status_code == 404

    # 200: one cosignature line that verifies under the witness's vkey.
    ok = witness.add(log.request(0, 10))
    assert ok.status_code == 200, ok.text
    assert ok.text.startswith("— witness.example.org/w1 ")
    assert ok.text.endswith("\n")
    assert ok.text.count("\n") == 1
    cosigned = log.note(10) + ok.content
    opened = open_checkpoint(cosigned, [log.key.verifier()], [witness.verifier])
    assert len(opened.cosigned) == 1

    # 409: the body is exactly the latest size and a newline, text/x.tlog.size.
    conflict = witness.add(log.request(3, 20))
    assert conflict.status_code == 409
    assert conflict.content == b"10\n"
    assert conflict.headers["content-type"] == "text/x.tlog.size"

    # 422: a consistency proof that does not verify.
    proof = log.proof(10, 20)
    proof[-1] = bytes(32)
    bad = witness.add(encode_request(10, proof, log.note(20)))
    assert bad.status_code == 422
    assert bad.text.startswith("log_proof_invalid")

    # 403: the right origin, signed by a key the witness does not know.
    impostor = TestLog(key=Ed25519Signer.generate(log.origin))
    assert witness.add(impostor.request(0, 5)).status_code == 403
    # 404: an origin the witness does not know.
    assert witness.add(TestLog(origin="elsewhere.example/log").request(0, 5)).status_code == 404
    # 400: malformed, or an old size larger than the checkpoint's.
    assert witness.add(b"old 10\nnot base64!\n\n" + log.note(20)).status_code == 400
    assert witness.add(encode_request(21, [], log.note(20))).status_code == 400
    assert witness.add(b"x" * 70_000).status_code == 413
    assert httpx.get(f"{witness.url}/add-checkpoint").status_code == 405

    # None of the refusals moved the witness; the next honest step is cosigned.
    assert _size(witness, log) == 10
    assert witness.add(log.request(10, 20)).status_code == 200

    # The monitoring URL serves the checkpoint with the log's signature and the cosignature.
    latest = witness.latest(log.origin)
    assert latest.status_code == 200
    again = open_checkpoint(latest.content, [log.key.verifier()], [witness.verifier])
    assert again.checkpoint == log.checkpoint(20)
    assert len(again.cosigned) == 1


def test_a_rolled_back_or_forked_log_is_refused_and_evidence_kept(
    witness: WitnessProcess, log: TestLog
) -> None:
    assert witness.add(log.request(0, 20)).status_code == 200

    # The log directory was restored from an old copy: it signs size 15 again.
    rollback = witness.add(log.request(0, 15))
    assert rollback.status_code == 409
    assert rollback.content == b"20\n"

    # The log forked: another tree at the same size, with the right old size.
    fork = TestLog(seed="fork", key=log.key)
    equivocation = witness.add(fork.request(20, 20))
    assert equivocation.status_code == 422
    assert equivocation.text.startswith("checkpoint_equivocation")
    # ... and a fork that grows past it cannot prove consistency.
    assert witness.add(fork.request(20, 30)).status_code == 422

    assert _size(witness, log) == 20
    evidence = {str(e["reason"]): e for e in _refused(witness)}
    assert set(evidence) == {"rollback", "equivocation", "inconsistent"}
    assert str(evidence["rollback"]["submitted"]).startswith(f"{log.origin}\n15\n")
    assert evidence["equivocation"]["submitted"] == fork.note(20).decode()
    assert evidence["equivocation"]["latest"] == witness.latest(log.origin).text

    shown = run_charter("witness", "show", "--state", str(witness.state), "--json", env=witness.env)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    [entry] = report["logs"]
    assert (entry["origin"], entry["size"]) == (log.origin, 20)
    assert len(report["refused"]) == 3


def test_fifty_concurrent_calls_never_decrease_the_size(
    witness: WitnessProcess, log: TestLog
) -> None:
    """Growing and stale checkpoints at once, each caller retrying from the size a 409
    reports (as a log does); a monitor polling the witness never sees the size go down."""
    targets = [1 + (i * 37) % 120 for i in range(50)]  # interleaved, with repeats
    accepted: list[int] = []
    observed: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def submit(target: int) -> None:
        old = 0
        with httpx.Client(timeout=60) as client:
            for _ in range(100):
                response = client.post(
                    f"{witness.url}/add-checkpoint", content=log.request(old, target)
                )
                if response.status_code == 200:
                    with lock:
                        accepted.append(target)
                    return
                if response.status_code != 409:
                    errors.append(f"{response.status_code} {response.text}")
                    return
                held = int(response.text)
                if held > target:
                    return  # stale: the witness already holds a larger tree
                old = held
        errors.append(f"no progress towards {target}")

    def monitor() -> None:
        with httpx.Client(timeout=60) as client:
            while not done.is_set():
                response = client.get(f"{witness.url}/{checkpoint_path(log.origin)}")
                if response.status_code == 200:
                    observed.append(Checkpoint.parse(parse_note(response.content).text).size)

    watcher = threading.Thread(target=monitor)
    watcher.start()
    threads = [threading.Thread(target=submit, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()

    assert errors == []
    assert observed == sorted(observed)
    assert max(accepted) == max(targets)
    assert _size(witness, log) == max(accepted)
    # Only stale (smaller) checkpoints were refused as possible rollbacks.
    for record in _refused(witness):
        assert record["reason"] == "rollback"


def test_kill_9_mid_stream_keeps_every_acknowledged_checkpoint(
    tmp_path: Path, log: TestLog
) -> None:
    witness = WitnessProcess(tmp_path / "w1", "witness.example.org/w1", log).start()
    acknowledged: list[int] = []
    started = threading.Event()

    def stream() -> None:
        old = 0
        with httpx.Client(timeout=30) as client:
            for size in range(1, 300):
                try:
                    response = client.post(
                        f"{witness.url}/add-checkpoint", content=log.request(old, size)
                    )
                except httpx.HTTPError:
                    return  # the witness is gone
                assert response.status_code == 200, response.text
                acknowledged.append(size)
                old = size
                if size == 20:
                    started.set()

    sender = threading.Thread(target=stream)
    sender.start()
    assert started.wait(60)
    witness.kill()
    sender.join()
    assert 20 <= len(acknowledged) < 299

    witness.start()
    try:
        held = _size(witness, log)
        # Persisted before answering: nothing acknowledged is lost (one more may have been
        # persisted without its answer getting out).
        assert held in (acknowledged[-1], acknowledged[-1] + 1)
        stored = witness.latest(log.origin).content
        assert len(open_checkpoint(stored, [log.key.verifier()], [witness.verifier]).cosigned)
        # It goes on from there, and still refuses to go back.
        assert witness.add(log.request(held, held + 5)).status_code == 200
        assert witness.add(log.request(0, held)).content == f"{held + 5}\n".encode()
        # A temporary file the kill may have left was swept at start.
        assert list(witness.state.glob("logs/*/.checkpoint.*")) == []
    finally:
        witness.stop()


def test_cosign_offline_shares_the_state_and_says_why_with_exit_codes(
    tmp_path: Path, log: TestLog
) -> None:
    witness = WitnessProcess(tmp_path / "w1", "witness.example.org/w1", log)  # not served
    state = str(witness.state)
    (tmp_path / "cp10").write_bytes(log.note(10))
    first = run_charter(
        "witness", "cosign", "--state", state, "--checkpoint", str(tmp_path / "cp10"),
        "--old", "0", env=witness.env,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("— witness.example.org/w1 ")
    opened = open_checkpoint(
        log.note(10) + first.stdout.encode(),
        [log.key.verifier()],
        [witness.verifier],
    )
    assert len(opened.cosigned) == 1

    def cosign(body: bytes) -> int:
        (tmp_path / "request").write_bytes(body)
        args = ["witness", "cosign", "--state", state, str(tmp_path / "request")]
        return run_charter(*args, env=witness.env).returncode

    assert cosign(log.request(0, 20)) == 3  # conflict: it holds 10
    proof = log.proof(10, 20)
    assert cosign(encode_request(10, [bytes(32), *proof[1:]], log.note(20))) == 4  # bad proof
    assert cosign(TestLog(origin="x.example/log").request(0, 1)) == 5  # unknown log
    assert cosign(b"garbage") == 1

    # The checkpoint-and-proof form: base64 hashes, one a line.
    (tmp_path / "cp20").write_bytes(log.note(20))
    (tmp_path / "proof").write_text("".join(f"{b64encode(h)}\n" for h in proof))
    done = run_charter(
        "witness", "cosign", "--state", state, "--checkpoint", str(tmp_path / "cp20"),
        "--old", "10", "--proof", str(tmp_path / "proof"), env=witness.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    shown = run_charter("witness", "show", "--state", state, env=witness.env)
    assert shown.returncode == 0, shown.stderr
    assert f"{log.origin}  size 20  root " in shown.stdout
