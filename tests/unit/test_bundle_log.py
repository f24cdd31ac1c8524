"""`charter-export/2`: the bundle's log proof verified offline (docs/transparency-log.md,
"Bundles").

A real chain (signed events) is logged beside other processes' entries in an in-memory
RFC 6962 tree; the checkpoint is signed by the log key and cosigned by a witness; the
bundle reaches the verifier as JSON text. Every tamper must be named by its code.
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from charter.audit.bundle import FORMAT, FORMAT_LOGGED, bundle_json
from charter.audit.bundle_log import BundleLog, BundleTrust
from charter.audit.evidence import CODES, VerificationReport
from charter.audit.verify_stored import verify_bundle, verify_bundle_log
from charter.core import ijson
from charter.core.clock import FakeClock
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonObject
from charter.tlog.checkpoint import Checkpoint, Cosigner, sign_checkpoint
from charter.tlog.entry import LogEntry, process_key
from charter.tlog.merkle import MemoryTree, prove_inclusion
from charter.tlog.note import Ed25519Signer, add_signatures, b64decode, b64encode
from charter.tlog.policy import Policy, parse_policy
from charter.tlog.proof import TlogProof, build_proof
from tests.unit.chains import Chain, family

KEY = SecretKey(bytes(range(32)))
SALT = bytes(range(32))
ORIGIN = "charter.test/prod"
LOG = Ed25519Signer.generate(ORIGIN)
CLOCK = FakeClock(datetime(2026, 12, 1, tzinfo=UTC))
W1 = Cosigner.generate("audit.test/w1", CLOCK)
WITNESSED = parse_policy(
    f"log {LOG.verifier().vkey}\nwitness w1 {W1.verifier().vkey}\ngroup g 1 w1\nquorum g\n"
)
NOW = datetime(2026, 12, 1, tzinfo=UTC)  # long after the chain's events were received


def _chain() -> Chain:
    parent, _, _ = family(KEY)
    return parent


def _entries(chain: Chain) -> list[LogEntry]:
    """Other processes' entries around the chain's events, as a busy log holds them."""
    other = process_key(SALT, "someone-else")
    mine = process_key(SALT, chain.process_id)
    entries = [LogEntry(other, seq, bytes([seq]) * 32) for seq in range(1, 6)]
    for event in chain.events:
        entries.append(LogEntry(mine, event.seq, bytes.fromhex(event.hash)))
        entries.append(LogEntry(other, 5 + event.seq, bytes([40 + event.seq]) * 32))
    return entries


def _note(tree: MemoryTree, *cosigners: Cosigner, root: bytes | None = None) -> bytes:
    checkpoint = Checkpoint(ORIGIN, tree.size, root or tree.root())
    return add_signatures(
        sign_checkpoint(checkpoint, LOG), [c.cosign(checkpoint) for c in cosigners]
    )


def _bundle(
    chain: Chain, *, seq: int | None = None, cosigners: tuple[Cosigner, ...] = (W1,)
) -> Any:
    """The chain's `charter-export/2` bundle proving its event at `seq` (default: head)."""
    entries = _entries(chain)
    tree = MemoryTree([e.leaf_hash() for e in entries])
    seq = seq or len(chain.events)
    key = process_key(SALT, chain.process_id)
    index = next(i for i, e in enumerate(entries) if e.process_key == key and e.seq == seq)
    proof = build_proof(
        index, prove_inclusion(index, tree.size, tree.read), _note(tree, *cosigners)
    )
    member = BundleLog(ORIGIN, key, seq, proof.encode(), len(chain.events) - seq)
    return _file(bundle_json(chain.evidence(), member.to_json()))


def _file(value: JsonObject) -> Any:
    return ijson.loads(json.dumps(value, ensure_ascii=False))


def _verify(
    bundle: Any, policy: Policy | None = WITNESSED, **trust: Any
) -> tuple[VerificationReport, JsonObject | None]:
    report = verify_bundle(bundle)
    return verify_bundle_log(bundle, report, BundleTrust(policy, **trust), NOW)


def _codes(report: VerificationReport) -> list[tuple[int | None, str]]:
    assert {p.code for p in report.problems} <= CODES
    return [(p.seq, p.code) for p in report.problems]


