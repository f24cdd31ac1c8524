"""The log's side of tlog-witness: ask every witness of a policy to cosign a checkpoint.

    result = await witness_checkpoint(policy, note, sizes, proof, client=client)
    if result.quorum:
        publish(result.note)          # the checkpoint with every valid cosignature
    sizes = result.sizes              # what to send as `old` next time
    if result.ahead:                  # a witness holds a larger tree than this log:
        halt("log_behind_witness")    # the log directory was rolled back

- `policy`: a `charter.tlog.policy.Policy`; every witness with a URL (its submission
  prefix) is asked, concurrently; witnesses without one are skipped.
- `note`: the checkpoint signed by the log key.
- `sizes`: the size each witness (by policy name) is believed to hold; a missing name
  means 0. After a restart pass `{}`: a wrong guess costs one 409 round trip.
- `proof(old, new)`: the RFC 6962 consistency proof between two sizes of this log (from
  the tiles); called in the event loop, so it should be quick local reads.

As Tessera's witness gateway does:
- the call returns as soon as the quorum holds; requests still in flight are cancelled
  (`cancelled`: their size stays as believed, a 409 corrects it next time). With
  `quorum none` every witness is waited for;
- a 409 answer (`Content-Type: text/x.tlog.size`) carries the witness's size: the call
  is retried (at most twice) with that size and a proof from it; witnesses at the same
  size share one proof computation;
- a size larger than the checkpoint's is never retried: that witness has seen more of
  the log (`ahead`). A rolled-back log also fails the quorum, since a witness in step
  cannot cosign a smaller tree, nor a regrown one that cannot prove consistency;
- a cosignature counts only if it verifies under that witness's key in the policy;
  anything else a witness says is ignored.

Each witness gets `timeout` seconds in all: one that is down, slow or refuses costs its
cosignature, never the call. Pass a long-lived `httpx.AsyncClient` to keep connections
alive between checkpoints, as tlog-witness recommends. `routes` gives a witness (by policy
name) a client and submission prefix of its own instead: a witness reached in process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from charter.core.errors.log import TlogError
from charter.tlog.checkpoint import Checkpoint, CosignatureVerifier
from charter.tlog.note import Signature, add_signatures, open_note, parse_note
from charter.tlog.policy import NONE, Policy
from charter.tlog.witness_protocol import (
    ADD_CHECKPOINT,
    SIZE_CONTENT_TYPE,
    encode_request,
    parse_size_body,
)

ProofSource = Callable[[int, int], Sequence[bytes]]
"""`proof(old, new)`: the consistency proof from tree size `old` to `new` (0 < old < new)."""

Status = Literal["cosigned", "ahead", "refused", "unreachable", "invalid", "no_proof", "cancelled"]
MAX_CONFLICT_RETRIES = 2


@dataclass(frozen=True, slots=True)
class WitnessReply:
    """What one witness did with the checkpoint.

    status: `cosigned`; `ahead` (it holds a larger tree: `size`); `refused` (4xx/5xx:
    `detail`); `unreachable` (connection failure or timeout); `invalid` (a 200 without a
    valid cosignature from its key, or a 409 without a `text/x.tlog.size` size);
    `no_proof` (the proof source failed for the size it holds: `detail`); `cancelled`
    (still pending when the quorum held).
    """

    name: str
    status: Status
    size: int | None  # the size it holds, where known
    signature: Signature | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Witnessed:
    """The outcome of one round: the cosigned note and whether the policy's quorum holds."""

    note: bytes  # the log's note plus every valid cosignature collected
    cosigned: tuple[str, ...]  # policy names of the witnesses that cosigned
    quorum: bool
    sizes: Mapping[str, int]  # per witness, the size to send as `old` next time
    replies: Mapping[str, WitnessReply]

    @property
    def ahead(self) -> tuple[str, ...]:
        """Witnesses holding a larger tree than this checkpoint (a rolled-back log)."""
        return tuple(n for n, r in self.replies.items() if r.status == "ahead")


