"""The log-side client against real witness processes: quorum, 409 recovery, a witness
that is down, and one that has seen more of the log than the checkpoint offered."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import httpx
import pytest

from charter.core.errors.log import TileMissing
from charter.tlog.checkpoint import Checkpoint, Cosigner
from charter.tlog.note import parse_note
from charter.tlog.policy import Policy, parse_policy
from charter.tlog.witness_client import Witnessed, witness_checkpoint, witness_checkpoint_sync
from tests.acceptance.processes import free_port
from tests.acceptance.witnessproc import WitnessProcess
from tests.unit.witnesskit import TestLog


@pytest.fixture(scope="module")
def log() -> TestLog:
    return TestLog()


@pytest.fixture(scope="module")
def witnesses(
    tmp_path_factory: pytest.TempPathFactory, log: TestLog
) -> Iterator[list[WitnessProcess]]:
    root = tmp_path_factory.mktemp("witnesses")
    running = [
        WitnessProcess(root / f"w{i}", f"w{i}.example.org/witness", log).start() for i in (1, 2)
    ]
    yield running
    for process in running:
        process.stop()


@pytest.fixture(scope="module")
def policy(log: TestLog, witnesses: list[WitnessProcess]) -> Policy:
    down = Cosigner.generate("w3.example.org/witness").verifier().vkey
    w1, w2 = witnesses
    return parse_policy(
        f"log {log.vkey}\n"
        f"witness w1 {w1.vkey} {w1.url}\n"
        f"witness w2 {w2.vkey} {w2.url}/\n"  # a trailing slash is fine
        f"witness w3 {down} http://127.0.0.1:{free_port()}\n"  # nothing listens there
        "group two-of-three 2 w1 w2 w3\n"
        "quorum two-of-three\n"
    )


def _held(witness: WitnessProcess, log: TestLog) -> int:
    """The size a witness holds, from its monitoring URL (0 before any)."""
    response = witness.latest(log.origin)
    if response.status_code == 404:
        return 0
    return Checkpoint.parse(parse_note(response.content).text).size


def test_two_of_three_with_one_down(log: TestLog, policy: Policy) -> None:
    result = asyncio.run(witness_checkpoint(policy, log.note(10), {}, log.proof, timeout=20))
    assert result.quorum
    assert result.cosigned == ("w1", "w2")
    assert result.replies["w3"].status == "unreachable"
    assert result.ahead == ()
    # The returned note is what a verifier accepts under the policy.
    trusted = policy.verify_checkpoint(result.note)
    assert trusted.witnesses == ("w1", "w2")
    assert trusted.checkpoint == log.checkpoint(10)
    assert dict(result.sizes) == {"w1": 10, "w2": 10}

    # The next round starts from the sizes returned: no 409 round trip needed.
    grown = witness_checkpoint_sync(policy, log.note(25), result.sizes, log.proof, timeout=20)
    assert grown.quorum
    assert dict(grown.sizes) == {"w1": 25, "w2": 25}


def test_a_forgotten_size_is_recovered_from_the_409(
    log: TestLog, policy: Policy, witnesses: list[WitnessProcess]
) -> None:
    """After a restart the log passes {}: each witness answers 409 with its size and the
    client retries with a proof from there."""
    for witness in witnesses:
        if _held(witness, log) == 0:
            assert witness.add(log.request(0, 5)).status_code == 200
    held = max(_held(w, log) for w in witnesses)
    assert held == min(_held(w, log) for w in witnesses)
    statuses: list[int] = []

    async def record(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    async def round_trip() -> Witnessed:
        async with httpx.AsyncClient(timeout=20, event_hooks={"response": [record]}) as client:
            return await witness_checkpoint(
                policy, log.note(held + 7), {}, log.proof, client=client, timeout=20
            )

    result = asyncio.run(round_trip())
    assert sorted(statuses) == [200, 200, 409, 409]
    assert result.quorum
    assert result.cosigned == ("w1", "w2")
    assert dict(result.sizes) == {"w1": held + 7, "w2": held + 7}


def test_quorum_not_met_and_a_witness_ahead_of_the_log(
    log: TestLog, policy: Policy, witnesses: list[WitnessProcess]
) -> None:
    w1, w2 = witnesses
    current = _held(w1, log)
    assert current == _held(w2, log)
    # w1 alone moves ahead (as if the log's directory were later restored from a backup).
    assert w1.add(log.request(current, current + 20)).status_code == 200

    stale = witness_checkpoint_sync(
        policy, log.note(current + 10), {"w1": current, "w2": current}, log.proof, timeout=20
    )
    assert stale.ahead == ("w1",)
    assert stale.replies["w1"].size == current + 20
    assert stale.cosigned == ("w2",)
    assert not stale.quorum  # one of three is not two
    assert stale.sizes["w1"] == current + 20


def test_a_forged_cosignature_is_not_counted(log: TestLog, witnesses: list[WitnessProcess]) -> None:
    """A policy key that does not match the witness's real key: its answer is ignored."""
    w1, _ = witnesses
    wrong = Cosigner.generate("w1.example.org/witness").verifier().vkey
    policy = parse_policy(f"log {log.vkey}\nwitness w1 {wrong} {w1.url}\nquorum w1\n")
    current = _held(w1, log)
    result = witness_checkpoint_sync(policy, log.note(current + 1), {}, log.proof, timeout=20)
    assert result.cosigned == ()
    assert not result.quorum
    assert result.replies["w1"].status == "invalid"


def test_the_call_returns_once_the_quorum_holds(
    log: TestLog, witnesses: list[WitnessProcess]
) -> None:
    """A witness that accepts the connection but never answers is cancelled as soon as
    the other one's cosignature meets `any`; with a 60 s budget it would otherwise be
    reported as unreachable after the wait."""
    w1, _ = witnesses
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections queue in the backlog; nothing ever reads them
        port = silent.getsockname()[1]
        slow = Cosigner.generate("slow.example.org/witness").verifier().vkey
        policy = parse_policy(
            f"log {log.vkey}\n"
            f"witness w1 {w1.vkey} {w1.url}\n"
            f"witness slow {slow} http://127.0.0.1:{port}\n"
            "group either any w1 slow\n"
            "quorum either\n"
        )
        held = _held(w1, log)
        result = witness_checkpoint_sync(
            policy, log.note(held + 1), {"w1": held}, log.proof, timeout=60
        )
    assert result.quorum
    assert result.cosigned == ("w1",)
    assert result.replies["slow"].status == "cancelled"
    assert "slow" not in result.sizes


def test_a_failing_proof_source_costs_the_cosignature_not_the_call(
    log: TestLog, policy: Policy, witnesses: list[WitnessProcess]
) -> None:
    held = max(_held(w, log) for w in witnesses)
    if held == 0:
        for witness in witnesses:
            assert witness.add(log.request(0, 3)).status_code == 200
        held = 3

    def missing(old: int, new: int) -> list[bytes]:
        raise TileMissing(f"no tiles for {old}..{new}")

    sizes = {"w1": held, "w2": held}
    result = witness_checkpoint_sync(policy, log.note(held + 2), sizes, missing, timeout=20)
    assert result.replies["w1"].status == "no_proof"
    assert "no tiles" in result.replies["w1"].detail
    assert not result.quorum
    assert result.sizes["w1"] == held
