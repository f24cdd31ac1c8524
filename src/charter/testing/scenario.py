"""`Scenario`: a workflow driven step by step on the real engine, in virtual time.

People's events are signed and decided by `Engine.process_event`; automated work is
fired by the worker's own code (`charter.firing.batch.Firer.fire_due`, the pass the
automation worker runs), signed by the automation actor. Time is a `FakeClock` that
moves only when the scenario says so. After every step the scenario runs the worker to
quiescence: whatever is due fires, and what that makes due fires too, until nothing is.

`advance` moves the clock from one due time to the next, never past one: each
occurrence of a recurring schedule fires at its own virtual time (a `1y` schedule
over three years fires three times), where a worker woken after downtime would fire
the missed occurrences once. The due times come from this scenario's own processes
(those its steps created, and their spawned descendants), so work left in the
database by other scenarios never sets its pace; such work fires, coalesced, only when
it happens to be due at a time this scenario visits.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Protocol, cast

from charter.core import ijson
from charter.core.clock import FakeClock
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.errors import CharterError, Malformed, UnknownProcess
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339, parse_rfc3339
from charter.core.unset import UNSET
from charter.dsl.durations import parse_duration
from charter.dsl.validate import load_workflow
from charter.engine.process_event import Accepted, Engine
from charter.engine.reads import Reads
from charter.engine.records import ProcessView
from charter.firing.batch import Firer
from charter.testing.expectations import Expectation, Observed, mismatches
from charter.testing.sandbox import ScenarioDatabase, ScenarioError, derived_path, slug

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
# Automated events one step may fire before the scenario stops: a runaway schedule
# (`every: 1s` over a year) is a mistake to report, not thirty million events to sign.
MAX_FIRES_PER_STEP = 10_000
WORKER_ID = "scenario"

Definition = JsonObject | str | Path


class Scenario:
    """One workflow, its actors and its processes on a `ScenarioDatabase`, in virtual time.

    `definition` is a workflow (a dict) or the path of its file; `actors` maps actor ids
    to their roles; `workflows` deploys more workflows at the paths given (the ones the
    main workflow spawns). Without `database`, the scenario makes a scratch database
    of its own (a throwaway embedded PostgreSQL) and drops it at `close()`: use it as a
    context manager.
    """

    def __init__(
        self,
        definition: Definition,
        *,
        actors: Mapping[str, Sequence[str]],
        start: datetime | str = DEFAULT_START,
        database: ScenarioDatabase | None = None,
        workflows: Mapping[str, Definition] | None = None,
        process: str | None = None,
        interrupted: Callable[[], bool] = lambda: False,
    ) -> None:
        self._stack = ExitStack()
        # Asked between the worker's transactions (and between the rows of one, which
        # then commits what it fired): True ends the step with KeyboardInterrupt.
        self.interrupted = interrupted
        main_name, main = _load(definition)
        extra = {path: _load(value)[1] for path, value in (workflows or {}).items()}
        _check_actors(actors)
        self.clock = FakeClock(_start(start))
        if database is None:
            database = self._stack.enter_context(ScenarioDatabase.scratch())
        self.database = database
        self.engine = Engine(database.database, clock=self.clock)
        self.reads = Reads(database.database)
        self.firer = Firer(
            database.database, self.engine, database.automation_key, WORKER_ID, self.clock
        )
        # A main workflow that `workflows` also names is deployed there only (a workflow
        # that spawns processes of its own kind needs its path known).
        named = [path for path, value in extra.items() if value == main]
        self.workflow_path = named[0] if named else derived_path(main_name, main)
        try:
            for path, value in extra.items():
                database.deploy(path, value)
            database.deploy(self.workflow_path, main)
            self.keys: dict[str, SecretKey] = database.actors(actors)
        except BaseException:
            self._stack.close()  # a scratch database of our own goes with us
            raise
        self.process_id = process or f"{slug(main_name)}-{secrets.token_hex(4)}"
        self.last_error: str | None = None
        self._roots: list[str] = []  # the processes this scenario's steps created

    # --- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Drop the scratch database this scenario made for itself, if it made one."""
        self._stack.close()

    def __enter__(self) -> Scenario:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def now(self) -> datetime:
        return self.clock.now()

    # --- steps ---------------------------------------------------------------------------

    def act(
        self,
        actor: str,
        action: str,
        input: JsonObject | None = None,
        process: str | None = None,
    ) -> Accepted:
        """`actor` signs `action` on the process (the scenario's own unless named) and the
        engine decides it; then the worker runs to quiescence. A refusal is raised as the
        engine's CharterError, and its code is kept as `last_error`."""
        key = self.keys.get(actor)
        if key is None:
            raise ScenarioError(
                f"unknown actor {actor!r}: the scenario declares {sorted(self.keys)}"
            )
        process_id = process or self.process_id
        current = self._existing(process_id)
        envelope = Envelope(
            v=1,
            process=process_id,
            workflow=current.workflow if current else self.workflow_path,
            action=action,
            input=input or {},
            prev=current.head if current else None,
            actor=key.public_key_hex,
            at=format_rfc3339(self.clock.now()),
        )
        try:
            accepted = self.engine.process_event(sign(envelope, key))
        except CharterError as exc:
            self.last_error = exc.code
            raise
        if current is None:
            self._roots.append(process_id)
        self._settle(self.clock.now())
        return accepted

    def advance(self, duration: str | timedelta) -> datetime:
        """Move virtual time forward by `duration` (a DSL duration such as `48h`, or a
        timedelta), firing every occurrence due on the way at its own time; the new now."""
        delta = parse_duration(duration) if isinstance(duration, str) else duration
        if delta <= timedelta(0):
            raise ScenarioError(f"time only moves forward: {duration!r}")
        self._settle(self.clock.now() + delta)
        return self.clock.now()

    # --- what the world looks like -------------------------------------------------------

    def state(self, process: str | None = None) -> str:
        return self._process(process).state

    def data(self, process: str | None = None) -> JsonObject:
        return self._process(process).data

    def timers(self, process: str | None = None) -> set[str]:
        """The schedule ids live on the process (active, or claimed by a worker)."""
        scheduled, _ = self.reads.automation(process or self.process_id)
        return {str(row["schedule_id"]) for row in scheduled if row["status"] in _LIVE}

    def queue(self, process: str | None = None) -> list[str]:
        """The actions of the process's pending queue rows, sorted."""
        _, queued = self.reads.automation(process or self.process_id)
        return sorted(str(row["action_name"]) for row in queued if row["status"] == "pending")

    def events(self, process: str | None = None) -> list[str]:
        """The action of each event of the process, in order."""
        return [str(e.envelope["action"]) for e in self.reads.events(process or self.process_id)]

    def processes(self) -> list[str]:
        """This scenario's processes: those its steps created and their descendants."""
        return sorted(self._tree())

    def event_counts(self) -> dict[str, int]:
        """How many events each of this scenario's processes has."""
        return {process_id: len(self.events(process_id)) for process_id in self.processes()}

    def observe(self, process: str | None = None) -> Observed:
        view = self._process(process)
        return Observed(
            state=view.state,
            data=view.data,
            timers=frozenset(self.timers(view.id)),
            queue=tuple(self.queue(view.id)),
            events=tuple(self.events(view.id)),
            last_error=self.last_error,
        )

    def check(self, expectation: Expectation) -> list[str]:
        """How the process differs from `expectation`, one sentence each; [] if it holds.
        A process named by the expectation is named in each sentence."""
        where = f"process {expectation.process!r}: " if expectation.process else ""
        try:
            observed = self.observe(expectation.process)
        except UnknownProcess:
            return [f"{where}expected the process to exist, got no such process"]
        return [where + found for found in mismatches(expectation, observed)]

    def expect(self, expectation: Expectation | None = None, **fields: object) -> None:
        """Assert an expectation (or its fields as keywords: `state="escalated"`)."""
        wanted = expectation or _expectation(fields)
        found = self.check(wanted)
        if found:
            raise AssertionError("; ".join(found))

    # --- the worker ----------------------------------------------------------------------

    def _settle(self, until: datetime) -> None:
        """Fire what is due up to `until`, one due time after the other; end at `until`.

        The worker's pass runs whenever this scenario's processes have work due at the
        current time, and the clock moves to the next due time only once they have none."""
        fired = 0
        while (due := self._next_due()) is not None and due <= until:
            if due > self.clock.now():
                self.clock.set(due)
            if self.interrupted():
                # Between two of the worker's transactions: nothing is half done.
                raise KeyboardInterrupt
            batch = self.firer.fire_due(self.interrupted)
            if batch.claimed == 0:
                raise ScenarioError(f"work due at {format_rfc3339(due)} did not fire")
            fired += len(batch.results)
            if fired > MAX_FIRES_PER_STEP:
                raise ScenarioError(
                    f"more than {MAX_FIRES_PER_STEP} automated events in one step (the "
                    f"virtual time is {format_rfc3339(self.clock.now())}): a schedule "
                    "that repeats too often, or automatic actions that never stop?"
                )
        if until > self.clock.now():
            self.clock.set(until)

    def _next_due(self) -> datetime | None:
        """The earliest time work of this scenario's processes is due, if any."""
        due: list[datetime] = []
        for process_id in self._tree():
            scheduled, queued = self.reads.automation(process_id)
            due += [_when(r, "run_at") for r in scheduled if r["status"] == "active"]
            due += [_when(r, "queued_at") for r in queued if r["status"] == "pending"]
        return min(due, default=None)

    def _tree(self) -> Iterator[str]:
        """This scenario's processes and all their descendants."""
        waiting, seen = list(self._roots), set(self._roots)
        while waiting:
            process_id = waiting.pop()
            yield process_id
            for child in self.reads.children(process_id):
                if child.id not in seen:
                    seen.add(child.id)
                    waiting.append(child.id)

    def _existing(self, process_id: str) -> ProcessView | None:
        """The process an act targets, or None when the act creates it; a process of
        another scenario is refused (scenarios sharing a database name their own)."""
        try:
            view = self.reads.process(process_id)
        except UnknownProcess:
            return None
        if not self._ours(view):
            raise ScenarioError(
                f"process {process_id!r} was made by another scenario of this database: "
                "give each scenario's processes names of their own"
            )
        return view

    def _ours(self, view: ProcessView) -> bool:
        while view.id not in self._roots:
            if view.parent is None:
                return False
            view = self.reads.process(view.parent)
        return True

    def _process(self, process: str | None) -> ProcessView:
        return self.reads.process(process or self.process_id)


