"""The tlog-witness wire texts: add-checkpoint bodies, 409 size bodies, monitoring paths."""

from __future__ import annotations

import hashlib

import pytest

from charter.tlog.note import b64encode
from charter.tlog.witness_protocol import (
    AddCheckpoint,
    MalformedWitnessRequest,
    checkpoint_path,
    parse_size_body,
    size_body,
)

# The request example of tlog-witness.md, verbatim.
SPEC_EXAMPLE = (
    b"old 20852014\n"
    b"PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"
    b"jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n"
    b"5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n"
    b"/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n"
    b"\n"
    b"example.com/behind-the-sofa\n"
    b"20852163\n"
    b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    b"\n"
    + (
        "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5"
        "/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    ).encode()
)


def test_the_spec_example_parses_and_reencodes_byte_for_byte() -> None:
    request = AddCheckpoint.parse(SPEC_EXAMPLE)
    assert request.old_size == 20852014
    assert len(request.proof) == 4
    assert b64encode(request.proof[0]) == "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw="
    assert request.note.startswith(b"example.com/behind-the-sofa\n20852163\n")
    assert request.encode() == SPEC_EXAMPLE


def test_a_request_without_proof_lines() -> None:
    body = b"old 0\n\nexample.com/log\n1\n" + b"A" * 43 + b"=\n\n- sig\n"
    request = AddCheckpoint.parse(body)
    assert (request.old_size, request.proof) == (0, ())
    assert request.encode() == body


HASH = b"PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"old 5\n",  # no empty line
        b"old 05\n\nnote\n",  # leading zero
        b"old -1\n\nnote\n",
        b"old 1 \n\nnote\n",
        b"Old 1\n\nnote\n",
        b"old  1\n\nnote\n",
        b"old 18446744073709551616\n\nnote\n",  # 2**64
        b"old 1\r\n\r\nnote\n",
        b"old 1\n" + HASH[:-2] + b"\n\nnote\n",  # truncated base64
        b"old 1\nAAAA\n\nnote\n",  # base64 of 3 bytes, not a hash
        b"old 1\n" + HASH * 64 + b"\nnote\n",  # 64 proof lines > 63
        "old \u0661\n\nnote\n".encode(),  # a non-ASCII digit
    ],
)
def test_malformed_requests_are_refused(body: bytes) -> None:
    with pytest.raises(MalformedWitnessRequest):
        AddCheckpoint.parse(body)


def test_sixty_three_proof_lines_are_allowed() -> None:
    request = AddCheckpoint.parse(b"old 1\n" + HASH * 63 + b"\nnote\n")
    assert len(request.proof) == 63


def test_size_bodies() -> None:
    assert size_body(20852163) == b"20852163\n"
    assert parse_size_body(b"0\n") == 0
    for bad in (b"12", b"012\n", b"12\n\n", b" 12\n", b"x\n"):
        with pytest.raises(MalformedWitnessRequest):
            parse_size_body(bad)


def test_the_monitoring_path_is_the_lowercase_hex_sha256_of_the_origin() -> None:
    digest = hashlib.sha256(b"example.com/behind-the-sofa").hexdigest()
    assert checkpoint_path("example.com/behind-the-sofa") == f"{digest}/checkpoint"
    assert digest == digest.lower()