async def witness_checkpoint(
    policy: Policy,
    note: bytes,
    sizes: Mapping[str, int],
    proof: ProofSource,
    *,
    client: httpx.AsyncClient | None = None,
    timeout: float = 1.0,
    routes: Mapping[str, tuple[httpx.AsyncClient, str]] | None = None,
) -> Witnessed:
    """Send add-checkpoint to every witness of `policy` at once; see the module doc."""
    checkpoint = Checkpoint.parse(parse_note(note).text)
    shared = _SharedProofs(proof)
    own = client is None
    http = client or httpx.AsyncClient(timeout=timeout)
    routed = routes or {}
    tasks = []
    for w in policy.witnesses.values():
        if not w.url:
            continue
        to, url = routed.get(w.name, (http, w.url))
        call = _Call(to, w.name, w.verifier, url, note, checkpoint, shared.get)
        tasks.append(asyncio.create_task(_bounded(call, sizes.get(w.name, 0), timeout)))
    replies: dict[str, WitnessReply] = {}
    pending: set[asyncio.Task[WitnessReply]] = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                reply = task.result()
                replies[reply.name] = reply
            if policy.quorum != NONE and policy.satisfied(_cosigned(replies)):
                break  # as Tessera does: publish as soon as the policy holds
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if own:
            await http.aclose()
    for w in policy.witnesses.values():
        if w.url and w.name not in replies:
            replies[w.name] = WitnessReply(
                w.name, "cancelled", None, detail="the quorum held first"
            )
    cosigned = _cosigned(replies)
    signatures = [r.signature for r in replies.values() if r.signature is not None]
    next_sizes = dict(sizes)
    for reply in replies.values():
        if reply.size is not None:
            next_sizes[reply.name] = reply.size
    return Witnessed(
        note=add_signatures(note, signatures) if signatures else note,
        cosigned=cosigned,
        quorum=policy.satisfied(cosigned),
        sizes=next_sizes,
        replies=replies,
    )


def _cosigned(replies: Mapping[str, WitnessReply]) -> tuple[str, ...]:
    return tuple(sorted(n for n, r in replies.items() if r.signature is not None))


class _SharedProofs:
    """One proof computation per old size: witnesses in step need the same proof."""

    def __init__(self, proof: ProofSource) -> None:
        self._proof = proof
        self._cache: dict[tuple[int, int], tuple[bytes, ...]] = {}

    def get(self, old: int, new: int) -> tuple[bytes, ...]:
        if (old, new) not in self._cache:
            self._cache[(old, new)] = tuple(self._proof(old, new))
        return self._cache[(old, new)]


def witness_checkpoint_sync(
    policy: Policy,
    note: bytes,
    sizes: Mapping[str, int],
    proof: ProofSource,
    *,
    timeout: float = 1.0,
) -> Witnessed:
    """`witness_checkpoint` for callers without an event loop."""
    return asyncio.run(witness_checkpoint(policy, note, sizes, proof, timeout=timeout))


async def _bounded(call: _Call, old: int, timeout: float) -> WitnessReply:
    try:
        return await asyncio.wait_for(call.run(old), timeout)
    except TimeoutError:
        return WitnessReply(call.name, "unreachable", None, detail=f"no answer in {timeout} s")


@dataclass(frozen=True, slots=True)
class _Call:
    """One witness's add-checkpoint exchange, with its 409 retries."""

    http: httpx.AsyncClient
    name: str
    verifier: CosignatureVerifier
    url: str
    note: bytes
    checkpoint: Checkpoint
    proof: ProofSource

    async def run(self, old: int) -> WitnessReply:
        size = self.checkpoint.size
        old = min(old, size)  # a larger belief is surely wrong; the 409 will tell
        for _ in range(1 + MAX_CONFLICT_RETRIES):
            try:
                hashes = self.proof(old, size) if 0 < old < size else ()
            except (TlogError, OSError) as exc:
                return WitnessReply(self.name, "no_proof", old, detail=f"{old}->{size}: {exc}")
            try:
                response = await self.http.post(
                    f"{self.url.rstrip('/')}/{ADD_CHECKPOINT}",
                    content=encode_request(old, hashes, self.note),
                )
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                return WitnessReply(self.name, "unreachable", None, detail=_describe(exc))
            if response.status_code == 200:
                return self._cosigned(response.content)
            if response.status_code != 409:
                first = response.text.strip().split("\n", 1)[0][:200]
                return WitnessReply(
                    self.name, "refused", None, detail=f"{response.status_code} {first}"
                )
            if response.headers.get("content-type") != SIZE_CONTENT_TYPE:
                return WitnessReply(self.name, "invalid", None, detail="409 without a size")
            try:
                held = parse_size_body(response.content)
            except TlogError as exc:
                return WitnessReply(self.name, "invalid", None, detail=f"409: {exc.message}")
            if held > size:
                return WitnessReply(self.name, "ahead", held, detail=f"it holds size {held}")
            if held == old:
                return WitnessReply(self.name, "invalid", held, detail="409 with the same size")
            old = held
        return WitnessReply(self.name, "refused", old, detail="its size kept changing (409)")

    def _cosigned(self, body: bytes) -> WitnessReply:
        """The witness's valid cosignature from a 200 body, ignoring unknown keys."""
        try:
            # Only the reply's lines, under the checkpoint text: nothing else counts.
            text = self.checkpoint.body().encode("utf-8")
            opened = open_note(text + b"\n" + body, [self.verifier])
        except TlogError as exc:
            return WitnessReply(self.name, "invalid", None, detail=f"200: {exc.message}")
        return WitnessReply(self.name, "cosigned", self.checkpoint.size, opened.verified[0])


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
