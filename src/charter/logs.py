"""Log output of the long-running commands (`up`, `serve`, `worker`, `machine run`).

Text lines carry a UTC timestamp, the level and the logger; JSON lines (one object per
line, python-json-logger) carry those plus whatever the code knows in context: the
request id, the process and action, the work row or the run. The context lives in
context variables, so it follows a request into the thread that runs its engine work
and never leaks from one request into another.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Literal, TextIO

from pythonjsonlogger.json import JsonFormatter

LogFormat = Literal["text", "json"]
LEVELS = ("debug", "info", "warning", "error")

# What a line may say about where it comes from; set by log_context().
CONTEXT_FIELDS = ("request_id", "process_id", "action", "work_id", "run_id")
_context: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"charter_log_{name}", default=None) for name in CONTEXT_FIELDS
}
_HANDLER_NAME = "charter"
# Said at INFO by libraries, shown only at DEBUG: uvicorn's start-up banner repeats what
# the command prints, httpx logs every request, the pool every reconnect, pgserver every
# command it runs with its whole output.
QUIET_LIBRARIES = ("uvicorn", "uvicorn.error", "httpx", "psycopg.pool", "pgserver")


@contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Lines logged inside the block carry these fields (None leaves a field as it was)."""
    tokens = [(_context[name], _context[name].set(value)) for name, value in fields.items()
              if value is not None]  # fmt: skip
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current(name: str) -> str | None:
    return _context[name].get()


class _ContextFilter(logging.Filter):
    """Copies the context fields onto each record (absent ones stay absent). Named so
    as not to clash with LogRecord's own attributes (`process` is the OS pid)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _context.items():
            value = var.get()
            if value is not None:
                setattr(record, name, value)
        return True


def _utc_stamp(record: logging.LogRecord) -> str:
    """RFC 3339 in UTC with milliseconds, whatever the machine's time zone."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


_LOGGED_MARK = "_charter_logged"


def mark_logged(exc: BaseException) -> None:
    """Say that `exc` has been logged with its traceback: the server's own report of the
    same exception (uvicorn logs what Starlette re-raises after answering 500) is dropped,
    so each 5xx is logged once, by the line that carries its request id."""
    with suppress(AttributeError):
        setattr(exc, _LOGGED_MARK, True)


class _NotTwice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (record.name.startswith("uvicorn") and getattr(exc, _LOGGED_MARK, False))


class _TextFormatter(logging.Formatter):
    """`2026-12-01T12:00:00.123Z INFO charter.access: message [request_id=...]`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_stamp(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        known = [f"{name}={getattr(record, name)}" for name in CONTEXT_FIELDS
                 if hasattr(record, name)]  # fmt: skip
        if not known:
            return line
        first, newline, rest = line.partition("\n")  # a traceback stays below the line
        return f"{first} [{' '.join(known)}]{newline}{rest}"


class _JsonLines(JsonFormatter):
    """One JSON object per line: time, level, logger, message, the context fields and,
    for an exception, its traceback (`exc_info`)."""

    def __init__(self) -> None:
        super().__init__(
            "{asctime}{levelname}{name}{message}",
            style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_stamp(record)


def configure_logging(
    level: str = "info", log_format: LogFormat = "text", stream: TextIO | None = None
) -> None:
    """Send every logger's lines (uvicorn's included) to one handler on stderr.

    uvicorn's own access log is switched off: the API writes its own access line per
    request (charter.access), with the route template instead of the raw path."""
    if level.lower() not in LEVELS:
        raise ValueError(f"unknown log level {level!r} (one of {', '.join(LEVELS)})")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(_JsonLines() if log_format == "json" else _TextFormatter())
    handler.addFilter(_ContextFilter())
    handler.addFilter(_NotTwice())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    # Below DEBUG, libraries say only what needs attention (see QUIET_LIBRARIES).
    quiet = logging.WARNING if root.level > logging.DEBUG else logging.NOTSET
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(quiet)