def _proof(bundle: Any) -> TlogProof:
    return TlogProof.parse(bundle["log"]["proof"])


def test_the_head_is_proven_in_a_witnessed_checkpoint() -> None:
    bundle = _bundle(_chain())
    assert bundle["format"] == FORMAT_LOGGED
    report, log = _verify(bundle, salt=SALT)
    assert report.ok, report.problems
    assert log is not None
    assert (log["proven"], log["seq"], log["unlogged"]) == (True, 3, 0)
    assert (log["checkpoint_size"], log["witnesses"]) == (11, ["w1"])
    assert log["completeness"] == "lower_bound_only"


def test_a_flipped_root_is_untrusted_and_a_signed_wrong_root_does_not_prove() -> None:
    bundle = _bundle(_chain())
    proof = _proof(bundle)
    body = proof.checkpoint.decode()
    root_text = body.split("\n")[2]
    flipped = bytearray(b64decode(root_text))
    flipped[0] ^= 1
    # Edited in the bundle: the log's signature no longer covers it.
    edited = copy.deepcopy(bundle)
    edited["log"]["proof"] = proof.encode().replace(root_text, b64encode(bytes(flipped)))
    report, _ = _verify(edited)
    assert _codes(report) == [(None, "checkpoint_untrusted")]
    # Signed and cosigned with that root (a lying log and witness): the path fails.
    size = int(body.split("\n")[1])
    tree = MemoryTree([e.leaf_hash() for e in _entries(_chain())])
    assert tree.size == size
    lying = build_proof(proof.index, proof.path, _note(tree, W1, root=bytes(flipped)))
    edited["log"]["proof"] = lying.encode()
    report, log = _verify(edited)
    assert _codes(report) == [(None, "log_proof_invalid")]
    assert log is not None
    assert log["proven"] is False


def test_a_flipped_audit_path_hash_is_log_proof_invalid() -> None:
    bundle = _bundle(_chain())
    proof = _proof(bundle)
    first = bytearray(proof.path[0])
    first[-1] ^= 0x80
    path = (bytes(first), *proof.path[1:])
    bundle["log"]["proof"] = build_proof(proof.index, path, proof.checkpoint).encode()
    report, _ = _verify(bundle)
    assert _codes(report) == [(None, "log_proof_invalid")]


def test_a_proof_of_another_seq_or_key_is_log_proof_invalid() -> None:
    bundle = _bundle(_chain())
    bundle["log"]["seq"] = 2
    assert _codes(_verify(bundle)[0]) == [(None, "log_proof_invalid")]
    bundle = _bundle(_chain())
    bundle["log"]["process_key"] = process_key(SALT, "someone-else").hex()
    assert _codes(_verify(bundle)[0]) == [(None, "log_proof_invalid")]


def test_a_missing_required_cosignature_is_checkpoint_untrusted() -> None:
    bundle = _bundle(_chain(), cosigners=())
    report, _ = _verify(bundle)
    assert _codes(report) == [(None, "checkpoint_untrusted")]
    assert "quorum" in report.problems[0].message
    # The same checkpoint under a policy without witnesses is enough.
    alone = parse_policy(f"log {LOG.verifier().vkey}\nquorum none\n")
    assert _verify(bundle, alone)[0].ok


def test_without_a_policy_a_proof_is_not_trusted() -> None:
    report, _ = _verify(_bundle(_chain()), None)
    assert _codes(report) == [(None, "checkpoint_untrusted")]


def test_the_salt_holder_checks_the_process_key() -> None:
    report, _ = _verify(_bundle(_chain()), salt=bytes(32))
    assert _codes(report) == [(None, "log_proof_invalid")]


def test_events_after_the_proven_one_are_unlogged_and_overdue_only_when_required() -> None:
    bundle = _bundle(_chain(), seq=2)
    report, log = _verify(bundle)
    assert report.ok
    assert log is not None
    assert (log["seq"], log["unlogged"]) == (2, 1)
    report, _ = _verify(bundle, require=True)
    assert _codes(report) == [(3, "not_logged")]
    # Within the grace period (received "now") an unlogged event is no problem yet.
    soon = datetime(2026, 6, 18, 10, 0, 5, tzinfo=UTC)
    trust = BundleTrust(WITNESSED, require=True)
    recent, _ = verify_bundle_log(bundle, verify_bundle(bundle), trust, soon)
    assert recent.ok


