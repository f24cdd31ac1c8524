"""The Procrastinate app of the automation benchmark: one task that writes one row.

Its workers run as `python -m procrastinate --app automation_tasks.app worker`, reading
the database from CHARTER_BENCH_PROCRASTINATE_URL; this module imports nothing but
Procrastinate, so a worker process holds what a Procrastinate user's would.
"""

from __future__ import annotations

import os

import procrastinate

TASK = "bench_write"

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(
        conninfo=os.environ.get("CHARTER_BENCH_PROCRASTINATE_URL", "")
    )
)


@app.task(name=TASK)
async def bench_write(tag: str) -> None:
    """The work of one job: one row in a plain table (no trigger, no NOTIFY)."""
    await app.connector.execute_query_async(
        "INSERT INTO public.bench_fired (tag) VALUES (%(tag)s)", tag=tag
    )
