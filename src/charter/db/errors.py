"""The one place where PostgreSQL errors become Charter errors.

Charter's own PL/pgSQL raises with SQLSTATEs of class `CH` (Graphile's habit): the code
says what broke, so callers never parse messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg

from charter.core import errors

# SQLSTATEs raised by Charter's triggers and functions (see sql/migrations).
APPEND_ONLY = "CHA01"
CHAIN_VIOLATION = "CHA02"
HEAD_VIOLATION = "CHA03"
IMMUTABLE_COLUMN = "CHA04"
LEASE_MISMATCH = "CHA05"
NOT_FIRED_BY = "CHA06"

# Text the database cannot hold: an invalid byte sequence (22021) or a character with no
# equivalent (22P05: `\u0000` in jsonb). These come from the values a client sent.
CHARACTER_NOT_IN_REPERTOIRE = "22021"
UNTRANSLATABLE_CHARACTER = "22P05"
_UNSTORABLE_TEXT = {CHARACTER_NOT_IN_REPERTOIRE, UNTRANSLATABLE_CHARACTER}

_CHARTER_CODES: dict[str, type[errors.CharterError]] = {
    APPEND_ONLY: errors.AppendOnlyViolation,
    CHAIN_VIOLATION: errors.ChainViolation,
    HEAD_VIOLATION: errors.ChainViolation,
    IMMUTABLE_COLUMN: errors.AppendOnlyViolation,
    LEASE_MISMATCH: errors.LeaseLost,
    NOT_FIRED_BY: errors.IntegrityViolation,
}


# Constraints whose violation is a rule with its own code, not a generic integrity error.
_CONSTRAINTS: dict[str, type[errors.CharterError]] = {
    "automation_actor_roles": errors.AutomationRolesFixed,
}


def translate(exc: psycopg.Error) -> errors.CharterError:
    """Map a psycopg error to the Charter error that says what it means."""
    message = _message(exc)
    sqlstate = exc.sqlstate or ""
    if sqlstate in _CHARTER_CODES:
        return _CHARTER_CODES[sqlstate](message, sqlstate=sqlstate)
    # psycopg refuses NUL in a text parameter itself, before sending: a DataError with no
    # SQLSTATE. Either way the value came from the request: a client error, not a 500.
    if sqlstate in _UNSTORABLE_TEXT or (not sqlstate and isinstance(exc, psycopg.DataError)):
        return errors.Malformed(
            "the request holds text the database cannot store "
            "(NUL, U+0000, or an invalid byte sequence)"
        )
    if isinstance(exc, pg.UniqueViolation):
        constraint = exc.diag.constraint_name or ""
        return errors.Duplicate(message, constraint=constraint)
    constraint = exc.diag.constraint_name or "" if exc.diag else ""
    if isinstance(exc, pg.CheckViolation) and constraint in _CONSTRAINTS:
        return _CONSTRAINTS[constraint](constraint=constraint)
    if isinstance(exc, pg.IntegrityError):
        return errors.IntegrityViolation(message, constraint=exc.diag.constraint_name or "")
    if isinstance(exc, pg.InsufficientPrivilege):
        return errors.PermissionDenied(message)
    if isinstance(exc, pg.SerializationFailure | pg.DeadlockDetected | pg.LockNotAvailable):
        return errors.SerializationConflict(message)
    if _unavailable(exc, sqlstate):
        return errors.DatabaseUnavailable(message)
    return errors.CharterError(f"database error: {message}", sqlstate=sqlstate)


@contextmanager
def translated() -> Iterator[None]:
    """Run a block, re-raising database errors as Charter errors (cause kept)."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc) from exc


def _unavailable(exc: psycopg.Error, sqlstate: str) -> bool:
    """Connection lost or refused, server shutting down or out of connections."""
    if not sqlstate:
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return sqlstate.startswith("08") or sqlstate in _UNAVAILABLE_CODES


_UNAVAILABLE_CODES = {"57P01", "57P02", "57P03", "53300", "58000", "58030"}


def _message(exc: psycopg.Error) -> str:
    primary = exc.diag.message_primary if exc.diag else None
    return primary or str(exc).strip() or type(exc).__name__
