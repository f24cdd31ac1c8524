"""Deploy plans at 10,000 and 100,000 live processes at one path: how long
`Planner.plan` takes (in the route's REPEATABLE READ READ ONLY snapshot), the same through
`POST /v1/workflows/plan` on a live API, and the deploy guard refusing a deploy that
strands processes (`deploy_guarded` in a transaction rolled back, and `POST /v1/workflows`
answering 409).

The path runs an order workflow (open → packed → shipped → delivered, packing starts a
`nudge` timer of an AUTOMATION `remind`). Its processes are written through the engine's
own write path (`Engine.process_within`, many signed events per transaction, each
verified, decided and written as `process_event` does): 40 % open, 30 % packed, 20 %
shipped, 10 % delivered, every process past `open` with its `nudge` timer active. Three
candidate definitions are planned against it:

- noop: the same actions, a description added (no history is replayed);
- typical: `shipped`, `delivered`, `ship`, `deliver` and `remind` dropped, and `pack`'s
  schedule with them (stranded processes, orphaned timers, and the replay of the
  histories that used `pack`, `ship` or `deliver`);
- rule: `open` gets a `when` (every history is replayed, up to its first event: a rule
  that only accepts or refuses changes no state or data, so the events after the last
  changed one decide as they did);
- worst: `open` sets a field (every event of every history is replayed: the data each
  leaves may differ now).

Each size is populated once; then every case is timed in turn, size after size, for
`--runs` interleaved rounds. Figures are printed, never asserted.

Run: python bench/lifecycle.py [--sizes 10000,100000] [--runs 3] [--database URL]
[--explain]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432) unless --database names a database; by default each size gets a scratch
database of its own, dropped at the end.
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.process import BaseProcess
from typing import Any

import httpx
import psycopg
import uvicorn

from charter.api.app import create_app
from charter.auth.tokens import create_token
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.errors.workflows import StrandsProcesses
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role, connect
from charter.db.migrate import migrate
from charter.db.queries import query
from charter.engine import actors
from charter.engine.effects import Tally
from charter.engine.process_event import Engine
from charter.engine.registry import Registry, parse_definition
from charter.lifecycle.guard import deploy_guarded
from charter.lifecycle.plan import DeployPlan, Planner
from charter.lifecycle.store import PlanReads, one_snapshot
from common import free_port, machine_summary, print_results, scratch_database

ORDER: JsonObject = {
    "dsl": 2,
    "states": ["open", "packed", "shipped", "delivered"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "pack": {
            "role": "clerk", "from": "open", "to": "packed",
            "schedule": [{"id": "nudge", "action": "remind", "in": "1h", "data": {}}],
        },
        "remind": {"type": "update", "role": "AUTOMATION", "from": "packed",
                   "mutate": {"$inc": {"reminders": 1}}},
        "ship": {"role": "clerk", "from": "packed", "to": "shipped"},
        "deliver": {"role": "clerk", "from": "shipped", "to": "delivered"},
    },
}  # fmt: skip
WALK = ("open", "pack", "ship", "deliver")
# Of every 10 processes: how many actions of WALK each has run (40/30/20/10 %).
SPREAD = (1, 1, 1, 1, 2, 2, 2, 3, 3, 4)
CHUNK = 250  # processes written in one transaction
FIRST_IDS = 100  # what a plan page lists (the route's default)


def noop() -> JsonObject:
    changed = copy.deepcopy(ORDER)
    changed["description"] = "Orders, from opening to delivery."
    return changed


def typical() -> JsonObject:
    """No shipping: `shipped`/`delivered` and the actions into and out of them go, and
    the reminder with `pack`'s schedule of it."""
    changed: Any = copy.deepcopy(ORDER)
    changed["states"] = ["open", "packed"]
    for name in ("ship", "deliver", "remind"):
        del changed["actions"][name]
    del changed["actions"]["pack"]["schedule"]
    return dict(changed)


def rule() -> JsonObject:
    """A rule of the action every history starts with changes: every history replays
    its first event."""
    changed: Any = copy.deepcopy(ORDER)
    changed["actions"]["open"]["when"] = "true"
    return dict(changed)


def worst() -> JsonObject:
    """The data the action every history starts with leaves changes: every event of
    every history replays."""
    changed: Any = copy.deepcopy(ORDER)
    changed["actions"]["open"]["mutate"] = {"$set": {"channel": "web"}}
    return dict(changed)


