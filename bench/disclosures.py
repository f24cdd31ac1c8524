"""What envelope v2's personal fields cost: v1 next to v2 on the client, in the engine and
in verification.

Two workflows of the same shape (a create and an update, both taking the same input of
four fields, the same `mutate`, the same erasure block) differ only in two of those
fields being marked `"x-personal": true` in the second. A v1 event sends all four in
`input`; a v2 event sends two and commits to the other two in `sd`, their disclosures
beside the signature. Each run times, one side after the other on the same machine
state (v1 first in even runs, v2 first in odd ones):

- client: building and signing a submission (v2: `split_personal`, `digests`, the
  envelope, `sign` with the disclosure texts), call by call in turn; µs per submission;
- engine: `process_event` of N pre-signed submissions, in-process, one writer: N / 10
  processes each created then updated 9 times, as bench/engine.py's writers do; the
  signing is done before the clock starts, so only the engine is timed; events/s;
- verification: `verify_process` of one stored process of V events per side, without
  and with replay, as bench/verification.py drives it; events/s.

The ratio is v2 ÷ v1 within a run, so the figures compared share the machine's state;
printed: median and min-max over the runs, and which side the median ratio favours.

Run: python bench/disclosures.py [--events 2000] [--verify-events 2000] [--runs 3]
[--seconds 1.0] [--quick]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import copy
import secrets
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial

from charter.audit.verify_stored import verify_process
from charter.core.disclosures import digests, split_personal
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, sign
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from common import measure_interleaved, print_results, scratch_database

V1, V2 = "v1", "v2"
WORKFLOWS = {V1: "bench/plain", V2: "bench/personal"}
PERSONAL = ("/email", "/name")
UPDATES_PER_PROCESS = 9


def definition(personal: bool) -> JsonObject:
    """The bench workflow; with `personal`, /name and /email are personal fields."""
    mark: JsonObject = {"x-personal": True} if personal else {}
    schema: JsonObject = {
        "type": "object",
        "properties": {
            "name": {"type": "string", **mark},
            "email": {"type": "string", **mark},
            "country": {"type": "string"},
            "n": {"type": "integer"},
        },
    }
    mutate: JsonObject = {"$inc": {"count": 1}, "$set": {"last": "{{ input.n }}"}}
    return {
        "dsl": 2,
        "states": ["open"],
        "roles": ["clerk", "dpo"],
        "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
        "actions": {
            "open": {"type": "create", "role": "clerk", "to": "open",
                     "input": copy.deepcopy(schema), "mutate": copy.deepcopy(mutate)},
            "update": {"type": "update", "role": "clerk", "from": "*",
                       "input": copy.deepcopy(schema), "mutate": copy.deepcopy(mutate)},
        },
    }  # fmt: skip


def form(n: int) -> JsonObject:
    """The full input of an event: two personal fields and two others."""
    return {"name": "Ada Lovelace", "email": f"ada+{n}@example.org", "country": "GB", "n": n}


def submission(
    side: str, key: SecretKey, process: str, action: str, prev: str | None, n: int
) -> Submission:
    """Build and sign one event the way a client does on each side."""
    at = format_rfc3339(datetime.now(UTC))
    workflow = WORKFLOWS[side]
    if side == V1:
        envelope = Envelope(1, process, workflow, action, form(n), prev, key.public_key_hex, at)
        return sign(envelope, key)
    clear, disclosed = split_personal(form(n), PERSONAL)
    envelope = Envelope(
        2, process, workflow, action, clear, prev, key.public_key_hex, at, sd=digests(disclosed)
    )
    return sign(envelope, key, [d.text for d in disclosed])


def history(side: str, key: SecretKey, process: str, events: int) -> list[Submission]:
    """One process's events, signed ahead: its create, then updates chained by hash."""
    chain: list[Submission] = []
    prev: str | None = None
    for n in range(events):
        signed = submission(side, key, process, "update" if n else "open", prev, n)
        prev = signed.envelope.hash()
        chain.append(signed)
    return chain


def batch(side: str, key: SecretKey, events: int) -> list[Submission]:
    """`events` submissions: processes of 1 + UPDATES_PER_PROCESS events, in order."""
    per_process = 1 + UPDATES_PER_PROCESS
    signed: list[Submission] = []
    while len(signed) < events:
        process = f"bench-{side}-{secrets.token_hex(6)}"
        signed += history(side, key, process, min(per_process, events - len(signed)))
    return signed


def apply(engine: Engine, submissions: Sequence[Submission]) -> None:
    for signed in submissions:
        accepted = engine.process_event(signed)
        assert accepted.hash == signed.envelope.hash()


def timed(operation: Callable[[], object]) -> float:
    started = time.perf_counter()
    operation()
    return time.perf_counter() - started


def spread(values: Sequence[float], digits: int = 0) -> str:
    shown = f"{{:,.{digits}f}}".format
    median = shown(statistics.median(values))
    return f"{median} ({shown(min(values))}-{shown(max(values))})"


