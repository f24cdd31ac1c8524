"""tlog-checkpoint bodies and tlog-cosignature v1, with the C2SP examples."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from charter.core.clock import FakeClock
from charter.core.errors.log import (
    BadNoteSignature,
    CheckpointUntrusted,
    MalformedCheckpoint,
    MalformedKey,
)
from charter.tlog.checkpoint import (
    COSIGNATURE_V1,
    Checkpoint,
    CosignatureVerifier,
    Cosigner,
    cosignature_message,
    cosignature_time,
    open_checkpoint,
    sign_checkpoint,
)
from charter.tlog.merkle import EMPTY_ROOT
from charter.tlog.note import (
    Ed25519Signer,
    UnverifiedNote,
    add_signatures,
    key_id,
    parse_note,
    sign_note,
)

# C2SP tlog-cosignature.md: the example checkpoint with one witness cosignature.
EXAMPLE_BODY = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)
EXAMPLE_NOTE = (
    EXAMPLE_BODY + "\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/"
    "Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJs"
    "X3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_the_c2sp_example_parses() -> None:
    note = parse_note(EXAMPLE_NOTE.encode())
    checkpoint = Checkpoint.parse(note.text)
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert checkpoint.root == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert checkpoint.body() == EXAMPLE_BODY
    log_sig, witness_sig = note.signatures
    assert len(log_sig.signature) == 64
    # The cosignature is 8-byte timestamp ‖ 64-byte signature; its time is the C2SP
    # example message's time line.
    assert len(witness_sig.signature) == 72
    assert cosignature_time(witness_sig) == 1679315147
    assert cosignature_message(EXAMPLE_BODY, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
        b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )


def test_extension_lines_from_other_logs_are_preserved() -> None:
    text = EXAMPLE_BODY + "ext one\next two\n"
    checkpoint = Checkpoint.parse(text)
    assert checkpoint.extensions == ("ext one", "ext two")
    assert checkpoint.body() == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "origin\n1\n",
        "origin\n1\n" + base64.b64encode(EMPTY_ROOT).decode(),  # no final newline
        "origin\n01\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n",
        "origin\n-1\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n",
        "origin\n+1\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n",
        f"origin\n{2**64}\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n",
        "origin\n1\n" + base64.b64encode(EMPTY_ROOT[:31]).decode() + "\n",
        "origin\n1\nnot base64\n",
        "\n1\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n",
        "origin\n1\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n\n",  # empty extension
    ],
)
def test_malformed_checkpoints_are_refused(text: str) -> None:
    with pytest.raises(MalformedCheckpoint):
        Checkpoint.parse(text)


def test_log_signs_and_witness_cosigns() -> None:
    log = Ed25519Signer.generate("charter.example.com/prod")
    witness = Cosigner.generate("audit.example.org/w1", FakeClock(T0))
    checkpoint = Checkpoint("charter.example.com/prod", 0, EMPTY_ROOT)
    signed = sign_checkpoint(checkpoint, log)
    assert signed.decode().startswith(
        "charter.example.com/prod\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n— "
    )
    cosigned = add_signatures(signed, [witness.cosign(checkpoint)])
    opened = open_checkpoint(cosigned, [log.verifier()], [witness.verifier()])
    assert opened.checkpoint == checkpoint
    assert opened.cosigned == {("audit.example.org/w1", witness.key_id): int(T0.timestamp())}
    # Without the witness key the cosignature is simply unknown.
    assert open_checkpoint(cosigned, [log.verifier()]).cosigned == {}


def test_cosignature_key_id_uses_type_4() -> None:
    witness = Cosigner.generate("audit.example.org/w1")
    verifier = witness.verifier()
    assert verifier.key_id == key_id(
        "audit.example.org/w1", bytes([COSIGNATURE_V1]) + verifier.public_key
    )
    assert CosignatureVerifier.from_vkey(verifier.vkey) == verifier
    assert base64.b64decode(verifier.vkey.split("+", 2)[2])[0] == 0x04
    assert Cosigner.from_skey(witness.skey).verifier() == verifier
    with pytest.raises(MalformedKey):
        Ed25519Signer.from_skey(witness.skey)
    with pytest.raises(MalformedKey):
        CosignatureVerifier.from_vkey(Ed25519Signer.generate("x").verifier().vkey)


def test_a_cosignature_is_bound_to_its_time_and_body() -> None:
    witness = Cosigner.generate("w", FakeClock(T0))
    verifier = witness.verifier()
    body = Checkpoint("o", 1, EMPTY_ROOT).body().encode()
    sig = witness.sign(body)
    assert verifier.verify(body, sig)
    later = (int.from_bytes(sig[:8], "big") + 1).to_bytes(8, "big") + sig[8:]
    assert not verifier.verify(body, later)
    assert not verifier.verify(Checkpoint("o", 2, EMPTY_ROOT).body().encode(), sig)
    assert not verifier.verify(body, sig[:-1])
    # A plain Ed25519 signature over the body is not a cosignature.
    with pytest.raises(MalformedCheckpoint):
        witness.sign(b"not a checkpoint\n")


def test_a_checkpoint_needs_the_log_signature() -> None:
    log = Ed25519Signer.generate("charter.example.com/prod")
    impostor = Ed25519Signer.generate("charter.example.com/other")
    witness = Cosigner.generate("w1")
    checkpoint = Checkpoint("charter.example.com/prod", 0, EMPTY_ROOT)
    only_witness = (checkpoint.body() + "\n" + witness.cosign(checkpoint).line()).encode()
    with pytest.raises(CheckpointUntrusted):
        open_checkpoint(only_witness, [log.verifier()], [witness.verifier()])
    with pytest.raises(UnverifiedNote):
        open_checkpoint(only_witness, [log.verifier()])
    # A key whose name is not the origin does not count as the log's.
    wrong_name = sign_note(checkpoint.body(), [impostor])
    with pytest.raises(CheckpointUntrusted):
        open_checkpoint(wrong_name, [impostor.verifier()])
    with pytest.raises(MalformedCheckpoint):
        sign_checkpoint(checkpoint, impostor)
    with pytest.raises(MalformedCheckpoint):
        sign_checkpoint(Checkpoint("charter.example.com/prod", 0, EMPTY_ROOT, ("x",)), log)


def test_a_forged_cosignature_rejects_the_checkpoint() -> None:
    log = Ed25519Signer.generate("o")
    witness = Cosigner.generate("w1")
    checkpoint = Checkpoint("o", 3, EMPTY_ROOT)
    line = witness.cosign(checkpoint)
    forged = type(line)(
        line.name, line.key_id, line.signature[:-1] + bytes([line.signature[-1] ^ 1])
    )
    note = add_signatures(sign_checkpoint(checkpoint, log), [forged])
    with pytest.raises(BadNoteSignature):
        open_checkpoint(note, [log.verifier()], [witness.verifier()])