def test_a_bundle_without_a_log_still_verifies_and_is_not_logged_when_required() -> None:
    bundle = _file(bundle_json(_chain().evidence()))
    assert bundle["format"] == FORMAT
    assert "log" not in bundle
    report, log = _verify(bundle)
    assert (report.ok, log) == (True, None)
    report, _ = _verify(bundle, require=True)
    assert _codes(report) == [(None, "not_logged")]


def test_a_logged_deployment_with_nothing_logged_yet() -> None:
    chain = _chain()
    member = BundleLog(ORIGIN, None, 0, None, 3)
    bundle = _file(bundle_json(chain.evidence(), member.to_json()))
    report, log = _verify(bundle)
    assert report.ok
    assert log == {"origin": ORIGIN, "proven": False, "unlogged": 3}
    assert _codes(_verify(bundle, require=True)[0]) == [(None, "not_logged")]


@pytest.mark.parametrize(
    "member",
    [
        "proof",
        {"origin": ORIGIN, "process_key": None, "seq": 3, "proof": None, "unlogged": 0},
        {"origin": ORIGIN, "process_key": "AB" * 32, "seq": 3, "proof": "x", "unlogged": 0},
        {"origin": "", "process_key": None, "seq": 0, "proof": None, "unlogged": 0},
        {"origin": ORIGIN, "process_key": None, "seq": 0, "proof": None, "unlogged": -1},
    ],
)
def test_a_malformed_log_member_is_malformed_bundle(member: Any) -> None:
    bundle = _bundle(_chain())
    bundle["log"] = member
    assert _codes(_verify(bundle)[0]) == [(None, "malformed_bundle")]


def test_a_v2_bundle_must_say_its_log() -> None:
    bundle = _bundle(_chain())
    del bundle["log"]
    assert _codes(verify_bundle(bundle)) == [(None, "malformed_bundle")]


def test_a_trusted_checkpoint_of_the_same_size_with_another_root_is_equivocation(
    tmp_path: Path,
) -> None:
    bundle = _bundle(_chain())
    tree = MemoryTree([e.leaf_hash() for e in _entries(_chain())])
    other = hashlib.sha256(b"a fork").digest()
    latest = tmp_path / hashlib.sha256(ORIGIN.encode()).hexdigest() / "latest"
    latest.parent.mkdir(parents=True)
    latest.write_bytes(_note(tree, W1, root=other))
    report, _ = _verify(bundle, trust_dir=tmp_path)
    assert _codes(report) == [(None, "checkpoint_equivocation")]
    latest.write_bytes(_note(tree, W1))  # the same checkpoint: fine
    assert _verify(bundle, trust_dir=tmp_path)[0].ok


def test_a_witness_holding_another_root_at_the_bundles_size_is_equivocation() -> None:
    from charter.audit.bundle_log import compare_bundle_with_witness

    policy = parse_policy(f"log {LOG.verifier().vkey}\nquorum none\n")
    bundled = Checkpoint(ORIGIN, 5, bytes([1]) * 32)
    note = sign_checkpoint(bundled, LOG)
    same = compare_bundle_with_witness("https://w", note, policy, note)
    assert same is None
    later = sign_checkpoint(Checkpoint(ORIGIN, 9, bytes([2]) * 32), LOG)
    assert compare_bundle_with_witness("https://w", later, policy, note) is None
    fork = sign_checkpoint(Checkpoint(ORIGIN, 5, bytes([3]) * 32), LOG)
    problem = compare_bundle_with_witness("https://w", fork, policy, note)
    assert problem is not None
    assert problem.code == "checkpoint_equivocation"
    stranger = sign_checkpoint(bundled, Ed25519Signer.generate(ORIGIN))
    problem = compare_bundle_with_witness("https://w", stranger, policy, note)
    assert problem is not None
    assert problem.code == "checkpoint_untrusted"
