"""add-checkpoint, as tlog-witness specifies it, without HTTP.

The checks, in order (each refusal is an error with tlog-witness's status):

1. the body is `old <size>`, proof lines, an empty line and a signed note (else 400);
2. the checkpoint's origin is a known log (else 404);
3. a known key of that log signed it, and no known key's signature is bad (else 403);
4. the old size is at most the checkpoint size (else 400);
5. holding the origin's lock: the old size is the size of the latest cosigned checkpoint,
   0 if none (else 409 with that size); a size-0 checkpoint has the empty root; an old
   size of 0 comes with no proof; equal sizes have equal roots; otherwise the RFC 6962
   consistency proof from the latest root to the new one verifies (else 422);
6. still holding the lock: cosign, persist, and only then answer.

A validly signed checkpoint refused at step 5 because it contradicts what the witness
holds (smaller: rollback; same size, other root: equivocation; a proof that fails:
inconsistent) is kept as evidence of possible log misbehaviour.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from charter.core.clock import Clock, SystemClock
from charter.core.errors.log import (
    BadNoteSignature,
    CheckpointUntrusted,
    LogProofInvalid,
)
from charter.tlog.checkpoint import Checkpoint, Cosigner, open_checkpoint
from charter.tlog.merkle import EMPTY_ROOT, verify_consistency
from charter.tlog.note import Signature, UnverifiedNote, b64encode, parse_note
from charter.tlog.witness_protocol import AddCheckpoint, MalformedWitnessRequest
from charter.witness.config import KnownLogs
from charter.witness.errors import CheckpointEquivocation, SizeConflict, UnknownLog
from charter.witness.state import Evidence, Latest, WitnessState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Cosigned:
    """A checkpoint this witness accepted and its cosignature."""

    checkpoint: Checkpoint
    signature: Signature

    def response(self) -> bytes:
        """The 200 body: the cosignature line(s)."""
        return self.signature.line().encode("utf-8")


class Witness:
    """One witness key, the logs it knows and its state directory."""

    def __init__(
        self,
        cosigner: Cosigner,
        logs: KnownLogs,
        state: WitnessState,
        clock: Clock | None = None,
    ) -> None:
        self.cosigner = cosigner
        self.logs = logs
        self.state = state
        self._clock: Clock = clock or SystemClock()

    def add_checkpoint(self, body: bytes) -> Cosigned:
        """Handle one add-checkpoint request body."""
        return self.add(AddCheckpoint.parse(body))

    def add(self, request: AddCheckpoint) -> Cosigned:
        checkpoint = Checkpoint.parse(parse_note(request.note).text)
        keys = self.logs.keys(checkpoint.origin)
        if not keys:
            raise UnknownLog(f"unknown log origin {checkpoint.origin}")
        try:
            opened = open_checkpoint(request.note, keys)
        except (UnverifiedNote, BadNoteSignature) as exc:
            raise CheckpointUntrusted(f"no valid signature by the log: {exc.message}") from None
        if request.old_size > checkpoint.size:
            raise MalformedWitnessRequest(
                f"old size {request.old_size} exceeds the checkpoint size {checkpoint.size}"
            )
        with self.state.locked(checkpoint.origin):
            latest = self.state.latest(checkpoint.origin)
            self._check(request, checkpoint, latest)
            signature = self.cosigner.cosign(checkpoint)
            lines = [*opened.note.verified, signature]
            stored = checkpoint.body() + "\n" + "".join(s.line() for s in lines)
            self.state.replace(checkpoint.origin, stored.encode("utf-8"))
        log.info(
            "cosigned %s at size %d",
            checkpoint.origin,
            checkpoint.size,
            extra={"action": "witness.cosign"},
        )
        return Cosigned(checkpoint, signature)

    def _check(self, request: AddCheckpoint, new: Checkpoint, latest: Latest | None) -> None:
        held = latest.checkpoint if latest else None
        held_size = held.size if held else 0
        if request.old_size != held_size:
            if held and new.size < held.size:
                self._refuse(request, latest, "rollback", f"size {new.size} < {held.size}")
            elif held and new.size == held.size and new.root != held.root:
                self._refuse(request, latest, "equivocation", f"size {new.size}, other root")
            raise SizeConflict(
                held_size, f"the latest cosigned size is {held_size}, not {request.old_size}"
            )
        if new.size == 0 and new.root != EMPTY_ROOT:
            self._refuse(request, latest, "inconsistent", "size 0 with a non-empty root")
            raise LogProofInvalid("a checkpoint of size 0 must have the empty tree's root")
        if held is None or held_size == 0:
            if request.proof:
                raise LogProofInvalid("from size 0 the consistency proof must be empty")
            return
        if new.size == held.size and new.root != held.root:
            self._refuse(request, latest, "equivocation", f"size {new.size}, other root")
            raise CheckpointEquivocation(
                f"size {new.size} was cosigned with another root hash: the log equivocates"
            )
        try:
            verify_consistency(held.size, new.size, request.proof, held.root, new.root)
        except LogProofInvalid as exc:
            self._refuse(request, latest, "inconsistent", exc.message)
            raise

    def _refuse(
        self, request: AddCheckpoint, latest: Latest | None, reason: str, message: str
    ) -> None:
        origin = Checkpoint.parse(parse_note(request.note).text).origin
        evidence = Evidence(
            reason=reason,
            message=message,
            old_size=request.old_size,
            proof=tuple(b64encode(h) for h in request.proof),
            submitted=request.note,
            latest=latest.note if latest else None,
        )
        path = self.state.keep_evidence(origin, evidence, self._clock.now())
        log.warning(
            "refused a checkpoint of %s (%s: %s); evidence in %s",
            origin,
            reason,
            message,
            path,
            extra={"action": "witness.refuse"},
        )
