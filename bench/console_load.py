"""The console over 100,000 processes: how fast the API answers what /console/processes
and the overview ask for, how long until the process list shows its first rows in
Chromium, and which plans PostgreSQL picks for the list and the counts.

Data: a fresh database, `--processes` head-less processes inserted by one set-based
INSERT ... SELECT generate_series (bench/operator_api.py's `load`, as `charter.processes`
holds a process before its first event; the statement goes through every CHECK and
trigger of the migrated schema), 20 workflows, 4 states, update times over 30 days; then
ANALYZE. The API runs in its own process (uvicorn, as `charter serve` runs it).

(a) API latency: `--requests` requests per case after 10 warm-up requests, one
keep-alive connection from this process: the first page of GET /v1/processes (limit 50,
what the console asks for), a page `--pages` deep by keyset cursor, and GET /v1/stats.
p50 and p99 in ms.

(b) Page load: Chromium (Debian's, /usr/bin/chromium or CHARTER_CHROMIUM) through
Playwright opens /console/processes signed in (the token put in sessionStorage before
the page's scripts run). The time is `performance.now()` — milliseconds since navigation
start — at the first animation frame after the list's first row is in the DOM, recorded
by a MutationObserver the harness installs (Playwright's init script, outside the page's
CSP). "cold": a new browser context per load (empty cache: shell, scripts, styles and
API calls); "warm": a second load in the same context (the immutable assets cached).
`--loads` loads of each: median (min-max).

Plans: EXPLAIN (ANALYZE, BUFFERS) of the list query as the API runs it (first page and
the deep page) and of the per-workflow-and-state count behind /v1/stats; the script says
whether the list's plan scans the processes table sequentially.

Run: python bench/console_load.py [--processes 100000] [--requests 200] [--loads 5]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from playwright.sync_api import Browser, sync_playwright

from charter.db.queries import query
from charter.operator.paging import decode_cursor
from common import print_results, scratch_database
from operator_api import load, start_api, summary, time_calls

CHROMIUM = Path(os.environ.get("CHARTER_CHROMIUM", "/usr/bin/chromium"))
TOKEN_KEY = "charter.console.token"  # console/static/js/api.js keeps the token here

# Runs in every new document before the console's scripts: signs in, and notes when the
# first row of the process list is in the DOM (at the next frame, when it can be drawn).
WATCH_ROWS = """
sessionStorage.setItem(%(key)s, %(token)s);
new MutationObserver((_, observer) => {
  if (!document.querySelector("#results tbody tr")) return;
  observer.disconnect();
  requestAnimationFrame(() => { window.__firstRows = performance.now(); });
}).observe(document, { childList: true, subtree: true });
"""


# --- (a) the API ------------------------------------------------------------------------


def deep_cursor(http: httpx.Client, pages: int) -> str:
    """The cursor of page `pages` (walked page by page, as the console's More does)."""
    cursor: str | None = None
    for _ in range(pages - 1):
        params: dict[str, Any] = {"limit": 50, **({"cursor": cursor} if cursor else {})}
        response = http.get("/v1/processes", params=params)
        assert response.status_code == 200, response.text
        cursor = response.json()["next_cursor"]
        assert cursor is not None, "fewer processes than pages"
    assert cursor is not None
    return cursor


def api_latency(http: httpx.Client, cursor: str, args: argparse.Namespace) -> list[dict[str, str]]:
    def call(path: str, **params: object) -> Any:
        def once() -> object:
            response = http.get(path, params=params)  # type: ignore[arg-type]
            assert response.status_code == 200, response.text
            return response

        return once

    cases = {
        "GET /v1/processes first page (limit 50)": call("/v1/processes", limit=50),
        f"GET /v1/processes page {args.pages} by cursor": call(
            "/v1/processes", limit=50, cursor=cursor
        ),
        "GET /v1/stats": call("/v1/stats"),
    }
    return [
        {"request": name, **summary([time_calls(once, args.requests)])}
        for name, once in cases.items()
    ]


# --- (b) the page -----------------------------------------------------------------------


def page_loads(browser: Browser, api: str, token: str, loads: int) -> dict[str, list[float]]:
    """Milliseconds from navigation start to the first rows, cold and warm."""
    script = WATCH_ROWS % {"key": json.dumps(TOKEN_KEY), "token": json.dumps(token)}
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    for _ in range(loads):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(script)
        tab = context.new_page()
        try:
            for kind in ("cold", "warm"):
                tab.goto(api + "/console/processes", wait_until="commit")
                # wait_for_function would evaluate its predicate with eval, which the
                # console's CSP refuses; a selector wait and evaluate go around it.
                tab.wait_for_selector("#results tbody tr", timeout=60_000)
                noted = None
                while noted is None:
                    noted = tab.evaluate("window.__firstRows ?? null")
                times[kind].append(float(noted))
        finally:
            context.close()
    return times


# --- plans ------------------------------------------------------------------------------


def list_parameters(cursor: str | None) -> dict[str, object]:
    """The parameters charter.operator.reads.list_processes passes for an unfiltered page."""
    start = decode_cursor(cursor)
    return {
        "workflow": None,
        "workflow_prefix": None,
        "state": None,
        "parent": None,
        "updated_after": None,
        "updated_before": None,
        "id_like": None,
        "before_at": start.at if start else None,
        "before_id": start.id if start else None,
        "limit": 51,
    }


def explain(url: str, sql: str, params: dict[str, object]) -> str:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + sql,
            params,
            prepare=False,
        ).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def plans(url: str, cursor: str, pages: int) -> bool:
    """Print the plans; True when neither list plan scans processes sequentially."""
    indexed = True
    for name, params in (
        ("first page", list_parameters(None)),
        (f"page {pages} by cursor", list_parameters(cursor)),
    ):
        plan = explain(url, query("list_processes"), params)
        seq_scan = "Seq Scan on processes" in plan
        indexed &= not seq_scan
        print(f"\nEXPLAIN list_processes, {name}:" + (" SEQ SCAN" if seq_scan else ""))
        print(plan)
    print("\nEXPLAIN process_counts (GET /v1/stats):")
    print(explain(url, query("process_counts"), {}))
    return indexed


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def main(args: argparse.Namespace) -> None:
    if not CHROMIUM.exists():
        raise SystemExit(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    with scratch_database("console") as url:
        started = time.perf_counter()
        token = load(url, args.processes)
        print(f"seeded {args.processes:,} processes in {time.perf_counter() - started:.1f} s")
        api, server = start_api(url)
        try:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=api, headers=headers, timeout=60) as http:
                cursor = deep_cursor(http, args.pages)
                rows = api_latency(http, cursor, args)
            print_results(
                f"API over {args.processes:,} processes: {args.requests} requests per case",
                rows,
                width=120,
            )
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
                try:
                    times = page_loads(browser, api, token, args.loads)
                finally:
                    browser.close()
            print_results(
                f"/console/processes, navigation start → first rows, {args.loads} loads:"
                " median (min-max) ms",
                [{"cache": kind, "ms": spread(values)} for kind, values in times.items()],
                width=120,
            )
        finally:
            server.terminate()
            server.join(timeout=30)
        indexed = plans(url, cursor, args.pages)
        print(
            "\nlist plans: "
            + ("index scans only" if indexed else "a sequential scan of processes (see above)")
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200, help="requests per API case")
    parser.add_argument("--pages", type=int, default=20, help="how deep the cursor case goes")
    parser.add_argument("--loads", type=int, default=5, help="page loads, cold and warm")
    main(parser.parse_args())
