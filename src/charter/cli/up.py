"""`charter up`: the whole of Charter in one process."""

from __future__ import annotations

import typer

from charter.core.config import DEFAULT_HOST, DEFAULT_PORT


def up(
    host: str = typer.Option(DEFAULT_HOST, help="Address to listen on."),
    port: int = typer.Option(DEFAULT_PORT, help="Port to listen on."),
    demo: bool = typer.Option(
        False, "--demo", help="Deploy the onboarding demo and drive it live."
    ),
    cron_interval: float = typer.Option(
        5.0, "--cron-interval", min=0.1, help="Seconds between cron admission ticks."
    ),
) -> None:
    """Start Charter: database, migrations, API, automation worker and cron admission.

    The database is embedded unless CHARTER_DATABASE_URL is set; Ctrl-C stops
    everything cleanly.
    """
    from charter.cli.stack import start

    start(host, port, demo=demo, cron_interval=cron_interval)
