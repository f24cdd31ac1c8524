"""Scenario files (docs/testing.md), read strictly: unknown keys, wrong types, unknown
actors, unknown error codes and invalid workflows are problems, each reported with the
file and the JSON pointer (RFC 6901) of what is wrong, and all of them at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from charter.core import identifiers, ijson
from charter.core.errors import CharterError, Malformed
from charter.core.errors.catalogue import BY_CODE
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339
from charter.core.unset import UNSET, Unset
from charter.dsl.canonical import version_hash
from charter.dsl.durations import parse_duration
from charter.dsl.validate import load_workflow, validate_workflow
from charter.engine.records import AUTOMATION_ACTOR_ID, AUTOMATION_ROLE
from charter.testing.expectations import Expectation

TOP_KEYS = frozenset(
    {"workflow", "workflows", "start", "actors", "process", "description", "steps"}
)
ACT_KEYS = frozenset({"act", "action", "input", "process", "expect_error"})
EXPECT_KEYS = frozenset({"process", "state", "data", "timers", "queue", "events", "last_error"})
STEP_KINDS = ("act", "advance", "expect")

Declared = dict[str, tuple[str, ...]]  # actor id → roles


@dataclass(frozen=True, order=True)
class SpecProblem:
    """One thing wrong with a scenario file: which file, where (a JSON pointer), what."""

    file: str
    pointer: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "pointer": self.pointer, "message": self.message}

    def __str__(self) -> str:
        return f"{self.file}: {self.pointer or '/'}: {self.message}"


@dataclass(frozen=True)
class Act:
    pointer: str
    actor: str
    action: str
    input: JsonObject
    process: str | None = None
    expect_error: str | None = None


@dataclass(frozen=True)
class Advance:
    pointer: str
    duration: str
    delta: timedelta


@dataclass(frozen=True)
class Expect:
    pointer: str
    expectation: Expectation


Step = Act | Advance | Expect


@dataclass(frozen=True)
class WorkflowFile:
    file: Path
    definition: JsonObject

    @property
    def version(self) -> str:
        return version_hash(self.definition)


@dataclass(frozen=True)
class Spec:
    """A scenario file, read and checked."""

    file: str  # as the user named it
    workflow: WorkflowFile
    workflows: dict[str, WorkflowFile]
    start: datetime | None
    actors: Declared
    process: str | None
    description: str | None
    steps: tuple[Step, ...]


class SpecError(Malformed):
    """A scenario file is malformed; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[SpecProblem]) -> None:
        first = problems[0]
        super().__init__(
            f"{len(problems)} problem(s) in scenario files; first: {first}",
            problems=[p.to_dict() for p in problems],
        )
        self.problems = list(problems)


def load_spec(path: Path, label: str | None = None) -> Spec:
    """Read and check the scenario file at `path`; SpecError with every problem."""
    reader = _Reader(label or str(path))
    try:
        doc: JsonValue = ijson.loads(path.read_bytes())
    except OSError as exc:
        raise SpecError([reader.problem("", f"cannot read: {exc.strerror or exc}")]) from None
    except Malformed as exc:
        raise SpecError([reader.problem("", exc.message)]) from None
    spec = reader.spec(doc, path.parent)
    if reader.problems or spec is None:
        raise SpecError(sorted(reader.problems))
    return spec


def conflicts(specs: Iterable[Spec]) -> list[SpecProblem]:
    """Workflow paths that two files of one run give different definitions (they share a
    database: the later deployment would change the rules of the earlier's processes)."""
    seen: dict[str, tuple[str, str]] = {}
    found: list[SpecProblem] = []
    for spec in specs:
        for path, workflow in spec.workflows.items():
            earlier = seen.setdefault(path, (workflow.version, spec.file))
            if earlier[0] != workflow.version:
                found.append(
                    SpecProblem(
                        spec.file,
                        f"/workflows/{_escape(path)}",
                        f"{earlier[1]} deploys another definition at {path!r} in the same run",
                    )
                )
    return found