class ScenarioFactory(Protocol):
    """What the `charter_scenario` fixture is: `Scenario`'s arguments, its database given."""

    def __call__(
        self,
        definition: Definition,
        *,
        actors: Mapping[str, Sequence[str]],
        start: datetime | str = DEFAULT_START,
        workflows: Mapping[str, Definition] | None = None,
        process: str | None = None,
    ) -> Scenario: ...


_LIVE = frozenset({"active", "claimed"})


def _when(row: JsonObject, due_column: str) -> datetime:
    """When a work row is due: its retry time if it has one, else its own time."""
    value = row.get("not_before") or row[due_column]
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def _load(definition: Definition) -> tuple[str, JsonObject]:
    """(a name for it, the workflow) of a definition or a workflow file; a definition that
    is not a valid workflow raises InvalidWorkflow with every problem."""
    if isinstance(definition, dict):
        name, value = "scenario", definition
    else:
        path = Path(definition)
        try:
            loaded: JsonValue = ijson.loads(path.read_bytes())
        except OSError as exc:
            raise Malformed(f"{path}: cannot read: {exc.strerror or exc}") from None
        if not isinstance(loaded, dict):
            raise Malformed(f"{path}: a workflow is a JSON object")
        name, value = path.name.removesuffix(".json").removesuffix(".scenario"), loaded
    load_workflow(value)
    return name, value


