"""`verify --witness`: the mirror's checkpoint against the latest one a witness holds,
served over HTTP by an in-process transport (the real server is tested in acceptance)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from charter.audit.log_check import check_witness
from charter.core.errors.log import WitnessUnreachable
from charter.tlog.checkpoint import Checkpoint, sign_checkpoint
from charter.tlog.entry import LogEntry
from charter.tlog.logdir import LogDirectory
from charter.tlog.merkle import root_of
from charter.tlog.note import Ed25519Signer
from charter.tlog.policy import Policy, parse_policy
from charter.tlog.tiles import append_tiles

ORIGIN = "charter.test/witness-check"
SIGNER = Ed25519Signer.generate(ORIGIN)
URL = "http://witness.test"


def _entries(n: int) -> list[LogEntry]:
    return [LogEntry(bytes([i % 3]) * 32, i // 3 + 1, i.to_bytes(32, "big")) for i in range(n)]


def _checkpoint(entries: list[LogEntry], signer: Ed25519Signer = SIGNER) -> bytes:
    root = root_of([e.leaf_hash() for e in entries])
    return sign_checkpoint(Checkpoint(ORIGIN, len(entries), root), signer)


@pytest.fixture
def mirror(tmp_path: Path) -> LogDirectory:
    log = LogDirectory(tmp_path)
    entries = _entries(6)
    log.write_tiles(append_tiles(log.tiles, 0, [e.encode() for e in entries]))
    log.write_checkpoint(_checkpoint(entries))
    return log


@pytest.fixture
def policy() -> Policy:
    return parse_policy(f"log {SIGNER.verifier().vkey}\nquorum none\n")


def _witness(answer: Callable[[], httpx.Response]) -> httpx.Client:
    path = f"/{hashlib.sha256(ORIGIN.encode()).hexdigest()}/checkpoint"

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path == path  # the C2SP monitoring endpoint of this origin
        return answer()

    return httpx.Client(transport=httpx.MockTransport(handle))


def _check(
    mirror: LogDirectory, policy: Policy, answer: Callable[[], httpx.Response]
) -> str | None:
    with _witness(answer) as client:
        problem = check_witness(URL, mirror.root, policy, client=client)
    return None if problem is None else problem.code


def test_a_witness_holding_the_same_or_an_older_prefix_is_fine(
    mirror: LogDirectory, policy: Policy
) -> None:
    same = mirror.checkpoint_note()
    assert same is not None
    assert _check(mirror, policy, lambda: httpx.Response(200, content=same)) is None
    older = _checkpoint(_entries(3))  # a prefix of the mirror's tree
    assert _check(mirror, policy, lambda: httpx.Response(200, content=older)) is None
    assert _check(mirror, policy, lambda: httpx.Response(404)) is None  # holds nothing


def test_a_larger_witnessed_tree_is_log_rollback(mirror: LogDirectory, policy: Policy) -> None:
    larger = _checkpoint(_entries(9))
    assert _check(mirror, policy, lambda: httpx.Response(200, content=larger)) == "log_rollback"


def test_a_conflicting_tree_is_checkpoint_equivocation(
    mirror: LogDirectory, policy: Policy
) -> None:
    other = [LogEntry(bytes([7]) * 32, 1, i.to_bytes(32, "big")) for i in range(6)]
    same_size = _checkpoint(other)
    assert (
        _check(mirror, policy, lambda: httpx.Response(200, content=same_size))
        == "checkpoint_equivocation"
    )
    not_a_prefix = _checkpoint(other[:3])
    assert (
        _check(mirror, policy, lambda: httpx.Response(200, content=not_a_prefix))
        == "checkpoint_equivocation"
    )


def test_a_checkpoint_the_log_did_not_sign_is_untrusted(
    mirror: LogDirectory, policy: Policy
) -> None:
    forged = _checkpoint(_entries(9), Ed25519Signer.generate(ORIGIN))
    assert (
        _check(mirror, policy, lambda: httpx.Response(200, content=forged))
        == "checkpoint_untrusted"
    )


def test_a_witness_that_cannot_be_read_is_an_error_not_a_pass(
    mirror: LogDirectory, policy: Policy
) -> None:
    with pytest.raises(WitnessUnreachable):
        _check(mirror, policy, lambda: httpx.Response(500))

    def refuse() -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with pytest.raises(WitnessUnreachable):
        _check(mirror, policy, refuse)
