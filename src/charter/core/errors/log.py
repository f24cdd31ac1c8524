"""Errors of the transparency-log formats, each with its wire code.

They extend the one Charter hierarchy (`charter.core.errors`) so the API and the CLI map
them like any other error. The docstring is the default message.
"""

from __future__ import annotations

from charter.core.errors import CharterError


class TlogError(CharterError):
    """A transparency-log input is invalid."""

    code = "tlog_invalid"
    http_status = 400


class LogProofInvalid(TlogError):
    """The Merkle proof does not verify."""

    code = "log_proof_invalid"
    http_status = 422


class WitnessUnreachable(TlogError):
    """A witness named to the verifier could not be read."""

    code = "witness_unreachable"
    http_status = 502


class MalformedEntry(TlogError):
    """The log entry is not a valid charter-event/1 entry."""

    code = "log_entry_malformed"


class InvalidSalt(TlogError):
    """The log salt must be 32 bytes."""

    code = "log_salt_invalid"


class MalformedKey(TlogError):
    """The note key text is malformed."""

    code = "note_key_malformed"


class MalformedNote(TlogError):
    """The signed note is malformed."""

    code = "note_malformed"


class AmbiguousKey(TlogError):
    """Two known keys share a name and key ID."""

    code = "note_key_ambiguous"


class BadNoteSignature(TlogError):
    """A signature from a known key does not verify."""

    code = "note_bad_signature"
    http_status = 403


class MalformedCheckpoint(TlogError):
    """The checkpoint body is malformed."""

    code = "checkpoint_malformed"


class CheckpointUntrusted(TlogError):
    """The log signature is missing or bad, or the witness quorum is not met."""

    code = "checkpoint_untrusted"
    http_status = 403


class MalformedTilePath(TlogError):
    """The tile path is not a canonical tlog-tiles path."""

    code = "tile_path_malformed"


class MalformedTile(TlogError):
    """The tile or entry bundle contents are malformed."""

    code = "tile_malformed"


class TileMissing(TlogError):
    """A tile needed for this tree is missing."""

    code = "tile_missing"
    http_status = 404


class MalformedPolicy(TlogError):
    """The tlog-policy file is malformed."""

    code = "policy_malformed"


class MalformedProof(TlogError):
    """The tlog-proof text is malformed."""

    code = "proof_malformed"


class ProofRange(TlogError):
    """The index or tree sizes are outside the tree."""

    code = "log_proof_range"


class LogNotConfigured(TlogError):
    """No transparency log is configured here (run `charter log init`)."""

    code = "log_not_configured"
    http_status = 404


class NotLogged(TlogError):
    """The event is not in the published log (yet)."""

    code = "not_logged"
    http_status = 404


class LogHalted(TlogError):
    """The sequencer stopped: the database and the log disagree. An operator must act."""

    code = "log_halted"
    http_status = 503


class DbBehindLog(LogHalted):
    """The log holds an event the database lacks or contradicts (rollback, restore or fork)."""

    code = "db_behind_log"


class LogBehindDb(LogHalted):
    """The database recorded more logged entries than the log directory holds."""

    code = "log_behind_db"


class LogGap(LogHalted):
    """An event waits for a predecessor that was never queued (its queue row was deleted)."""

    code = "log_gap"


class LogBehindWitness(LogHalted):
    """A witness holds a larger checkpoint than the log directory."""

    code = "log_behind_witness"


class LogQueueForged(LogHalted):
    """A queued row names no genuine event (no row, or a hash that does not recompute)."""

    code = "log_queue_forged"


class LogDirectoryMoved(TlogError):
    """The log directory changed under this sequencer (another writer): start again."""

    code = "log_directory_moved"
    http_status = 409


class CheckpointNotPublished(TlogError):
    """The witnesses did not reach the quorum for this checkpoint yet: retry next tick."""

    code = "checkpoint_not_published"
    http_status = 503