def _check_actors(declared: Mapping[str, Sequence[str]]) -> None:
    for actor, roles in declared.items():
        if isinstance(roles, str) or not all(isinstance(role, str) for role in roles):
            raise Malformed(f"the roles of actor {actor!r} must be a list of strings")


def _start(start: datetime | str) -> datetime:
    moment = parse_rfc3339(start) if isinstance(start, str) else start
    if moment.tzinfo is None:
        raise ScenarioError("the start time needs a time zone")
    # Envelopes carry milliseconds: a finer start would make `at` and the clock differ.
    return moment.astimezone(UTC).replace(microsecond=moment.microsecond // 1000 * 1000)


def _expectation(fields: Mapping[str, object]) -> Expectation:
    """An Expectation from keywords: sets and lists are taken as they come."""
    unknown = set(fields) - _EXPECTATION_FIELDS
    if unknown:
        raise TypeError(f"unknown expectations: {sorted(unknown)}")
    timers, queue, events = fields.get("timers"), fields.get("queue"), fields.get("events")
    return Expectation(
        process=cast(str | None, fields.get("process")),
        state=cast(str | None, fields.get("state")),
        data=cast(JsonObject | None, fields.get("data")),
        timers=None if timers is None else frozenset(cast(Iterable[str], timers)),
        queue=None if queue is None else tuple(cast(Iterable[str], queue)),
        events=events if events is None or isinstance(events, int)
        else tuple(cast(Iterable[str], events)),
        last_error=cast(str | None, fields["last_error"]) if "last_error" in fields else UNSET,
    )  # fmt: skip


_EXPECTATION_FIELDS = frozenset(
    {"process", "state", "data", "timers", "queue", "events", "last_error"}
)
