"""One hierarchy of Charter errors.

Each class carries its wire `code`, HTTP status and whether retrying may help; the
docstring is the default message. The API maps these to responses in one place and the
database layer maps SQLSTATEs to them in one place (`charter.db.errors`).

The general errors are here; those of one domain beside them (`workflows`,
`automations`, `lists`, `log`), and every class the API can answer with is in the one
table of `catalogue`.
"""

from __future__ import annotations

from typing import Any, ClassVar


class CharterError(Exception):
    """Charter failed."""

    code: ClassVar[str] = "internal"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.message = message or _first_line(type(self).__doc__) or self.code
        self.context = context
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        """The `{"code", "message", ...context}` body of an error response."""
        return {"code": self.code, "message": self.message, **self.context}


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc and doc.strip() else ""


# --- Submission errors (docs/architecture.md) -----------------------------------------------------


class Malformed(CharterError):
    """The body is not a valid submission."""

    code = "malformed"
    http_status = 400


class BadSignature(CharterError):
    """The signature does not verify."""

    code = "bad_signature"
    http_status = 401


class Unauthorized(CharterError):
    """A valid bearer token is required."""

    code = "unauthorized"
    http_status = 401


class UnknownActor(CharterError):
    """The signing key is not registered."""

    code = "unknown_actor"
    http_status = 403


class ForbiddenRole(CharterError):
    """The actor holds none of the roles this action grants."""

    code = "forbidden_role"
    http_status = 403


class ReservedField(CharterError):
    """input.meta.automation is reserved for the automation worker."""

    code = "reserved_field"
    http_status = 403


class Forbidden(CharterError):
    """The token lacks the scope this request needs."""

    code = "forbidden"
    http_status = 403


class UnknownProcess(CharterError):
    """No such process."""

    code = "unknown_process"
    http_status = 404


class UnknownWorkflow(CharterError):
    """No workflow is deployed at that path."""

    code = "unknown_workflow"
    http_status = 404


class UnknownAction(CharterError):
    """The workflow defines no such action."""

    code = "unknown_action"
    http_status = 404


class NotFound(CharterError):
    """Not found."""

    code = "not_found"
    http_status = 404


class StalePrev(CharterError):
    """`prev` is not the process head: re-read the head and sign again."""

    code = "stale_prev"
    http_status = 409


class Duplicate(CharterError):
    """It already exists."""

    code = "duplicate"
    http_status = 409


class TooLarge(CharterError):
    """The body is over the size limit."""

    code = "too_large"
    http_status = 413


class WrongState(CharterError):
    """The process is not in a state this action runs from."""

    code = "wrong_state"
    http_status = 422


class ConditionFailed(CharterError):
    """The action's `when` condition is false."""

    code = "condition_failed"
    http_status = 422


class InvalidInput(CharterError):
    """The input does not satisfy the action's schema."""

    code = "invalid_input"
    http_status = 422


class NotDue(CharterError):
    """The scheduled occurrence is not due yet by the engine's clock."""

    code = "not_due"
    http_status = 422


class WorkflowMismatch(CharterError):
    """The envelope names a different workflow than the process runs."""

    code = "workflow_mismatch"
    http_status = 422


class ClockSkew(CharterError):
    """`at` is too far from the server clock."""

    code = "clock_skew"
    http_status = 422


class BadDisclosure(CharterError):
    """A disclosure does not match the envelope's `sd` or is not in its strict form."""

    code = "bad_disclosure"
    http_status = 422


class PersonalInClear(CharterError):
    """A personal field was sent in clear."""

    code = "personal_in_clear"
    http_status = 422


class InvalidWorkflow(CharterError):
    """The workflow definition is invalid."""

    code = "invalid_workflow"
    http_status = 422


# --- Infrastructure errors -------------------------------------------------------------


class ConfigurationError(CharterError):
    """Charter is not configured correctly."""

    code = "configuration"


class KeyFileError(CharterError):
    """The key file cannot be used."""

    code = "key_file"


class DatabaseUnavailable(CharterError):
    """The database cannot be reached."""

    code = "database_unavailable"
    http_status = 503
    retryable = True


class SerializationConflict(CharterError):
    """A concurrent transaction conflicted; try again."""

    code = "serialization_conflict"
    http_status = 503
    retryable = True


class PermissionDenied(CharterError):
    """The database role may not do that."""

    code = "permission_denied"
    http_status = 403


class AppendOnlyViolation(CharterError):
    """Append-only rows cannot be changed or removed."""

    code = "append_only"
    http_status = 409


class ChainViolation(CharterError):
    """The event does not extend its process head."""

    code = "chain_violation"
    http_status = 409


class IntegrityViolation(CharterError):
    """The change breaks a database constraint."""

    code = "integrity"
    http_status = 409


class LeaseLost(CharterError):
    """The work row is no longer claimed under this lease."""

    code = "lease_lost"
    http_status = 409


class MigrationError(CharterError):
    """A migration failed."""

    code = "migration"


# --- Key errors ------------------------------------------------------------------------


class InvalidPublicKey(CharterError):
    """Not a valid Ed25519 public key (64 lowercase hex, canonical, not small-order)."""

    code = "invalid_public_key"
    http_status = 422


class AutomationRolesFixed(CharterError):
    """The automation actor holds the AUTOMATION role alone: its roles cannot be changed."""

    code = "automation_roles_fixed"
    http_status = 422


class InvalidSecretKey(CharterError):
    """Not a valid Ed25519 secret key (a 32-byte seed as 64 lowercase hex)."""

    code = "invalid_secret_key"
