"""tlog-policy parsing and quorum decisions, and policy checks of cosigned checkpoints."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from charter.core.clock import FakeClock
from charter.core.errors.log import CheckpointUntrusted, MalformedPolicy
from charter.tlog.checkpoint import Checkpoint, Cosigner, sign_checkpoint
from charter.tlog.merkle import EMPTY_ROOT
from charter.tlog.note import Ed25519Signer, add_signatures
from charter.tlog.policy import NONE, parse_policy

CLOCK = FakeClock(datetime(2026, 12, 1, tzinfo=UTC))
LOG = Ed25519Signer.generate("charter.example.com/prod")
W = {n: Cosigner.generate(f"{n.lower()}.example.org/w", CLOCK) for n in ("X1", "X2", "X3", "Y1")}


def _vkey(name: str) -> str:
    return W[name].verifier().vkey


# The shape of the C2SP tlog-policy.md example, with real keys.
EXAMPLE = f"""
# comment
log {LOG.verifier().vkey}

witness X1 {_vkey("X1")}
witness X2 {_vkey("X2")}\thttps://x2.example.org/witness
  witness X3 {_vkey("X3")}
group X-witnesses 2 X1 X2 X3

witness Y1 {_vkey("Y1")}
group Y-witnesses any Y1

group X-and-Y all X-witnesses Y-witnesses
quorum X-and-Y
"""


def test_the_example_policy_parses() -> None:
    policy = parse_policy(EXAMPLE)
    assert [log.verifier for log in policy.logs] == [LOG.verifier()]
    assert set(policy.witnesses) == {"X1", "X2", "X3", "Y1"}
    assert policy.witnesses["X2"].url == "https://x2.example.org/witness"
    assert policy.groups["X-witnesses"].threshold == 2
    assert policy.groups["X-and-Y"].threshold == 2
    assert policy.quorum == "X-and-Y"


@pytest.mark.parametrize(
    ("cosigned", "ok"),
    [
        ((), False),
        (("X1", "X2"), False),
        (("X1", "Y1"), False),
        (("X1", "X2", "Y1"), True),
        (("X1", "X3", "Y1"), True),
        (("X1", "X2", "X3", "Y1"), True),
    ],
)
def test_quorum_decisions(cosigned: tuple[str, ...], ok: bool) -> None:
    assert parse_policy(EXAMPLE).satisfied(cosigned) is ok


def test_quorum_none_and_single_witness() -> None:
    assert parse_policy("quorum none\n").satisfied(()) is True
    assert parse_policy("quorum none\n").quorum == NONE
    single = parse_policy(f"witness X1 {_vkey('X1')}\nquorum X1\n")
    assert single.satisfied(("X1",))
    assert not single.satisfied(())


def _cosigned(size: int, *names: str) -> bytes:
    checkpoint = Checkpoint("charter.example.com/prod", size, EMPTY_ROOT)
    return add_signatures(
        sign_checkpoint(checkpoint, LOG), [W[n].cosign(checkpoint) for n in names]
    )


def test_verify_checkpoint_against_the_policy() -> None:
    policy = parse_policy(EXAMPLE)
    trusted = policy.verify_checkpoint(_cosigned(0, "X1", "X3", "Y1"))
    assert trusted.witnesses == ("X1", "X3", "Y1")
    assert trusted.checkpoint.size == 0
    with pytest.raises(CheckpointUntrusted, match="quorum X-and-Y is not met"):
        policy.verify_checkpoint(_cosigned(0, "X1", "Y1"))


def test_a_checkpoint_from_an_unknown_log_is_untrusted() -> None:
    other = Ed25519Signer.generate("charter.example.com/prod")
    checkpoint = Checkpoint("charter.example.com/prod", 0, EMPTY_ROOT)
    note = add_signatures(sign_checkpoint(checkpoint, other), [W["Y1"].cosign(checkpoint)])
    with pytest.raises(CheckpointUntrusted):
        parse_policy(EXAMPLE).verify_checkpoint(note)
    with pytest.raises(CheckpointUntrusted):
        parse_policy("quorum none\n").verify_checkpoint(_cosigned(0))


def test_a_bad_cosignature_makes_the_checkpoint_untrusted() -> None:
    good = _cosigned(0, "X1", "X2", "X3", "Y1")  # the quorum holds even without X1
    text = good.decode()
    # X1's cosignature of another checkpoint, put in place of its cosignature of this one.
    line = next(x for x in text.split("\n") if x.startswith("— x1."))
    other = next(x for x in _cosigned(1, "X1").decode().split("\n") if x.startswith("— x1."))
    forged = text.replace(line, other)
    with pytest.raises(CheckpointUntrusted):
        parse_policy(EXAMPLE).verify_checkpoint(forged.encode())


def test_a_second_bad_line_of_a_known_witness_makes_the_checkpoint_untrusted() -> None:
    good = _cosigned(0, "X1", "X2", "X3", "Y1")
    text = good.decode()
    # X1's good line stays; a copy carrying its cosignature of another checkpoint follows.
    other = next(x for x in _cosigned(1, "X1").decode().split("\n") if x.startswith("— x1."))
    with pytest.raises(CheckpointUntrusted, match="invalid signature"):
        parse_policy(EXAMPLE).verify_checkpoint((text + other + "\n").encode())
    # The same for a second line of the log's own key.
    log_line = next(x for x in text.split("\n") if x.startswith("— charter.example.com/prod"))
    bad = log_line[:-8] + ("AAAAAAAA" if not log_line.endswith("AAAAAAAA") else "BBBBBBBB")
    with pytest.raises(CheckpointUntrusted, match="invalid signature"):
        parse_policy(EXAMPLE).verify_checkpoint((text + bad + "\n").encode())


@pytest.mark.parametrize(
    "text",
    [
        "",  # no quorum
        "quorum none\nquorum none\n",
        "quorum X1\n",  # not defined
        f"quorum X1\nwitness X1 {_vkey('X1')}\n",  # defined after
        f"witness none {_vkey('X1')}\nquorum none\n",
        f"witness X1 {_vkey('X1')}\nwitness X1 {_vkey('X2')}\nquorum X1\n",
        f"witness X1 {_vkey('X1')}\nwitness X2 {_vkey('X1')}\nquorum X1\n",  # duplicate key
        f"log {LOG.verifier().vkey}\nlog {LOG.verifier().vkey}\nquorum none\n",
        f"witness X1 {LOG.verifier().vkey}\nquorum X1\n",  # a log key is not a witness key
        f"log {_vkey('X1')}\nquorum none\n",
        f"witness X1 {_vkey('X1')}\ngroup G 2 X1\nquorum G\n",
        f"witness X1 {_vkey('X1')}\ngroup G 0 X1\nquorum G\n",
        f"witness X1 {_vkey('X1')}\ngroup G 01 X1\nquorum G\n",
        f"witness X1 {_vkey('X1')}\ngroup G any X1 X1\nquorum G\n",
        f"witness X1 {_vkey('X1')}\ngroup G any none\nquorum G\n",
        f"witness X1 {_vkey('X1')}\ngroup G any\nquorum G\n",
        f"witness X1 {_vkey('X1')}\ngroup G any X1 H\nquorum G\n",
        f"witness X1 {_vkey('X1')}\ngroup X1 any X1\nquorum X1\n",
        "quorum none extra\n",
        "frobnicate\nquorum none\n",
        "quorum none\r\n",
        "witness X1 not-a-vkey\nquorum none\n",
    ],
)
def test_malformed_policies_are_refused(text: str) -> None:
    with pytest.raises(MalformedPolicy):
        parse_policy(text)


def test_non_ascii_names_are_opaque_octets() -> None:
    kelvin = "\u212a"  # the Kelvin sign is not the letter K
    text = f"witness K {_vkey('X1')}\nwitness {kelvin} {_vkey('X2')}\ngroup G all K {kelvin}\n"
    policy = parse_policy((text + "quorum G\n").encode())
    assert set(policy.witnesses) == {"K", kelvin}
    assert not policy.satisfied(("K",))
