"""The sequencer's publish step when the policy names witnesses (docs/transparency-log.md,
"Publishing through witnesses").

The sequencer's policy file (`CHARTER_LOG_POLICY_FILE`, default the `charter.policy`
that `charter log init` wrote beside the key) is C2SP tlog-policy. Its `witness` lines
may carry the witness's submission URL as a third word (`witness w1 <vkey> <url>`);
those are the witnesses asked to cosign. Each checkpoint is published only once the
cosigning witnesses meet the `quorum`, and the written note carries their cosignatures:

- quorum met: the note with every valid cosignature is returned (and written);
- not met (a witness down, slow, or refusing): `CheckpointNotPublished`; the sequencer
  keeps the signed checkpoint and offers the same one again next tick;
- a witness holds a larger tree of this log than the checkpoint: `LogBehindWitness`,
  a halt (the log directory was rolled back or restored from an old copy);
- the quorum is not met and a witness refused the checkpoint as inconsistent with the
  one it holds (422: the consistency proof from its size fails, or its size has another
  root): `LogBehindWitness` too. The log regrew past a tree it had published (a restore
  followed by new events), so no retry can succeed. When the quorum holds anyway, the
  refusal is only logged: one witness alone cannot stop the log.

The size each witness holds is kept in `witness-sizes.json` in the log's state directory
(written at most every SIZES_EVERY seconds and when the publisher closes), so a restart
sends the right `old` size at once; a lost or stale file costs one 409 round trip per
witness, which the client recovers from.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from charter.core.errors import ConfigurationError
from charter.core.errors.log import CheckpointNotPublished, LogBehindWitness, MalformedPolicy
from charter.tlog.checkpoint import Checkpoint
from charter.tlog.logdir import WITNESS_SIZES, LogDirectory, write_atomically
from charter.tlog.merkle import prove_consistency
from charter.tlog.note import Ed25519Verifier
from charter.tlog.policy import NONE, Policy, parse_policy
from charter.tlog.tiles import TileHashReader
from charter.tlog.witness_client import Witnessed, witness_checkpoint

SIZES_EVERY = 5.0  # seconds between writes of the sizes file
logger = logging.getLogger("charter.log")


def load_policy(path: Path, log_key: Ed25519Verifier) -> Policy | None:
    """The sequencer's policy when it asks witnesses to cosign, else None (`quorum none`,
    or no policy file: the log publishes with its own signature alone)."""
    try:
        policy = parse_policy(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigurationError(f"cannot read the log policy {path}: {exc}") from None
    except MalformedPolicy as exc:
        raise ConfigurationError(f"the log policy {path} is malformed: {exc.message}") from None
    if policy.quorum == NONE:
        return None
    if not any(log.verifier.vkey == log_key.vkey for log in policy.logs):
        raise ConfigurationError(
            f"the log policy {path} has no `log {log_key.vkey}` line: verifiers holding it"
            " would not trust this log's checkpoints"
        )
    reachable = [w.name for w in policy.witnesses.values() if w.url]
    if not policy.satisfied(reachable):
        raise ConfigurationError(
            f"the quorum {policy.quorum} of {path} cannot be met by the witnesses with a URL"
            f" ({', '.join(reachable) or 'none'}): give each witness line its URL"
        )
    return policy


class WitnessPublisher:
    """`publish(note, checkpoint, old_size)` for the sequencer, backed by the witnesses.

    Called from the sequencer's thread only; it keeps one event loop and one HTTP client
    (connections stay open between checkpoints, as tlog-witness recommends)."""

    def __init__(
        self,
        policy: Policy,
        log: LogDirectory,
        *,
        timeout: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        routes: Mapping[str, tuple[httpx.AsyncClient, str]] | None = None,
    ) -> None:
        """`routes`: witnesses (by policy name) reached through a client of their own,
        such as a local witness's in-process app; closed with the publisher."""
        self._policy = policy
        self._log = log
        self._timeout = timeout
        self._sizes_path = log.state / WITNESS_SIZES
        self.sizes: dict[str, int] = _read_sizes(self._sizes_path)
        self._clock = clock
        self._sizes_written = -SIZES_EVERY  # the first change is written at once
        self._loop = asyncio.new_event_loop()
        self._client = httpx.AsyncClient(timeout=timeout)
        self._routes = dict(routes or {})

    def __call__(self, note: bytes, checkpoint: Checkpoint, old_size: int) -> bytes:
        result = self._loop.run_until_complete(
            witness_checkpoint(
                self._policy,
                note,
                self.sizes,
                self._proof(checkpoint.size),
                client=self._client,
                timeout=self._timeout,
                routes=self._routes,
            )
        )
        self._keep_sizes(result.sizes)
        if result.ahead:
            held = {n: result.replies[n].size for n in result.ahead}
            raise LogBehindWitness(
                f"witness {', '.join(f'{n} holds size {s}' for n, s in held.items())}, more"
                f" than this log's {checkpoint.size}: the log directory was rolled back;"
                " restore it from a mirror",
                witnesses=",".join(result.ahead),
                size=checkpoint.size,
            )
        inconsistent = [
            n for n, r in result.replies.items() if r.status == "refused" and r.detail[:4] == "422 "
        ]
        if inconsistent and not result.quorum:
            raise LogBehindWitness(
                f"witness {', '.join(sorted(inconsistent))} refused checkpoint {checkpoint.size}"
                " as inconsistent with the tree it cosigned: this log is not the one it"
                " witnessed (restored and regrown, or forked); restore the directory from a"
                f" mirror ({_describe(result)})",
                witnesses=",".join(sorted(inconsistent)),
                size=checkpoint.size,
            )
        if inconsistent:
            logger.warning(
                "a witness refused checkpoint %d as inconsistent: %s",
                checkpoint.size,
                _describe(result),
                extra={"action": "log.witness_refused"},
            )
        if not result.quorum:
            raise CheckpointNotPublished(
                f"checkpoint {checkpoint.size} lacks the quorum {self._policy.quorum}: "
                + _describe(result)
            )
        return result.note

    def _proof(self, size: int) -> ProofFromTiles:
        return ProofFromTiles(self._log, size)

    def _keep_sizes(self, sizes: Mapping[str, int]) -> None:
        if dict(sizes) == self.sizes:
            return
        self.sizes = dict(sizes)
        # They change with every checkpoint: written at most every SIZES_EVERY seconds
        # and on close, not fsynced. A stale or lost file costs one 409 per witness.
        if self._clock() - self._sizes_written >= SIZES_EVERY:
            self._write_sizes()

    def _write_sizes(self) -> None:
        self._sizes_written = self._clock()
        try:
            data = json.dumps(self.sizes, sort_keys=True).encode()
            write_atomically(self._sizes_path, data, durable=False)
        except OSError:  # only an optimisation: a 409 teaches the size again
            logger.warning("could not keep the witness sizes in %s", self._sizes_path)

    def close(self) -> None:
        if self.sizes != _read_sizes(self._sizes_path):
            self._write_sizes()
        self._loop.run_until_complete(self._client.aclose())
        for client, _ in self._routes.values():
            self._loop.run_until_complete(client.aclose())
        self._loop.close()


class ProofFromTiles:
    """Consistency proofs between sizes of the tree of `size` leaves whose tiles are
    written but whose checkpoint is not yet (so `serving.consistency_proof`, bounded by
    the published size, does not serve)."""

    def __init__(self, log: LogDirectory, size: int) -> None:
        self._read = TileHashReader(log.tiles, size, log.nodes)

    def __call__(self, old: int, new: int) -> list[bytes]:
        return prove_consistency(old, new, self._read)


def _read_sizes(path: Path) -> dict[str, int]:
    try:
        loaded = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {str(k): v for k, v in loaded.items() if isinstance(v, int) and v >= 0}


def _describe(result: Witnessed) -> str:
    return "; ".join(
        f"{name} {reply.status}" + (f" ({reply.detail})" if reply.detail else "")
        for name, reply in sorted(result.replies.items())
    )
