"""The transparency log over HTTP (docs/transparency-log.md): checkpoint, tiles, proofs and status.

Everything is read from the log directory, never rebuilt from PostgreSQL (Tessera's
lesson: serve tiles from files). Only the proof route asks the database, for the leaf
index of an event, and checks it against the entry bundle before proving it. Reads need
the scope `log:read`, or nothing when CHARTER_LOG_PUBLIC=1.
"""

from __future__ import annotations

import gzip
import re
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from charter.api.auth import bearer, require
from charter.api.contract import errors
from charter.api.models import LogStatus
from charter.api.state import Services, services
from charter.core.errors import Malformed
from charter.core.errors.log import LogNotConfigured, NotLogged, TileMissing
from charter.db.database import Role
from charter.tlog import metrics as _log_metrics  # noqa: F401 (its families on /metrics)
from charter.tlog import store
from charter.tlog.config import LogSettings
from charter.tlog.logdir import LogDirectory
from charter.tlog.serving import consistency_proof, inclusion_proof
from charter.tlog.status import log_status
from charter.tlog.tiles import parse_tile_path

router = APIRouter(prefix="/v1/log", tags=["transparency log"])

_HEX64 = re.compile("[0-9a-f]{64}")
_TEXT = "text/plain; charset=utf-8"
_LATEST = "max-age=5"
_IMMUTABLE = "public, max-age=31536000, immutable"
_require_log_read = require("log:read")


def log_settings(request: Request) -> LogSettings:
    settings = getattr(request.app.state, "log_settings", None)
    if settings is None:
        settings = request.app.state.log_settings = LogSettings.from_env()
    return cast(LogSettings, settings)


def log_reader(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    context: Annotated[Services, Depends(services)],
) -> LogDirectory:
    """The log directory, once the caller may read it; 404 `log_not_configured` without one."""
    settings = log_settings(request)
    if not settings.public:
        _require_log_read(credentials, context)
    log = settings.log_directory()
    if not log.exists():
        raise LogNotConfigured()
    return log


Log = Annotated[LogDirectory, Depends(log_reader)]
_NO_LOG = "`log_not_configured`: this deployment has no transparency log."
_SCOPE = {
    401: "`unauthorized`: no bearer token, or an unknown or revoked one (unless the log is "
    "public, CHARTER_LOG_PUBLIC=1).",
    403: "`forbidden`: the token lacks `log:read`.",
}


def _text(description: str, why: dict[int, str], media: str = _TEXT) -> dict[str, Any]:
    """`responses=` of a route answering text (or bytes) on success."""
    schema = {"type": "string"} | ({} if media == _TEXT else {"format": "binary"})
    success = {200: {"content": {media: {"schema": schema}}, "description": description}}
    return {"response_class": Response, "responses": success | errors(404, why=_SCOPE | why)}


@router.get(
    "/checkpoint",
    **_text(
        "The latest published checkpoint: a C2SP signed note (tlog-checkpoint), "
        "signed by the log key and cosigned by the witnesses.",
        {404: _NO_LOG},
    ),
)
def get_log_checkpoint(log: Log) -> Response:
    """The latest published checkpoint (a C2SP signed note)."""
    note = log.checkpoint_note() or b""
    return Response(note, media_type=_TEXT, headers={"Cache-Control": _LATEST})


@router.get(
    "/tile/{path:path}",
    **_text(
        "A tlog-tiles hash tile (`<L>/<N>[.p/<W>]`) or entry bundle (`entries/<N>[.p/<W>]`);"
        " every tile is immutable (a wider partial tile has a path of its own). Entry bundles"
        " are gzip-compressed for a client that accepts it (`Accept-Encoding: gzip`).",
        {
            400: "`tile_path_malformed`: not a canonical tlog-tiles path.",
            404: "`tile_missing` (no such tile yet) or `log_not_configured`.",
        },
        "application/octet-stream",
    ),
)
def get_log_tile(path: str, log: Log, request: Request) -> Response:
    """A tlog-tiles hash tile or entry bundle. None ever changes: a partial tile of width W
    holds the first W hashes (or entries) of its full tile, which are fixed once logged,
    and a wider one is another path."""
    wanted = parse_tile_path(f"tile/{path}")
    data = log.tiles.get(wanted.path())
    if data is None:
        raise TileMissing(f"no tile {wanted.path()}", path=wanted.path())
    headers = {"Cache-Control": _IMMUTABLE}
    if wanted.entries:
        # Entries compress (process keys repeat, seqs are small); hashes do not.
        headers["Vary"] = "Accept-Encoding"
        if _accepts_gzip(request.headers.get("accept-encoding", "")):
            data = gzip.compress(data, mtime=0)
            headers["Content-Encoding"] = "gzip"
    return Response(data, media_type="application/octet-stream", headers=headers)


def _accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding value lists gzip (or `*`) with a non-zero q."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip().replace(" ", "")
        return quality not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


@router.get(
    "/proof/{event_hash}",
    **_text(
        "A c2sp.org/tlog-proof@v1 text: index, audit path and the cosigned checkpoint.",
        {
            400: "`malformed`: the hash is not 64 lowercase hex characters.",
            404: "`not_logged`: the event is not in a published checkpoint (yet), or no "
            "checkpoint of `size` was published; or `log_not_configured`.",
        },
    ),
)
def get_log_proof(
    event_hash: str,
    log: Log,
    context: Annotated[Services, Depends(services)],
    size: Annotated[
        int | None, Query(ge=1, description="A checkpoint size to prove against.")
    ] = None,
) -> Response:
    """A c2sp.org/tlog-proof@v1 of the event against the latest checkpoint (or the one of
    `size`, as the sequencer recorded it: the proof's reader checks its signatures)."""
    if not _HEX64.fullmatch(event_hash):
        raise Malformed("the event hash is 64 lowercase hex characters")
    with context.database.connection(Role.READER) as conn:
        index = store.index_of(conn, event_hash)
        note = None if size is None else store.checkpoint_note(conn, size)
    if size is not None and note is None:
        raise NotLogged(f"no checkpoint of size {size} was published")
    text = inclusion_proof(log, index, event_hash, note)
    return Response(text, media_type=_TEXT, headers={"Cache-Control": _LATEST})


@router.get(
    "/consistency",
    **_text(
        "RFC 6962 consistency proof hashes, base64, one per line.",
        {400: "`log_proof_range`: not 0 <= from <= to <= the log's size.", 404: _NO_LOG},
    ),
)
def get_log_consistency(
    log: Log, from_: Annotated[int, Query(alias="from", ge=0)], to: Annotated[int, Query(ge=0)]
) -> Response:
    """Base64 RFC 6962 consistency proof lines from tree size `from` to `to` (a
    convenience: the tiles suffice to compute it)."""
    text = consistency_proof(log, from_, to)
    return Response(text, media_type=_TEXT, headers={"Cache-Control": _IMMUTABLE})


@router.get(
    "/status",
    response_model=LogStatus,
    responses=errors(404, why=_SCOPE | {404: _NO_LOG}),
)
def get_log_status(
    log: Log, request: Request, context: Annotated[Services, Depends(services)]
) -> JSONResponse:
    """Origin, size and halt from the log directory, witnessing from the policy; the
    queue's length from the database."""
    report = log_status(log, log_settings(request).policy_path)
    with context.database.connection(Role.READER) as conn:
        pending, oldest = store.pending_count(conn)
    report |= {"pending": pending, "oldest_pending_s": round(oldest, 3)}
    return JSONResponse(report, headers={"Cache-Control": "no-store"})