CASES: dict[str, Callable[[], JsonObject]] = {
    "noop": noop, "typical": typical, "rule": rule, "worst": worst,
}  # fmt: skip


# --- population ---------------------------------------------------------------------------


_worker: dict[str, Any] = {}


def _worker_start(url: str, key_hex: str) -> None:
    database = Database(url, max_size=1)
    _worker.update(database=database, engine=Engine(database), key=SecretKey.from_hex(key_hex))


def _write_chunk(path: str, processes: Sequence[tuple[str, int]]) -> int:
    """Write each process's first `steps` actions of WALK, signed, in one transaction."""
    database: Database = _worker["database"]
    engine: Engine = _worker["engine"]
    key: SecretKey = _worker["key"]
    events = 0
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        for process, steps in processes:
            head: str | None = None
            for action in WALK[:steps]:
                envelope = Envelope(
                    v=1, process=process, workflow=path, action=action, input={}, prev=head,
                    actor=key.public_key_hex, at=format_rfc3339(datetime.now(UTC)),
                )  # fmt: skip
                accepted = engine.process_within(
                    conn, sign(envelope, key), Tally(), caller=Role.ENGINE
                )
                head = accepted.hash
                events += 1
    return events


def populate(url: str, path: str, size: int, workers: int) -> None:
    """`size` processes at `path` (deployed first), unless the path has them already."""
    with Database(url, max_size=1) as database, database.connection(Role.ENGINE) as conn:
        row = conn.execute(
            "SELECT count(*) FROM charter.processes WHERE workflow_path = %s", (path,)
        ).fetchone()
        conn.commit()
        if row is not None and int(str(row[0])) == size:
            print(f"{path}: {size:,} processes there already")
            return
        if row is not None and int(str(row[0])) != 0:
            raise SystemExit(f"{path} holds {row[0]} processes, not {size}: use another database")
        key = SecretKey.generate()
        with conn.transaction():
            Registry().deploy(conn, path, ORDER)
            actors.add_actor(conn, f"clerk-{size}", key.public_key_hex, ["clerk"])
    tag = path.rsplit("/", 1)[-1]
    plan = [(f"{tag}-{n:07d}", SPREAD[n % len(SPREAD)]) for n in range(size)]
    chunks = [plan[i : i + CHUNK] for i in range(0, size, CHUNK)]
    started = time.perf_counter()
    events = 0
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_worker_start, initargs=(url, key.hex())
    ) as pool:
        for done, written in enumerate(pool.map(_write_chunk, [path] * len(chunks), chunks), 1):
            events += written
            if done % 40 == 0 or done == len(chunks):
                elapsed = time.perf_counter() - started
                rate = events / elapsed
                print(f"  {path}: {done * CHUNK:,}/{size:,} processes, {events:,} events, "
                      f"{elapsed:,.0f} s ({rate:,.0f} events/s)", flush=True)  # fmt: skip
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("VACUUM ANALYZE")


# --- the measured operations --------------------------------------------------------------


@dataclass
class Target:
    size: int
    url: str
    path: str
    database: Database
    registry: Registry
    api: httpx.Client


def planned(target: Target, definition: JsonObject) -> DeployPlan:
    """What the route does: parse, then plan in one REPEATABLE READ READ ONLY snapshot."""
    workflow = parse_definition(target.path, definition)
    with target.database.connection(Role.READER) as conn, conn.transaction():
        one_snapshot(conn)
        return Planner(conn, target.registry, target.path, definition, workflow).plan()


def planned_over_http(target: Target, definition: JsonObject) -> JsonObject:
    response = target.api.post(
        "/v1/workflows/plan", json={"path": target.path, "definition": definition}
    )
    response.raise_for_status()
    answer: JsonObject = response.json()
    return answer


def guard_refuses(target: Target, definition: JsonObject) -> None:
    """`deploy_guarded` as `POST /v1/workflows` calls it, in a transaction rolled back."""
    with target.database.connection(Role.ENGINE) as conn:
        try:
            with conn.transaction(force_rollback=True):
                deploy_guarded(conn, target.registry, target.path, definition,
                               deployed_by="bench", deployed_by_token=None)  # fmt: skip
        except StrandsProcesses:
            return
    raise RuntimeError("the guard let the typical change through")


