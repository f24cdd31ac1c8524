"""tlog-proof@v1: the C2SP example's layout, and offline verification against a policy."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from charter.core.clock import FakeClock
from charter.core.errors.log import CheckpointUntrusted, LogProofInvalid, MalformedProof
from charter.tlog.checkpoint import Checkpoint, Cosigner, sign_checkpoint
from charter.tlog.entry import LogEntry
from charter.tlog.merkle import MemoryTree, prove_inclusion
from charter.tlog.note import Ed25519Signer, add_signatures, parse_note, sign_note
from charter.tlog.policy import parse_policy
from charter.tlog.proof import TlogProof, build_proof, verify_proof

# C2SP tlog-proof.md example (its signatures are elided, so only the layout is checked).
EXAMPLE = """c2sp.org/tlog-proof@v1
extra YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ
index 73894
gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=
B95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=
EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs=
RoopEkOdqkYqMB4MJXrbt/hMjOxsVn0IrWjpz1ZMMes=
AHCioX9nLjsrse6YhjRRmk1WUEirVOLLRoOQ6vfO5vk=

example.com/fancylog
109482
sFodV/vSp5O8n9a8QpW6PRY97tfOSW5bsc2Xl/EQi08=

— example.com/fancylog hI2DJw[...]1roloI=
— witness1.example mJirIklj[...]qY9v2B/5bg==
"""

CLOCK = FakeClock(datetime(2026, 12, 1, tzinfo=UTC))
ORIGIN = "charter.example.com/prod"
LOG = Ed25519Signer.generate(ORIGIN)
W1 = Cosigner.generate("audit.example.org/w1", CLOCK)
W2 = Cosigner.generate("ops2.example.net/w2", CLOCK)
POLICY = parse_policy(
    f"log {LOG.verifier().vkey} https://charter.example.com/v1/log/\n"
    f"witness w1 {W1.verifier().vkey} https://audit.example.org/witness\n"
    f"witness w2 {W2.verifier().vkey}\n"
    "group auditors any w1 w2\n"
    "quorum auditors\n"
)
ENTRIES = [LogEntry(bytes([i % 7]) * 32, i + 1, bytes([i]) * 32) for i in range(21)]
TREE = MemoryTree([e.leaf_hash() for e in ENTRIES])


def _checkpoint(*cosigners: Cosigner) -> bytes:
    checkpoint = Checkpoint(ORIGIN, TREE.size, TREE.root())
    return add_signatures(
        sign_checkpoint(checkpoint, LOG), [c.cosign(checkpoint) for c in cosigners]
    )


def test_the_c2sp_example_layout_parses_and_round_trips() -> None:
    proof = TlogProof.parse(EXAMPLE)
    assert proof.index == 73894
    assert len(proof.path) == 5
    assert proof.extra is not None
    assert proof.checkpoint.startswith(b"example.com/fancylog\n109482\n")
    assert proof.encode() == EXAMPLE


def test_a_proof_verifies_offline() -> None:
    proof = build_proof(13, prove_inclusion(13, TREE.size, TREE.read), _checkpoint(W2))
    text = proof.encode()
    assert text.startswith("c2sp.org/tlog-proof@v1\nindex 13\n")
    again = TlogProof.parse(text)
    assert again == proof
    trusted = verify_proof(again, ENTRIES[13].leaf_hash(), POLICY)
    assert trusted.witnesses == ("w2",)
    assert trusted.checkpoint.size == 21


def test_a_wrong_leaf_or_flipped_root_is_log_proof_invalid() -> None:
    proof = build_proof(13, prove_inclusion(13, TREE.size, TREE.read), _checkpoint(W1))
    with pytest.raises(LogProofInvalid):
        verify_proof(proof, ENTRIES[12].leaf_hash(), POLICY)
    # A checkpoint with a flipped root, validly signed and cosigned, still fails the path.
    root = bytearray(TREE.root())
    root[0] ^= 1
    flipped = Checkpoint(ORIGIN, TREE.size, bytes(root))
    note = add_signatures(sign_checkpoint(flipped, LOG), [W1.cosign(flipped)])
    with pytest.raises(LogProofInvalid):
        verify_proof(build_proof(13, proof.path, note), ENTRIES[13].leaf_hash(), POLICY)


def test_a_dropped_cosignature_is_checkpoint_untrusted() -> None:
    note = _checkpoint(W1)
    parsed = parse_note(note)
    stripped = sign_note(parsed.text, [], keep=parsed.signatures[:1])
    proof = build_proof(0, prove_inclusion(0, TREE.size, TREE.read), stripped)
    with pytest.raises(CheckpointUntrusted) as caught:
        verify_proof(proof, ENTRIES[0].leaf_hash(), POLICY)
    assert caught.value.code == "checkpoint_untrusted"


def test_a_tampered_checkpoint_text_is_checkpoint_untrusted() -> None:
    proof = build_proof(0, prove_inclusion(0, TREE.size, TREE.read), _checkpoint(W1))
    tampered = proof.encode().replace(f"\n{TREE.size}\n", f"\n{TREE.size + 1}\n")
    with pytest.raises(CheckpointUntrusted):
        verify_proof(TlogProof.parse(tampered), ENTRIES[0].leaf_hash(), POLICY)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "c2sp.org/tlog-proof@v2\nindex 0\n\ncp\n",
        "c2sp.org/tlog-proof@v1\n\ncp\n",
        "c2sp.org/tlog-proof@v1\nindex 01\n\ncp\n",
        "c2sp.org/tlog-proof@v1\nindex -1\n\ncp\n",
        "c2sp.org/tlog-proof@v1\nindex 0\nnot base64\n\ncp\n",
        "c2sp.org/tlog-proof@v1\nindex 0\n" + base64.b64encode(b"short").decode() + "\n\ncp\n",
        "c2sp.org/tlog-proof@v1\nextra !!\nindex 0\n\ncp\n",
        "c2sp.org/tlog-proof@v1\nindex 0\ncp\n",
        f"c2sp.org/tlog-proof@v1\nindex {2**64}\n\ncp\n",
        # Beyond int()'s 4,300-digit limit: refused by length, not a ValueError.
        "c2sp.org/tlog-proof@v1\nindex " + "9" * 5000 + "\n\ncp\n",
    ],
)
def test_malformed_proofs_are_refused(text: str) -> None:
    with pytest.raises(MalformedProof):
        TlogProof.parse(text)


def test_a_checkpoint_that_is_not_utf8_is_malformed() -> None:
    with pytest.raises(MalformedProof):
        build_proof(0, [], b"\xff\n")
