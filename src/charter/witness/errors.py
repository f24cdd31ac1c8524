"""The witness's refusals, each with the HTTP status tlog-witness prescribes.

A malformed request (400) is `MalformedWitnessRequest` or a note/checkpoint syntax error;
a missing or bad log signature (403) is `CheckpointUntrusted`; a bad consistency proof
(422) is `LogProofInvalid` (all in `charter.tlog`). The rest are here.
"""

from __future__ import annotations

from charter.core.errors.log import TlogError


class UnknownLog(TlogError):
    """The checkpoint's origin is not a log this witness knows."""

    code = "witness_unknown_log"
    http_status = 404


class SizeConflict(TlogError):
    """The old size is not the size of the latest checkpoint this witness cosigned."""

    code = "witness_size_conflict"
    http_status = 409

    def __init__(self, latest_size: int, message: str | None = None) -> None:
        super().__init__(message, latest_size=latest_size)
        self.latest_size = latest_size


class CheckpointEquivocation(TlogError):
    """Same tree size, different root hash: the log signed two different trees."""

    code = "checkpoint_equivocation"
    http_status = 422


class WitnessConfigError(TlogError):
    """The witness's configuration cannot be used."""

    code = "witness_config"
    http_status = 500
