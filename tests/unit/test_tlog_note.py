"""C2SP signed notes against the published vectors (golang/mod sumdb/note, C2SP)."""

from __future__ import annotations

import pytest

from charter.core.errors.log import (
    AmbiguousKey,
    BadNoteSignature,
    MalformedKey,
    MalformedNote,
)
from charter.tlog.note import (
    Ed25519Signer,
    Ed25519Verifier,
    Signature,
    UnverifiedNote,
    add_signatures,
    open_note,
    parse_note,
    sign_note,
)

# golang/mod sumdb/note/note_test.go
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvq"
    "fqdngotpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWL"
    "ox33WWd1RvMc+QQ=\n"
)

# C2SP signed-note.md, "Example"
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mF"
    "XmRKuwHjG1Yu72IneyaQM=\n"
)


def test_go_secret_key_signs_the_published_note() -> None:
    signer = Ed25519Signer.from_skey(PETER_SKEY)
    assert signer.name == "PeterNeumann"
    assert signer.key_id == 0xC74F20A3
    assert signer.verifier().vkey == PETER_VKEY
    assert signer.skey == PETER_SKEY
    assert sign_note(TEXT, [signer]).decode() == TEXT + "\n" + PETER_SIG
    # An existing signature by the same key is replaced, not duplicated.
    stale = Signature("PeterNeumann", 0xC74F20A3, b"BAD")
    assert sign_note(TEXT, [signer], keep=[stale]).decode() == TEXT + "\n" + PETER_SIG
    assert "AYEKF" not in repr(signer)


def test_c2sp_example_verifies() -> None:
    verifier = Ed25519Verifier.from_vkey(C2SP_VKEY)
    opened = open_note(C2SP_NOTE.encode(), [verifier])
    assert opened.text == "This is an example message.\n"
    assert [s.name for s in opened.verified] == ["example.com/foo"]