@dataclass
class _Reader:
    file: str
    problems: list[SpecProblem] = field(default_factory=list)

    def problem(self, pointer: str, message: str) -> SpecProblem:
        found = SpecProblem(self.file, pointer, message)
        self.problems.append(found)
        return found

    # --- the document --------------------------------------------------------------------

    def spec(self, doc: JsonValue, base: Path) -> Spec | None:
        if not isinstance(doc, dict):
            self.problem("", "a scenario file is a JSON object")
            return None
        self._keys(doc, "", TOP_KEYS, required=("workflow", "actors", "steps"))
        workflow = (
            self._workflow_file(doc["workflow"], "/workflow", base) if "workflow" in doc else None
        )
        workflows = self._workflows(doc.get("workflows", {}), base)
        roles = {
            role
            for found in (workflow, *workflows.values())
            if found is not None
            for role in load_workflow(found.definition).roles
        }
        actors = self._actors(doc.get("actors", {}), roles if workflow is not None else None)
        process = self._name(doc.get("process"), "/process") if "process" in doc else None
        description = (
            self._string(doc["description"], "/description") if "description" in doc else None
        )
        steps = self._steps(doc.get("steps"), actors)
        start = self._start(doc["start"]) if "start" in doc else None
        if workflow is None or self.problems:
            return None
        return Spec(
            file=self.file,
            workflow=workflow,
            workflows={path: found for path, found in workflows.items() if found is not None},
            start=start,
            actors=actors or {},
            process=process,
            description=description,
            steps=tuple(steps),
        )

    def _workflow_file(self, value: JsonValue, pointer: str, base: Path) -> WorkflowFile | None:
        name = self._string(value, pointer, "the path of a workflow file, relative to this file")
        if name is None:
            return None
        file = base / name
        try:
            definition = ijson.loads(file.read_bytes())
        except OSError as exc:
            self.problem(pointer, f"cannot read {name}: {exc.strerror or exc}")
            return None
        except Malformed as exc:
            self.problem(pointer, f"{name}: {exc.message}")
            return None
        problems = validate_workflow(definition)
        for found in problems:
            self.problem(pointer, f"{name} is not a valid workflow: {found.pointer or '/'}: "
                         f"{found.message}")  # fmt: skip
        if problems or not isinstance(definition, dict):
            return None
        return WorkflowFile(file, definition)

    def _workflows(self, value: JsonValue, base: Path) -> dict[str, WorkflowFile | None]:
        if not isinstance(value, dict):
            self.problem("/workflows", "must be an object: workflow path → workflow file")
            return {}
        found: dict[str, WorkflowFile | None] = {}
        for path, file in value.items():
            pointer = f"/workflows/{_escape(path)}"
            if not identifiers.WORKFLOW_PATH.fullmatch(path):
                self.problem(pointer, f"a workflow path is names joined by '/' "
                             f"({identifiers.NAME.pattern})")  # fmt: skip
                continue
            found[path] = self._workflow_file(file, pointer, base)
        return found

    def _actors(self, value: JsonValue, roles: set[str] | None) -> Declared | None:
        """The declared actors; None when /actors is no object (steps cannot be checked)."""
        if not isinstance(value, dict):
            self.problem("/actors", "must be an object: actor id → list of roles")
            return None
        actors: Declared = {}
        for actor, held in value.items():
            pointer = f"/actors/{_escape(actor)}"
            if not identifiers.PRINCIPAL.fullmatch(actor):
                self.problem(pointer, f"an actor id must match {identifiers.PRINCIPAL.pattern}")
            elif actor == AUTOMATION_ACTOR_ID:
                self.problem(pointer, "the automation actor is the scenario's own: it fires "
                             "timers and automatic actions")  # fmt: skip
            if not isinstance(held, list):
                self.problem(pointer, "must be a list of roles")
                actors[actor] = ()  # declared all the same: its steps are not unknown
                continue
            for index, role in enumerate(held):
                at = f"{pointer}/{index}"
                if not isinstance(role, str):
                    self.problem(at, "a role is a string")
                elif role == AUTOMATION_ROLE:
                    self.problem(at, f"{AUTOMATION_ROLE} is held by the automation actor alone")
                elif roles is not None and role not in roles:
                    self.problem(at, f"unknown role {role!r}: the workflows declare "
                                 f"{sorted(roles - {AUTOMATION_ROLE})}")  # fmt: skip
            if len(set(map(str, held))) != len(held):
                self.problem(pointer, "lists a role twice")
            actors[actor] = tuple(str(role) for role in held)
        return actors

    def _start(self, value: JsonValue) -> datetime | None:
        text = self._string(value, "/start", "an RFC 3339 time")
        if text is None:
            return None
        try:
            return parse_rfc3339(text)
        except TimeFormatError as exc:
            self.problem("/start", str(exc))
            return None

    # --- steps ---------------------------------------------------------------------------

    def _steps(self, value: JsonValue, actors: Declared | None) -> list[Step]:
        if not isinstance(value, list) or not value:
            self.problem("/steps", "must be a non-empty list of steps")
            return []
        steps: list[Step] = []
        for index, item in enumerate(value):
            step = self._step(item, f"/steps/{index}", actors)
            if step is not None:
                steps.append(step)
        return steps

    def _step(self, item: JsonValue, pointer: str, actors: Declared | None) -> Step | None:
        if not isinstance(item, dict):
            self.problem(pointer, 'a step is an object with "act", "advance" or "expect"')
            return None
        kinds = [kind for kind in STEP_KINDS if kind in item]
        if len(kinds) != 1:
            self.problem(pointer, 'a step has exactly one of "act", "advance" and "expect"'
                         + (f" (found {', '.join(kinds)})" if kinds else ""))  # fmt: skip
            return None
        readers: dict[str, Callable[[JsonObject, str], Step | None]] = {
            "act": lambda step, at: self._act(step, at, actors),
            "advance": self._advance,
            "expect": self._expect,
        }
        return readers[kinds[0]](item, pointer)

    def _act(self, step: JsonObject, pointer: str, actors: Declared | None) -> Act | None:
        self._keys(step, pointer, ACT_KEYS, required=("act", "action"))
        actor = None
        if "act" in step:
            actor = self._string(step["act"], f"{pointer}/act", "the id of a declared actor")
        if actor is not None and actors is not None and actor not in actors:
            self.problem(f"{pointer}/act", f"unknown actor {actor!r}: /actors declares "
                         f"{sorted(actors)}")  # fmt: skip
        action = self._name(step["action"], f"{pointer}/action") if "action" in step else None
        input_ = step.get("input", {})
        if not isinstance(input_, dict):
            self.problem(f"{pointer}/input", "must be an object (the event's input)")
        process = self._name(step["process"], f"{pointer}/process") if "process" in step else None
        expect_error = None
        if "expect_error" in step:
            expect_error = self._code(step["expect_error"], f"{pointer}/expect_error")
        if actor is None or action is None or not isinstance(input_, dict):
            return None
        return Act(pointer, actor, action, input_, process, expect_error)

    def _advance(self, step: JsonObject, pointer: str) -> Advance | None:
        self._keys(step, pointer, frozenset({"advance"}), required=("advance",))
        text = self._string(step["advance"], f"{pointer}/advance", "a duration such as 48h")
        if text is None:
            return None
        try:
            return Advance(pointer, text, parse_duration(text))
        except CharterError as exc:
            self.problem(f"{pointer}/advance", exc.message)
            return None

    def _expect(self, step: JsonObject, pointer: str) -> Expect | None:
        self._keys(step, pointer, frozenset({"expect"}), required=("expect",))
        checks, at = step["expect"], f"{pointer}/expect"
        if not isinstance(checks, dict):
            self.problem(at, "must be an object of expectations")
            return None
        self._keys(checks, at, EXPECT_KEYS, required=())
        process = self._name(checks["process"], f"{at}/process") if "process" in checks else None
        state = self._name(checks["state"], f"{at}/state") if "state" in checks else None
        raw_data = checks.get("data")
        data = raw_data if isinstance(raw_data, dict) else None
        if "data" in checks and data is None:
            self.problem(f"{at}/data", "must be an object (matched as a subset of the data)")
        timers = self._names(checks, "timers", at, unique=True)
        queue = self._names(checks, "queue", at, unique=False)
        events = self._events(checks, at)
        last_error: str | Unset | None = UNSET
        if "last_error" in checks:
            raw = checks["last_error"]
            last_error = None if raw is None else self._code(raw, f"{at}/last_error")
        expectation = Expectation(
            process=process,
            state=state,
            data=data,
            timers=None if timers is None else frozenset(timers),
            queue=None if queue is None else tuple(queue),
            events=events,
            last_error=last_error,
        )
        if expectation.is_empty():
            self.problem(at, "expects nothing: name state, data, timers, queue, events or "
                         "last_error")  # fmt: skip
        return Expect(pointer, expectation)

    def _events(self, checks: JsonObject, at: str) -> int | tuple[str, ...] | None:
        if "events" not in checks:
            return None
        value = checks["events"]
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                self.problem(f"{at}/events", "a count of events is not negative")
            return value
        names = self._names(checks, "events", at, unique=False)
        return None if names is None else tuple(names)

    # --- values --------------------------------------------------------------------------

    def _keys(
        self, obj: JsonObject, pointer: str, allowed: frozenset[str], required: Sequence[str]
    ) -> None:
        for key in sorted(set(obj) - allowed):
            self.problem(f"{pointer}/{_escape(key)}", f"unknown key {key!r} (allowed: "
                         f"{', '.join(sorted(allowed))})")  # fmt: skip
        for key in required:
            if key not in obj:
                self.problem(pointer, f"missing {key!r}")

    def _string(self, value: JsonValue, pointer: str, what: str = "text") -> str | None:
        if not isinstance(value, str):
            self.problem(pointer, f"must be a string ({what})")
            return None
        return value

    def _name(self, value: JsonValue, pointer: str) -> str | None:
        text = self._string(value, pointer, "a name")
        if text is not None and not identifiers.NAME.fullmatch(text):
            self.problem(pointer, f"must match {identifiers.NAME.pattern}")
            return None
        return text

    def _names(self, checks: JsonObject, key: str, at: str, *, unique: bool) -> list[str] | None:
        if key not in checks:
            return None
        value, pointer = checks[key], f"{at}/{key}"
        if not isinstance(value, list):
            self.problem(pointer, "must be a list of names" + (" or a count" if key == "events"
                                                              else ""))  # fmt: skip
            return None
        names = [self._name(item, f"{pointer}/{index}") for index, item in enumerate(value)]
        if unique and len(set(names)) != len(names):
            self.problem(pointer, "lists a name twice")
        return [name for name in names if name is not None]

    def _code(self, value: JsonValue, pointer: str) -> str | None:
        code = self._string(value, pointer, "an error code")
        if code is not None and code not in BY_CODE:
            self.problem(pointer, f"unknown error code {code!r} (docs/design.md lists them)")
            return None
        return code


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
