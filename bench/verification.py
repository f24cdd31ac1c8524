"""Chain verification next to raw Ed25519 verification of the same events.

One process of N signed events is written through the engine. Each run then times, one
after the other on the same machine state:

- raw: `Ed25519PublicKey.verify` (cryptography, the key object loaded once) over the N
  stored messages and signatures, already decoded to bytes: the floor no verifier of
  these signatures can go below;
- database: `verify_process` (read the snapshot, then every check, no replay);
- bundle: `verify_bundle` of the exported file, parsing included (no replay).

Each side's figure is events per second (wall clock); the ratio is Charter's rate as a
percentage of raw's in the same run, so higher favours Charter and 100 % would mean the
checks and reads around the signature cost nothing. Printed: median and min-max over
the runs.

Run: python bench/verification.py [--events 2000] [--runs 5] [--quick]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from charter.audit.evidence import EventRow
from charter.audit.verify_stored import export_bundle, load_evidence, verify_bundle, verify_process
from charter.core import ijson
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from common import print_results, scratch_database

WORKFLOW = "bench/ledger"
DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "post": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "mutate": {"$inc": {"posted": 1}, "$set": {"last": "{{ input.reference }}"}},
        },
    },
}
PROCESS = "bench-verification"


def envelope(key: SecretKey, action: str, prev: str | None, n: int) -> Envelope:
    """An event with a form-sized input (about 500 bytes of envelope)."""
    return Envelope(
        v=1,
        process=PROCESS,
        workflow=WORKFLOW,
        action=action,
        input={
            "reference": f"INV-{n:06d}",
            "amount": 1250 + n,
            "currency": "EUR",
            "approved": n % 2 == 0,
            "customer": {"name": "Ada Lovelace", "city": "London", "tags": ["retail", "vip"]},
            "note": "Payment received — thank you",
        },
        prev=prev,
        actor=key.public_key_hex,
        at=format_rfc3339(datetime.now(UTC)),
    )


def write_process(database: Database, events: int) -> None:
    engine = Engine(database)
    key = SecretKey.generate()
    with database.connection(Role.ENGINE) as conn:
        engine.registry.deploy(conn, WORKFLOW, DEFINITION)
        actors.add_actor(conn, "clerk", key.public_key_hex, ["clerk"])
        conn.commit()
    head: str | None = None
    for n in range(events):
        head = engine.process_event(sign(envelope(key, "post" if n else "open", head, n), key)).hash


def raw_verifier(rows: Sequence[EventRow]) -> Callable[[], None]:
    """Verify the same messages and signatures with nothing but cryptography."""
    keys: dict[str, Ed25519PublicKey] = {}
    work = []
    for row in rows:
        if row.actor not in keys:
            keys[row.actor] = Ed25519PublicKey.from_public_bytes(bytes.fromhex(row.actor))
        assert row.signature is not None
        work.append((keys[row.actor], bytes.fromhex(row.signature), row.envelope_text.encode()))

    def run() -> None:
        for public_key, signature, message in work:
            public_key.verify(signature, message)

    return run


def timed(operation: Callable[[], object]) -> float:
    started = time.perf_counter()
    operation()
    return time.perf_counter() - started


def spread(values: Sequence[float], unit: str = "") -> str:
    if len(values) == 1:
        return f"{values[0]:,.0f}{unit}"
    return f"{statistics.median(values):,.0f}{unit} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="500 events, 5 runs (< 1 min)")
    args = parser.parse_args()
    events, runs = (500, 5) if args.quick else (args.events, max(3, args.runs))
    with scratch_database("verification") as url, Database(url, max_size=2) as database:
        write_process(database, events)
        rows = load_evidence(database, PROCESS).events
        bundle_file = json.dumps(export_bundle(database, PROCESS)).encode()
        raw = raw_verifier(rows)

        def from_database() -> None:
            report = verify_process(database, PROCESS)
            assert report.ok, report.to_json()
            assert report.events == events

        def from_bundle() -> None:
            report = verify_bundle(ijson.loads(bundle_file), replay=False)
            assert report.ok, report.to_json()
            assert report.events == events

        sides: dict[str, Callable[[], None]] = {
            "raw Ed25519 verify (cryptography)": raw,
            "verify_process (database)": from_database,
            "verify_bundle (offline file)": from_bundle,
        }
        for operation in sides.values():  # warm caches, connections and keys
            operation()
        rates: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(runs):
            # Interleaved: drift on a shared machine hits every side alike.
            for name, operation in sides.items():
                rates[name].append(events / timed(operation))
    raw_rates = rates["raw Ed25519 verify (cryptography)"]
    table = []
    for name, values in rates.items():
        ratios = [100 * value / floor for value, floor in zip(values, raw_rates, strict=True)]
        shown = "" if values is raw_rates else spread(ratios, " %")
        table.append(
            {
                "what": name,
                "events/s, median (min-max)": spread(values),
                "% of raw, median (min-max)": shown,
            }
        )
    print_results(
        f"Verification of {events} events, {runs} interleaved runs "
        "(% of raw: higher favours Charter)",
        table,
        width=120,
    )


if __name__ == "__main__":
    main()