def guard_refuses_over_http(target: Target, definition: JsonObject) -> None:
    response = target.api.post(
        "/v1/workflows", json={"path": target.path, "definition": definition}
    )
    if response.status_code != 409:
        raise RuntimeError(f"expected 409, got {response.status_code}: {response.text[:200]}")


COUNTS = ("replayed", "events replayed")  # of `phases`' figures, those that are no times


def phases(target: Target, definition: JsonObject) -> dict[str, float]:
    """Where one plan's time goes: each read of `PlanReads`, and the replay (ms)."""
    from charter.lifecycle.divergence import first_divergence

    spent: dict[str, float] = {}

    @contextmanager
    def timed(name: str) -> Iterator[None]:
        began = time.perf_counter()
        yield
        spent[name] = spent.get(name, 0.0) + (time.perf_counter() - began) * 1000

    with target.database.connection(Role.READER) as conn, conn.transaction():
        one_snapshot(conn)
        reads = PlanReads(conn, target.path)
        workflow = parse_definition(target.path, definition)
        planner = Planner(conn, target.registry, target.path, definition, workflow)
        with timed("state groups"):
            planner.groups()
        with timed("replay targets"):
            _, replayed = planner.replay_targets()
        histories = iter(reads.histories(replayed))
        events = 0
        while True:
            with timed("histories read"):
                history = next(histories, None)
            if history is None:
                break
            with timed("replay (decide)"):
                first_divergence(history.process, history.parent, workflow, history.events)
            events += len(history.events)
    spent["replayed"] = float(len(replayed))
    spent["events replayed"] = float(events)
    return spent


# --- the API --------------------------------------------------------------------------------


def _serve(url: str, port: int) -> None:
    database = Database(url, max_size=4)
    settings = Settings(database_url=url, api_url=f"http://127.0.0.1:{port}")
    app = create_app(database, settings=settings)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


@contextmanager
def live_api(url: str) -> Iterator[httpx.Client]:
    """`create_app` under uvicorn in a process of its own, and a client with a `*` token."""
    with (
        Database(url, max_size=1) as database,
        database.connection(Role.ENGINE) as conn,
        conn.transaction(),
    ):
        token = create_token(conn, scopes=["*"], name="bench", principal="bench")
    port = free_port()
    process: BaseProcess = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(url, port), daemon=True
    )
    process.start()
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the API did not start")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
            yield client
    finally:
        process.terminate()
        process.join(10)


# --- the run --------------------------------------------------------------------------------


def counts_of(plan: DeployPlan | JsonObject) -> tuple[int, int, int | None]:
    counts = plan.counts() if isinstance(plan, DeployPlan) else plan["counts"]
    assert isinstance(counts, dict)
    diverging = counts.get("diverging")
    return (int(str(counts["stranded"])), int(str(counts["orphaned_work"])),
            None if diverging is None else int(str(diverging)))  # fmt: skip