def verdict(ratios: Sequence[float], *, higher_is_better: bool) -> str:
    """Which side the median v2 ÷ v1 ratio favours, in words."""
    ratio = statistics.median(ratios)
    if higher_is_better:
        change = f"rate {abs(1 - ratio) * 100:.0f} % {'lower' if ratio < 1 else 'higher'}"
        favoured = V1 if ratio < 1 else V2
    else:
        change = f"takes {abs(ratio - 1) * 100:.0f} % {'more' if ratio > 1 else 'less'} time"
        favoured = V1 if ratio > 1 else V2
    return f"v2 {change}: favours {favoured}"


def ordered(run: int) -> tuple[str, str]:
    """The sides in the order run `run` times them: alternated, so neither always leads."""
    return (V1, V2) if run % 2 == 0 else (V2, V1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="process_event, per side")
    parser.add_argument("--verify-events", type=int, default=2000, help="per process")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="client side, per run")
    parser.add_argument("--quick", action="store_true", help="200 events, 3 runs (< 15 s)")
    args = parser.parse_args()
    if args.quick:
        events, verify_events, runs, seconds = 200, 200, 3, 0.2
    else:
        events, verify_events = args.events, args.verify_events
        runs, seconds = max(3, args.runs), args.seconds
    with scratch_database("disclosures") as url, Database(url, max_size=2) as database:
        bench(database, events, verify_events, runs, seconds)


def bench(database: Database, events: int, verify_events: int, runs: int, seconds: float) -> None:
    engine = Engine(database)
    key = SecretKey.generate()
    with database.connection(Role.ENGINE) as conn:
        for side, path in WORKFLOWS.items():
            engine.registry.deploy(conn, path, definition(personal=side == V2))
        actors.add_actor(conn, "clerk", key.public_key_hex, ["clerk"])
        conn.commit()

    # Client: call by call in turn within each run (common.measure_interleaved).
    prev = "1d58587ec9d8c3fd25b0f95f6c7ee5656ed8b4cd054c05e98694eadd9f94abec"
    client: dict[str, list[float]] = {V1: [], V2: []}
    for run in range(runs):
        sides = ordered(run)
        timings = measure_interleaved(
            [partial(submission, side, key, "p-1", "update", prev, 7) for side in sides],
            seconds=seconds,
        )
        for side, timing in zip(sides, timings, strict=True):
            client[side].append(timing.seconds * 1e6 / timing.operations)

    # Engine: warm the registry, the actor and the statements on both sides first.
    for side in (V1, V2):
        apply(engine, batch(side, key, 20))
    engine_rates: dict[str, list[float]] = {V1: [], V2: []}
    for run in range(runs):
        sides = ordered(run)
        signed = {side: batch(side, key, events) for side in sides}  # before the clock
        for side in sides:
            engine_rates[side].append(events / timed(partial(apply, engine, signed[side])))

    # Verification: one stored process per side, written through the engine.
    processes = {side: f"bench-verify-{side}-{secrets.token_hex(4)}" for side in (V1, V2)}
    for side, process in processes.items():
        apply(engine, history(side, key, process, verify_events))
    with database.connection(Role.ENGINE) as conn:  # v2's values are kept beside the events
        kept = conn.execute(
            "SELECT count(*) FROM charter.event_disclosures d JOIN charter.events e"
            " ON e.hash = d.event_hash WHERE e.process_id = %s", (processes[V2],)
        ).fetchone()  # fmt: skip
    assert kept is not None
    assert kept[0] == len(PERSONAL) * verify_events, kept

    def verifier(side: str, replay: bool) -> Callable[[], None]:
        def run() -> None:
            report = verify_process(database, processes[side], replay=replay)
            assert report.ok, report.to_json()
            assert report.events == verify_events

        return run

    modes = {"verify_process, no replay": False, "verify_process, replay": True}
    verify_rates: dict[tuple[str, str], list[float]] = {
        (mode, side): [] for mode in modes for side in (V1, V2)
    }
    for replay in modes.values():  # warm caches and keys
        for side in (V1, V2):
            verifier(side, replay)()
    for run in range(runs):
        for mode, replay in modes.items():
            for side in ordered(run):
                rate = verify_events / timed(verifier(side, replay))
                verify_rates[(mode, side)].append(rate)

    def row(what: str, v1: list[float], v2: list[float], *, higher_is_better: bool,
            digits: int = 0) -> dict[str, object]:  # fmt: skip
        ratios = [b / a for a, b in zip(v1, v2, strict=True)]
        return {
            "what": what,
            "v1, median (min-max)": spread(v1, digits),
            "v2, median (min-max)": spread(v2, digits),
            "v2/v1, median (min-max)": spread(ratios, 2),
            "which way": verdict(ratios, higher_is_better=higher_is_better),
        }

    table = [
        row("client: build + sign, µs per submission", client[V1], client[V2],
            higher_is_better=False, digits=1),
        row(f"process_event, events/s ({events} per side per run)", engine_rates[V1],
            engine_rates[V2], higher_is_better=True),
        *(row(f"{mode}, events/s ({verify_events} events)", verify_rates[(mode, V1)],
              verify_rates[(mode, V2)], higher_is_better=True) for mode in modes),
    ]  # fmt: skip
    print_results(
        f"Envelope v1 vs v2 with {len(PERSONAL)} personal fields, {runs} interleaved runs "
        "(v2/v1 per run)",
        table,
        width=170,
    )


if __name__ == "__main__":
    main()
