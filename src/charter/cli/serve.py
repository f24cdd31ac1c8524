"""`charter serve`: the HTTP API alone, so API and workers scale as separate processes."""

from __future__ import annotations

from functools import partial

import typer

from charter.cli.options import LogFormat, LogFormatName, LogLevel, LogLevelName, setup_telemetry
from charter.core.config import DEFAULT_HOST, DEFAULT_PORT


def serve(
    host: str = typer.Option(DEFAULT_HOST, help="Address to listen on."),
    port: int = typer.Option(DEFAULT_PORT, help="Port to listen on."),
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
    workers: int = typer.Option(
        1,
        min=1,
        help="API processes sharing the port, each with its own database pool: one"
        " process uses about one core.",
    ),
) -> None:
    """Serve the HTTP API alone: no automation worker, no cron admission.

    Run `charter worker` beside it for those: as many API and worker
    processes as you need, on any hosts, against one database
    (CHARTER_DATABASE_URL, or the embedded one, like `charter up`).

    It never migrates: a database that lacks a migration of this release
    is refused, with a pointer to `charter db migrate`. A schema change is
    one deliberate deploy step, run once before new API processes start,
    not a side effect of every replica booting (replicas racing each
    other, or one canary of a new release changing the schema under the
    whole fleet).
    """
    from charter.cli.serving import serve_api

    telemetry = partial(setup_telemetry, log_level, log_format, "charter-api")
    telemetry()
    serve_api(host, port, workers, telemetry)