def main(args: argparse.Namespace) -> None:
    sizes: list[int] = args.sizes
    load = os.getloadavg()[0]
    with ExitStack() as stack:
        targets: list[Target] = []
        for size in sizes:
            if args.database:
                url = args.database
                with connect(url) as conn:
                    migrate(conn)
            else:
                url = stack.enter_context(scratch_database(f"lifecycle_{size}"))
            path = f"bench/orders-{size}"
            populate(url, path, size, args.workers)
            database = stack.enter_context(Database(url, max_size=2))
            api = stack.enter_context(live_api(url))
            targets.append(Target(size, url, path, database, Registry(), api))
        print(f"load average {load:.2f} before populating, {os.getloadavg()[0]:.2f} before timing")

        operations: list[tuple[str, str, Callable[[Target, JsonObject], object]]] = [
            (name, "Planner.plan", planned) for name in CASES
        ] + [(name, "POST /v1/workflows/plan", planned_over_http) for name in CASES] + [
            ("typical", "deploy_guarded refuses (rolled back)", lambda t, d: guard_refuses(t, d)),
            ("typical", "POST /v1/workflows 409", lambda t, d: guard_refuses_over_http(t, d)),
        ]  # fmt: skip
        definitions = {name: make() for name, make in CASES.items()}
        seconds: dict[tuple[int, str, str], list[float]] = {}
        found: dict[tuple[int, str, str], tuple[int, int, int | None]] = {}
        for target in targets:  # warm: caches, the registry, the API's pools
            for name, _how, operation in operations:
                if name == "noop":
                    operation(target, definitions[name])
        for round_ in range(args.runs):
            for target in targets:
                for name, how, operation in operations:
                    began = time.perf_counter()
                    answer = operation(target, definitions[name])
                    elapsed = time.perf_counter() - began
                    seconds.setdefault((target.size, name, how), []).append(elapsed)
                    if isinstance(answer, DeployPlan | dict):
                        found[(target.size, name, how)] = counts_of(answer)
            print(f"round {round_ + 1}/{args.runs} done, load {os.getloadavg()[0]:.2f}", flush=True)

        rows: list[dict[str, object]] = []
        for target in targets:
            for name, how, _ in operations:
                times = seconds[(target.size, name, how)]
                stranded, orphaned, diverging = found.get((target.size, name, how), ("", "", ""))
                rows.append({
                    "live processes": target.size,
                    "case": name,
                    "measured": how,
                    "stranded": stranded,
                    "orphaned work": orphaned,
                    "diverging": "" if diverging is None else diverging,
                    "s median (min-max)": spread(times),
                })  # fmt: skip
        title = (f"Deploy plans, {args.runs} interleaved rounds; median (min-max) seconds; "
                 f"goal ≤ 2 s at 100,000")  # fmt: skip
        print_results(title, rows, width=150)

        breakdown: list[dict[str, object]] = []
        for target in targets:
            for name in ("typical", "rule", "worst"):
                spent = phases(target, definitions[name])
                breakdown.append({"live processes": target.size, "case": name,
                                  **{k: (f"{v:,.0f}" if k in COUNTS else f"{v:,.1f}")
                                     for k, v in spent.items()}})  # fmt: skip
        print_results("Where one plan's time goes (ms; one instrumented plan each)", breakdown,
                      width=150)  # fmt: skip
        if args.explain:
            explain(targets[-1], definitions["worst"])


def explain(target: Target, definition: JsonObject) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the plan's queries at the largest size."""
    with target.database.connection(Role.READER) as conn, conn.transaction():
        one_snapshot(conn)
        reads = PlanReads(conn, target.path)
        pairs = sorted(set(reads.event_pairs()))
        spans = reads.changed_spans(pairs, set())[:1000]
    versions = [v for v, _ in pairs]
    statements: dict[str, dict[str, object]] = {
        "plan_state_counts": {"path": target.path},
        "plan_live_work_counts": {"path": target.path},
        "plan_event_pairs": {"path": target.path},
        "plan_changed_spans": {
            "path": target.path, "versions": versions, "actions": [a for _, a in pairs],
            "reshapes": [False for _ in pairs],
        },
        "plan_histories": {"ids": [s.process for s in spans],
                           "upto": [s.last_seq for s in spans]},
        "plan_processes_in_states": {
            "path": target.path, "states": ["packed", "shipped", "delivered"], "after": "",
            "limit": FIRST_IDS + 1,
        },
    }  # fmt: skip
    print(f"\nEXPLAIN (ANALYZE, BUFFERS) at {target.size:,} processes ({machine_summary()})")
    with psycopg.connect(target.url) as conn:
        for name, params in statements.items():
            rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {query(name)}", params).fetchall()
            print(f"\n-- {name}")
            # Cut long lines: the id arrays of plan_histories are a thousand ids.
            print("\n".join(str(row[0])[:160] for row in rows))


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else "",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]) if __doc__ else None,
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[10_000, 100_000],
        help="live processes at the path, comma-separated (default 10000,100000)",
    )
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds (>= 3)")
    parser.add_argument(
        "--database",
        metavar="URL",
        help="populate and plan in this database (a path per size), kept "
        "afterwards so a second run reuses it; every size's rows are "
        "then in one database",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="processes writing the events (default 2)"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print EXPLAIN ANALYZE of the plan's queries at the largest size",
    )
    args = parser.parse_args()
    if args.runs < 3:
        parser.error("--runs must be at least 3")
    return args


def _sizes(text: str) -> list[int]:
    return sorted(int(part.replace("_", "")) for part in text.split(",") if part)


if __name__ == "__main__":
    main(parse())
