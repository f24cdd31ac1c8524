"""add-checkpoint without HTTP: every check of tlog-witness, the state and the evidence."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from charter.core.errors import CharterError
from charter.core.errors.log import CheckpointUntrusted, LogProofInvalid, MalformedNote
from charter.tlog.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from charter.tlog.merkle import EMPTY_ROOT
from charter.tlog.note import Ed25519Signer, add_signatures, sign_note
from charter.tlog.witness_protocol import MalformedWitnessRequest, encode_request
from charter.witness.errors import CheckpointEquivocation, SizeConflict, UnknownLog
from charter.witness.state import WitnessState
from tests.unit.witnesskit import TestLog, make_witness


@pytest.fixture
def log() -> TestLog:
    return TestLog()


def _evidence(directory: Path) -> list[dict[str, object]]:
    files = sorted((directory / "refused").glob("*/*.json"))
    return [json.loads(p.read_text()) for p in files]


def test_first_checkpoint_is_cosigned_and_persisted(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    cosigned = witness.add_checkpoint(log.request(0, 10))
    line = cosigned.response().decode()
    assert line.startswith("— witness.example.org/w1 ")
    assert line.endswith("\n")
    # The answer verifies as a cosignature of the checkpoint under the witness's vkey.
    opened = open_checkpoint(
        add_signatures(log.note(10), [cosigned.signature]),
        [log.key.verifier()],
        [witness.cosigner.verifier()],
    )
    assert list(opened.cosigned) == [("witness.example.org/w1", witness.cosigner.key_id)]
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert latest.checkpoint == log.checkpoint(10)
    assert (
        latest.cosigned_at == opened.cosigned[("witness.example.org/w1", witness.cosigner.key_id)]
    )
    # The stored note carries the log's signature and this witness's cosignature.
    again = open_checkpoint(latest.note, [log.key.verifier()], [witness.cosigner.verifier()])
    assert len(again.cosigned) == 1


def test_growth_with_a_consistency_proof(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 10))
    for old, new in [(10, 11), (11, 64), (64, 64), (64, 200)]:
        witness.add_checkpoint(log.request(old, new))
        latest = witness.state.latest(log.origin)
        assert latest is not None
        assert latest.checkpoint.size == new


def test_state_survives_a_new_witness_object(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 7))
    reopened = WitnessState(tmp_path)
    latest = reopened.latest(log.origin)
    assert latest is not None
    assert latest.checkpoint.size == 7


def test_a_wrong_old_size_is_a_409_with_the_held_size(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    with pytest.raises(SizeConflict) as never:
        witness.add_checkpoint(log.request(5, 10))
    assert never.value.latest_size == 0
    assert never.value.http_status == 409
    witness.add_checkpoint(log.request(0, 10))
    with pytest.raises(SizeConflict) as behind:
        witness.add_checkpoint(log.request(0, 20))
    assert behind.value.latest_size == 10
    assert _evidence(tmp_path) == []  # a client that guessed wrong is no misbehaviour


def test_unknown_origin_is_404_and_unknown_key_is_403(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    stranger = TestLog(origin="other.example.com/log")
    with pytest.raises(UnknownLog) as unknown:
        witness.add_checkpoint(stranger.request(0, 3))
    assert unknown.value.http_status == 404
    impostor = TestLog(key=Ed25519Signer.generate(log.origin))  # same origin, another key
    with pytest.raises(CheckpointUntrusted) as untrusted:
        witness.add_checkpoint(impostor.request(0, 3))
    assert untrusted.value.http_status == 403
    assert witness.state.latest(log.origin) is None


def test_a_bad_signature_by_the_known_key_is_403(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    note = log.note(3)
    body, sig = note.rsplit(b" ", 1)
    flipped = body + b" " + (b"B" if sig[:1] == b"A" else b"A") + sig[1:]
    with pytest.raises(CheckpointUntrusted):
        witness.add_checkpoint(encode_request(0, [], flipped))


def test_rotation_any_known_key_of_the_origin_is_accepted(tmp_path: Path, log: TestLog) -> None:
    rotated = TestLog(key=Ed25519Signer.generate(log.origin))
    witness = make_witness(tmp_path, log, rotated)
    witness.add_checkpoint(log.request(0, 3))
    # The same tree signed by the new key only: still the known log.
    witness.add_checkpoint(encode_request(3, [], _resign(log, rotated, 3)))
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert rotated.key.name.encode() in latest.note


def _resign(log: TestLog, other: TestLog, size: int) -> bytes:
    """The same checkpoint signed by another key of the same origin."""
    return sign_checkpoint(log.checkpoint(size), other.key)


def test_old_larger_than_the_checkpoint_is_400(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    with pytest.raises(MalformedWitnessRequest) as error:
        witness.add_checkpoint(encode_request(11, [], log.note(10)))
    assert error.value.http_status == 400


@pytest.mark.parametrize(
    "note",
    [
        b"charter.example.com/test\n1\n",  # no signatures
        "charter.example.com/test\n01\nAAAA\n\n— x AAAAAAA=\n".encode(),
    ],
)
def test_a_malformed_note_is_400(tmp_path: Path, log: TestLog, note: bytes) -> None:
    witness = make_witness(tmp_path, log)
    with pytest.raises(CharterError) as error:
        witness.add_checkpoint(b"old 0\n\n" + note)
    assert error.value.http_status == 400
    assert isinstance(error.value, MalformedNote) or error.value.code.endswith("malformed")


def test_a_bad_consistency_proof_is_422_with_evidence(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 10))
    proof = log.proof(10, 20)
    proof[0] = bytes(32)
    with pytest.raises(LogProofInvalid) as error:
        witness.add_checkpoint(encode_request(10, proof, log.note(20)))
    assert error.value.http_status == 422
    [evidence] = _evidence(tmp_path)
    assert evidence["reason"] == "inconsistent"
    assert evidence["old_size"] == 10
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert latest.checkpoint.size == 10


def test_a_fork_is_refused_with_evidence(tmp_path: Path, log: TestLog) -> None:
    """A log that forked after size 10 (same key, other leaves) cannot prove consistency."""
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 10))
    fork = TestLog(seed="fork", key=log.key)
    with pytest.raises(LogProofInvalid):
        witness.add_checkpoint(fork.request(10, 20))
    assert [e["reason"] for e in _evidence(tmp_path)] == ["inconsistent"]


def test_equivocation_same_size_other_root(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 10))
    fork = TestLog(seed="fork", key=log.key)
    with pytest.raises(CheckpointEquivocation) as error:
        witness.add_checkpoint(fork.request(10, 10))
    assert error.value.http_status == 422
    # The same fork offered with a wrong old size is a 409, and still evidence.
    with pytest.raises(SizeConflict):
        witness.add_checkpoint(encode_request(0, [], fork.note(10)))
    reasons = sorted(str(e["reason"]) for e in _evidence(tmp_path))
    assert reasons == ["equivocation", "equivocation"]
    [first, _] = _evidence(tmp_path)
    assert log.note(10).split(b"\n\n")[0].decode() in str(first["latest"])
    assert fork.note(10).decode() == first["submitted"]


def test_rollback_is_409_with_evidence_once(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 20))
    for _ in range(3):  # the same refused request is recorded once
        with pytest.raises(SizeConflict) as error:
            witness.add_checkpoint(log.request(0, 15))
        assert error.value.latest_size == 20
    [evidence] = _evidence(tmp_path)
    assert evidence["reason"] == "rollback"
    assert evidence["origin"] == log.origin
    assert str(evidence["submitted"]).startswith(f"{log.origin}\n15\n")
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert latest.checkpoint.size == 20


def test_size_zero_rules(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 0))  # the empty tree, cosigned
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert latest.checkpoint.root == EMPTY_ROOT
    bogus = sign_checkpoint(Checkpoint(log.origin, 0, bytes(32)), log.key)
    with pytest.raises(LogProofInvalid):
        witness.add_checkpoint(encode_request(0, [], bogus))
    with pytest.raises(LogProofInvalid):  # from size 0 no proof may be sent
        witness.add_checkpoint(encode_request(0, [bytes(32)], log.note(5)))


def test_the_witness_signs_only_what_the_log_signed(tmp_path: Path, log: TestLog) -> None:
    """Extra unknown signatures are ignored and not kept in the stored note."""
    witness = make_witness(tmp_path, log)
    other = Ed25519Signer.generate("someone.example/else")
    note = sign_note(log.checkpoint(4).body(), [log.key, other])
    witness.add_checkpoint(encode_request(0, [], note))
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert b"someone.example/else" not in latest.note


def test_concurrent_threads_never_roll_the_size_back(tmp_path: Path, log: TestLog) -> None:
    """The race tlog-witness describes: requests from many old sizes at once, each retried
    from the size a 409 reports, as a log would."""
    witness = make_witness(tmp_path, log)
    sizes_seen: list[int] = []
    lock = threading.Lock()

    def submit(target: int) -> None:
        old = 0
        for _ in range(60):
            try:
                witness.add_checkpoint(log.request(old, target))
                with lock:
                    sizes_seen.append(target)
                return
            except SizeConflict as conflict:
                if conflict.latest_size > target:
                    return  # the witness is ahead of this (stale) checkpoint
                old = conflict.latest_size
        raise AssertionError("no progress")

    observed: list[int] = []
    done = threading.Event()

    def watch() -> None:  # what a monitor reading the state would see, in order
        while not done.is_set():
            held = witness.state.latest(log.origin)
            observed.append(held.checkpoint.size if held else 0)

    targets = [(i * 7) % 50 + 1 for i in range(40)]
    threads = [threading.Thread(target=submit, args=(t,)) for t in targets]
    watcher = threading.Thread(target=watch)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    assert observed == sorted(observed)
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert latest.checkpoint.size == max(targets) == max(sizes_seen)


def test_sweep_removes_what_a_crash_left_and_nothing_else(tmp_path: Path, log: TestLog) -> None:
    witness = make_witness(tmp_path, log)
    witness.add_checkpoint(log.request(0, 5))
    with pytest.raises(SizeConflict):
        witness.add_checkpoint(log.request(0, 3))  # one evidence file
    [folder] = (tmp_path / "logs").iterdir()
    (folder / ".checkpoint.abc123").write_bytes(b"half a note")
    (tmp_path / "refused" / folder.name / ".rollback-0011.json.x1y2").write_bytes(b"{")
    assert witness.state.sweep_temporaries() == 2
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint", "lock"]
    assert len(witness.state.evidence_files()) == 1
    latest = witness.state.latest(log.origin)
    assert latest is not None
    assert latest.checkpoint.size == 5
