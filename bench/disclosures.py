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

Then `charter:erase`, on a third workflow (bench/erasable) whose data holds the personal
values: a process of L events is a create with 2 personal fields, then updates, of which
every tenth (seq 6, 16, ...) is an `amend` carrying both personal fields again and the
rest an ordinary `update` of clear fields whose condition reads the personal email from
the data (so 2 + 2 * L / 10 disclosures are kept, and an erased replay has an unknown
condition at every ordinary update). Each run builds P processes of each length L per
side through the engine, then, before the clock, signs each one's next event: on one
side a `charter:erase` of everything (no scope), on the other an ordinary `update`; it
times that one `process_event` per process, erase and update alternately (which goes
first alternates). Printed per L: ms for the one event (the median of the run's P),
erase ÷ update within a run, and per event of history the erase's µs (ms ÷ L) and the
µs it takes beyond the update ((erase - update) ÷ L). Last, `verify_process`
of the longest erased processes against their not-erased twins (the same history, then
the update instead of the erase: the same number of events), each pair 3 times in turn
(the side first alternating), without and with replay; events/s (the run's median) and
erased ÷ not erased, the cost of three-valued replay.

Run: python bench/disclosures.py [--events 2000] [--verify-events 2000] [--runs 3]
[--seconds 1.0] [--lengths 10,100,1000] [--per-length 3] [--quick]
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


ERASABLE = "bench/erasable"
AMEND_EVERY = 10  # seq 6, 16, 26, ...: an `amend` carrying both personal fields again


def erasable() -> JsonObject:
    """The erasure bench's workflow: the personal values go into the data, where the
    ordinary update's condition reads one (three-valued once it is erased)."""
    personal: JsonObject = {"type": "string", "x-personal": True}
    return {
        "dsl": 2,
        "states": ["open"],
        "roles": ["clerk", "dpo"],
        "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
        "actions": {
            "open": {"type": "create", "role": "clerk", "to": "open",
                     "input": {"type": "object", "required": ["name", "email"],
                               "properties": {"name": dict(personal), "email": dict(personal),
                                              "country": {"type": "string"},
                                              "n": {"type": "integer"}}},
                     "mutate": {"$set": {"name": "{{ input.name }}",
                                         "email": "{{ input.email }}",
                                         "greeting": "Dear {{ input.name }}",
                                         "country": "{{ input.country }}"},
                                "$inc": {"count": 1}}},
            "amend": {"type": "update", "role": "clerk", "from": "*",
                      "input": {"type": "object", "required": ["name", "email"],
                                "properties": {"name": dict(personal), "email": dict(personal),
                                               "n": {"type": "integer"}}},
                      "mutate": {"$set": {"name": "{{ input.name }}",
                                          "email": "{{ input.email }}",
                                          "greeting": "Dear {{ input.name }}",
                                          "last": "{{ input.n }}"},
                                 "$inc": {"count": 1}}},
            "update": {"type": "update", "role": "clerk", "from": "*", "when": "email != ''",
                       "input": {"type": "object",
                                 "properties": {"country": {"type": "string"},
                                                "n": {"type": "integer"}}},
                       "mutate": {"$set": {"last": "{{ input.n }}"}, "$inc": {"count": 1}}},
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


def amended(n: int) -> JsonObject:
    """An `amend`'s input: both personal fields, new values."""
    return {"name": "Ada King", "email": f"ada.king+{n}@example.org", "n": n}


def erasable_history(key: SecretKey, process: str, events: int) -> list[Submission]:
    """A bench/erasable process of `events`: its create, then an `amend` at every tenth
    event and an ordinary `update` at the others, signed ahead and chained by hash."""
    chain: list[Submission] = []
    prev: str | None = None
    for n in range(events):
        at = format_rfc3339(datetime.now(UTC))
        action = "open" if n == 0 else "amend" if n % AMEND_EVERY == 5 else "update"
        if action == "update":
            clear: JsonObject = {"country": "GB", "n": n}
            envelope = Envelope(1, process, ERASABLE, action, clear, prev, key.public_key_hex, at)
            signed = sign(envelope, key)
        else:
            full = form(n) if action == "open" else amended(n)
            clear, disclosed = split_personal(full, PERSONAL)
            envelope = Envelope(2, process, ERASABLE, action, clear, prev, key.public_key_hex,
                                at, sd=digests(disclosed))  # fmt: skip
            signed = sign(envelope, key, [d.text for d in disclosed])
        prev = signed.envelope.hash()
        chain.append(signed)
    return chain


def disclosures_kept(events: int) -> int:
    """How many personal values a bench/erasable process of `events` keeps."""
    amends = sum(1 for n in range(1, events) if n % AMEND_EVERY == 5)
    return len(PERSONAL) * (1 + amends)


def next_event(
    key: SecretKey, dpo: SecretKey, chain: Sequence[Submission], erase: bool
) -> Submission:
    """The event timed after `chain`: an erase of everything kept, or an ordinary update."""
    last = chain[-1].envelope
    at = format_rfc3339(datetime.now(UTC))
    if erase:
        request: JsonObject = {"basis": "art17-1a", "request": f"DSR-{secrets.token_hex(4)}"}
        envelope = Envelope(1, last.process, ERASABLE, "charter:erase", request, last.hash(),
                            dpo.public_key_hex, at)  # fmt: skip
        return sign(envelope, dpo)
    clear: JsonObject = {"country": "GB", "n": len(chain)}
    envelope = Envelope(1, last.process, ERASABLE, "update", clear, last.hash(),
                        key.public_key_hex, at)  # fmt: skip
    return sign(envelope, key)


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


def verdict(
    ratios: Sequence[float], *, higher_is_better: bool, sides: tuple[str, str] = (V1, V2)
) -> str:
    """Which side the median ratio (second side ÷ first side) favours, in words, and
    whether some run had it the other way."""
    first, second = sides
    ratio = statistics.median(ratios)
    if higher_is_better:
        change = f"rate {abs(1 - ratio) * 100:.0f} % {'lower' if ratio < 1 else 'higher'}"
        favoured = first if ratio < 1 else second
    else:
        if ratio >= 2:
            change = f"takes {ratio:.1f} times as long"
        else:
            change = f"takes {abs(ratio - 1) * 100:.0f} % {'more' if ratio > 1 else 'less'} time"
        favoured = first if ratio > 1 else second
    split = min(ratios) < 1 < max(ratios)
    return f"{second} {change}: favours {favoured}{'; not every run agrees' if split else ''}"


def compare(what: str, first: Sequence[float], second: Sequence[float], *,
            sides: tuple[str, str] = (V1, V2), higher_is_better: bool, digits: int = 0,
            ratio_digits: int = 2) -> dict[str, object]:  # fmt: skip
    """A table row: each side's figures over the runs, and second ÷ first within a run."""
    ratios = [b / a for a, b in zip(first, second, strict=True)]
    return {
        "what": what,
        f"{sides[0]}, median (min-max)": spread(first, digits),
        f"{sides[1]}, median (min-max)": spread(second, digits),
        f"{sides[1]}/{sides[0]}, median (min-max)": spread(ratios, ratio_digits),
        "which way": verdict(ratios, higher_is_better=higher_is_better, sides=sides),
    }


def ordered(run: int) -> tuple[str, str]:
    """The sides in the order run `run` times them: alternated, so neither always leads."""
    return (V1, V2) if run % 2 == 0 else (V2, V1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="process_event, per side")
    parser.add_argument("--verify-events", type=int, default=2000, help="per process")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="client side, per run")
    parser.add_argument("--lengths", default="10,100,1000", help="erasure: events before it")
    parser.add_argument("--per-length", type=int, default=3, help="erasure: processes per run")
    quick = "200 events, lengths 10 and 100, 2 per length, 3 runs (~15 s)"
    parser.add_argument("--quick", action="store_true", help=quick)
    args = parser.parse_args()
    if args.quick:
        events, verify_events, runs, seconds = 200, 200, 3, 0.2
        lengths, per_length = [10, 100], 2
    else:
        events, verify_events = args.events, args.verify_events
        runs, seconds = max(3, args.runs), args.seconds
        lengths = sorted({int(length) for length in args.lengths.split(",")})
        per_length = max(1, args.per_length)
    with scratch_database("disclosures") as url, Database(url, max_size=2) as database:
        engine = Engine(database)
        key, dpo = SecretKey.generate(), SecretKey.generate()
        with database.connection(Role.ENGINE) as conn:
            for side, path in WORKFLOWS.items():
                engine.registry.deploy(conn, path, definition(personal=side == V2))
            engine.registry.deploy(conn, ERASABLE, erasable())
            actors.add_actor(conn, "clerk", key.public_key_hex, ["clerk"])
            actors.add_actor(conn, "dpo", dpo.public_key_hex, ["dpo"])
            conn.commit()
        bench(database, engine, key, events, verify_events, runs, seconds)
        erasure_bench(database, engine, key, dpo, lengths, per_length, runs)


def bench(database: Database, engine: Engine, key: SecretKey, events: int, verify_events: int,
          runs: int, seconds: float) -> None:  # fmt: skip
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

    table = [
        compare("client: build + sign, µs per submission", client[V1], client[V2],
                higher_is_better=False, digits=1),
        compare(f"process_event, events/s ({events} per side per run)", engine_rates[V1],
                engine_rates[V2], higher_is_better=True),
        *(compare(f"{mode}, events/s ({verify_events} events)", verify_rates[(mode, V1)],
                  verify_rates[(mode, V2)], higher_is_better=True) for mode in modes),
    ]  # fmt: skip
    print_results(
        f"Envelope v1 vs v2 with {len(PERSONAL)} personal fields, {runs} interleaved runs "
        "(v2/v1 per run)",
        table,
        width=170,
    )


ERASE, UPDATE = "erase", "update"
ERASED, KEPT = "erased", "not erased"
VERIFY_TURNS = 3  # verifications of each side of a pair per run and mode


def erasure_bench(
    database: Database,
    engine: Engine,
    key: SecretKey,
    dpo: SecretKey,
    lengths: Sequence[int],
    per_length: int,
    runs: int,
) -> None:
    # Warm the erase path (replay, the disclosure writes) and the update path first.
    for erasing in (True, False):
        chain = erasable_history(key, f"bench-warm-{secrets.token_hex(6)}", 12)
        apply(engine, [*chain, next_event(key, dpo, chain, erasing)])

    times: dict[tuple[int, str], list[float]] = {
        (length, kind): [] for length in lengths for kind in (ERASE, UPDATE)
    }
    twins: list[list[tuple[str, str]]] = []  # per run: (erased, not erased) of the longest
    for run in range(runs):
        for length in lengths:
            chains: dict[str, list[list[Submission]]] = {ERASE: [], UPDATE: []}
            for _ in range(per_length):
                for kind in (ERASE, UPDATE):
                    process = f"bench-{kind}-{length}-{secrets.token_hex(6)}"
                    chain = erasable_history(key, process, length)
                    apply(engine, chain)
                    chains[kind].append(chain)
            timed_events = {  # signed before the clock, after the building (for `at`)
                kind: [next_event(key, dpo, chain, kind == ERASE) for chain in chains[kind]]
                for kind in (ERASE, UPDATE)
            }
            ms: dict[str, list[float]] = {ERASE: [], UPDATE: []}
            for index in range(per_length):
                order = (ERASE, UPDATE) if (run + index) % 2 == 0 else (UPDATE, ERASE)
                for kind in order:
                    signed = timed_events[kind][index]
                    ms[kind].append(timed(partial(apply, engine, [signed])) * 1e3)
            for kind in (ERASE, UPDATE):
                times[(length, kind)].append(statistics.median(ms[kind]))
            erased_id = timed_events[ERASE][0].envelope.process
            with database.connection(Role.ENGINE) as conn:
                counted = conn.execute(
                    "SELECT count(*) FILTER (WHERE d.disclosure IS NULL), count(*)"
                    " FROM charter.event_disclosures d JOIN charter.events e"
                    " ON e.hash = d.event_hash WHERE e.process_id = %s", (erased_id,)
                ).fetchone()  # fmt: skip
            assert counted == (disclosures_kept(length), disclosures_kept(length)), counted
            if length == max(lengths):
                twins.append([
                    (e.envelope.process, u.envelope.process)
                    for e, u in zip(timed_events[ERASE], timed_events[UPDATE], strict=True)
                ])  # fmt: skip

    table = []
    for length in lengths:
        updates, erases = times[(length, UPDATE)], times[(length, ERASE)]
        row = compare(
            f"one event after {length:,} events ({disclosures_kept(length)} disclosures kept), ms",
            updates, erases, sides=(UPDATE, ERASE), higher_is_better=False, digits=2,
            ratio_digits=1,
        )  # fmt: skip
        which_way = row.pop("which way")
        row["erase ÷ events, µs"] = spread([e * 1e3 / length for e in erases], 0)
        extra = [(e - u) * 1e3 / length for e, u in zip(erases, updates, strict=True)]
        row["(erase - update) ÷ events, µs"] = spread(extra, 0)
        row["which way"] = which_way
        table.append(row)
    print_results(
        f"One charter:erase vs one ordinary update via process_event, {per_length} processes"
        f" per length per run (the run's median), {runs} interleaved runs (erase/update per run)",
        table,
        width=190,
    )

    # Verification: the erased processes of the longest length against their twins.
    events = max(lengths) + 1
    updates_before = {n + 1 for n in range(1, events - 1) if n % AMEND_EVERY != 5}  # seqs
    modes = {"verify_process, no replay": False, "verify_process, replay": True}

    def verified(process: str, replay: bool, erased: bool) -> float:
        started = time.perf_counter()
        report = verify_process(database, process, replay=replay)
        elapsed = time.perf_counter() - started
        assert report.ok, report.to_json()
        assert report.events == events, report.events
        shown = report.to_json()["erasure"]
        assert isinstance(shown, dict)
        gone = shown["erased"]
        assert isinstance(gone, list)
        assert len(gone) == (disclosures_kept(max(lengths)) if erased else 0), len(gone)
        if erased and replay:  # three-valued: every ordinary update's condition is unknown
            listed = shown["unverifiable"]
            assert isinstance(listed, list)
            unknown = {entry["seq"] for entry in listed if isinstance(entry, dict)}
            assert updates_before <= unknown, sorted(updates_before - unknown)
        return events / elapsed

    for replay in modes.values():  # warm
        for index, is_erased in enumerate((True, False)):
            verified(twins[0][0][index], replay, is_erased)
    rates: dict[tuple[str, str], list[float]] = {
        (mode, side): [] for mode in modes for side in (KEPT, ERASED)
    }
    for run, pairs in enumerate(twins):
        for mode, replay in modes.items():
            per_side: dict[str, list[float]] = {KEPT: [], ERASED: []}
            for index, (gone_id, kept_id) in enumerate(pairs):
                for turn in range(VERIFY_TURNS):  # in turn, the side first alternating
                    first = (run + index + turn) % 2 == 0
                    for side in (ERASED, KEPT) if first else (KEPT, ERASED):
                        process = gone_id if side == ERASED else kept_id
                        per_side[side].append(verified(process, replay, side == ERASED))
            for side in (KEPT, ERASED):
                rates[(mode, side)].append(statistics.median(per_side[side]))
    print_results(
        f"verify_process of an erased {events:,}-event process vs its twin not erased,"
        f" {len(twins[0])} pairs x {VERIFY_TURNS} turns per run (the run's median),"
        f" {runs} interleaved runs",
        [
            compare(
                f"{mode}, events/s",
                rates[(mode, KEPT)],
                rates[(mode, ERASED)],
                sides=(KEPT, ERASED),
                higher_is_better=True,
            )
            for mode in modes
        ],
        width=190,
    )


if __name__ == "__main__":
    main()