def test_unknown_signatures_are_ignored_but_kept() -> None:
    peter = Ed25519Verifier.from_vkey(PETER_VKEY)
    enoch = Ed25519Verifier.from_vkey(ENOCH_VKEY)
    msg = (TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    one = open_note(msg, [peter])
    assert [s.name for s in one.verified] == ["PeterNeumann"]
    assert [(s.name, s.key_id) for s in one.unverified] == [("EnochRoot", 0xAF0CFE78)]
    both = open_note(msg, [peter, enoch])
    assert [s.name for s in both.verified] == ["PeterNeumann", "EnochRoot"]
    assert both.unverified == ()


def test_a_note_with_no_known_signature_is_refused() -> None:
    with pytest.raises(UnverifiedNote) as caught:
        open_note((TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode(), [])
    assert caught.value.code == "note_unverified"
    assert caught.value.note is not None
    assert len(caught.value.note.signatures) == 2


def test_a_bad_signature_from_a_known_key_rejects_the_note() -> None:
    peter = Ed25519Verifier.from_vkey(PETER_VKEY)
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(BadNoteSignature, match="PeterNeumann\\+c74f20a3"):
        open_note((TEXT + "\n" + bad).encode(), [peter])
    # The same signature for another text fails too.
    with pytest.raises(BadNoteSignature):
        open_note(("other\n\n" + PETER_SIG).encode(), [peter])


def test_duplicate_lines_count_once() -> None:
    peter = Ed25519Verifier.from_vkey(PETER_VKEY)
    msg = (TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG).encode()
    opened = open_note(msg, [peter])
    assert len(opened.verified) == 1
    assert len(opened.unverified) == 1


def test_a_repeated_line_of_a_known_key_is_verified_too() -> None:
    # signed-note: every line whose name and key ID match a known key is verified. A bad
    # copy after a good one must reject the note, not be skipped as a repeat.
    peter = Ed25519Verifier.from_vkey(PETER_VKEY)
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(BadNoteSignature, match="PeterNeumann\\+c74f20a3"):
        open_note((TEXT + "\n" + PETER_SIG + bad).encode(), [peter])
    # An unknown key's lines stay ignored, repeated or not.
    open_note(
        (TEXT + "\n" + PETER_SIG + ENOCH_SIG + ENOCH_SIG[:60] + "A" + ENOCH_SIG[61:]).encode(),
        [peter],
    )


def test_ambiguous_known_keys_are_an_error_only_when_used() -> None:
    peter = Ed25519Verifier.from_vkey(PETER_VKEY)
    enoch = Ed25519Verifier.from_vkey(ENOCH_VKEY)
    with pytest.raises(AmbiguousKey):
        open_note((TEXT + "\n" + ENOCH_SIG).encode(), [enoch, peter, enoch])
    open_note((TEXT + "\n" + PETER_SIG).encode(), [enoch, peter, enoch])


def test_more_than_100_signatures_is_malformed() -> None:
    peter = Ed25519Verifier.from_vkey(PETER_VKEY)
    open_note((TEXT + "\n" + PETER_SIG * 100).encode(), [peter])
    with pytest.raises(MalformedNote):
        open_note((TEXT + "\n" + PETER_SIG * 101).encode(), [peter])
    with pytest.raises(MalformedNote):
        open_note((TEXT + "\n" + PETER_SIG * 101).encode(), [])


@pytest.mark.parametrize(
    "msg",
    [
        TEXT.encode(),
        (TEXT + "\n").encode(),
        (TEXT + "\n" + PETER_SIG[:-1]).encode(),
        ("\x01" + TEXT + "\n" + PETER_SIG).encode(),
        b"\xff" + (TEXT + "\n" + PETER_SIG).encode(),
        (TEXT + "\n" + "— Bad Name " + PETER_SIG.split(" ")[2]).encode(),
        (TEXT + "\n" + PETER_SIG + "Unexpected line.\n").encode(),
        (TEXT + "\n" + "— PeterNeumann AAAA\n").encode(),  # shorter than id + 1 byte
        (TEXT + "\n" + "— PeterNeumann not*base64\n").encode(),
        (TEXT + "\n" + "— PeterNeumann\n").encode(),
        (TEXT + "\r\n" + PETER_SIG).encode(),
    ],
)
def test_malformed_notes_are_refused(msg: bytes) -> None:
    peter = Ed25519Verifier.from_vkey(PETER_VKEY)
    with pytest.raises(MalformedNote):
        open_note(msg, [peter])


def test_every_mangled_vkey_is_refused() -> None:
    # As Go's TestNewVerifier: every proper substring and every single-byte change fails.
    key = PETER_VKEY
    for i in range(len(key) + 1):
        for j in range(i + 1, len(key) + 1):
            if (i, j) != (0, len(key)):
                with pytest.raises(MalformedKey):
                    Ed25519Verifier.from_vkey(key[i:j])
    for i in range(len(key)):
        mangled = key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :]
        with pytest.raises(MalformedKey):
            Ed25519Verifier.from_vkey(mangled)
    # Go's adjusted-hash cases: a wrong-length key and an unknown algorithm.
    with pytest.raises(MalformedKey):
        Ed25519Verifier.from_vkey(
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=="
        )
    with pytest.raises(MalformedKey):
        Ed25519Verifier.from_vkey(
            "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
        )


def test_every_mangled_secret_key_is_refused() -> None:
    key = PETER_SKEY
    for i in range(len(key) + 1):
        for j in range(i + 1, len(key) + 1):
            if (i, j) != (0, len(key)):
                with pytest.raises(MalformedKey):
                    Ed25519Signer.from_skey(key[i:j])
    for i in range(len(key)):
        mangled = key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :]
        with pytest.raises(MalformedKey):
            Ed25519Signer.from_skey(mangled)


def test_generated_keys_round_trip() -> None:
    signer = Ed25519Signer.generate("charter.example.com/prod")
    again = Ed25519Signer.from_skey(signer.skey)
    verifier = Ed25519Verifier.from_vkey(signer.verifier().vkey)
    assert again.verifier() == verifier
    note = sign_note("hello\n", [again])
    assert open_note(note, [verifier]).verified[0].key_id == signer.key_id
    with pytest.raises(MalformedKey):
        Ed25519Signer.generate("has space")
    with pytest.raises(MalformedKey):
        Ed25519Signer.generate("a+b")


def test_sign_refuses_bad_texts() -> None:
    signer = Ed25519Signer.from_skey(PETER_SKEY)
    with pytest.raises(MalformedNote):
        sign_note("abc", [signer])
    with pytest.raises(MalformedNote):
        sign_note("a\x00b\n", [signer])
    with pytest.raises(MalformedNote):
        sign_note(TEXT, [])


def test_add_signatures_appends_lines() -> None:
    peter = Ed25519Signer.from_skey(PETER_SKEY)
    enoch = parse_note((TEXT + "\n" + ENOCH_SIG).encode()).signatures[0]
    signed = add_signatures(sign_note(TEXT, [peter]), [enoch])
    assert signed.decode() == TEXT + "\n" + PETER_SIG + ENOCH_SIG
    assert add_signatures(signed, [enoch]) == signed
