"""Workflow validation: every problem at once, each with a JSON Pointer (docs/dsl.md).

One pass over the document both records problems and builds the model, so the rules
that validate a field and the code that interprets it cannot drift apart. Checks that
need the whole document (schedule targets, cancel ids, reachability) run afterwards on
what the pass collected. `load_workflow` returns the model only when nothing is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from charter.core.errors import InvalidWorkflow
from charter.core.errors.workflows import DurationError
from charter.core.jsontypes import JsonValue
from charter.dsl import checks
from charter.dsl.checks import Path, Problems
from charter.dsl.durations import parse_duration
from charter.dsl.erasure import BASIS_PATTERN, erase_action
from charter.dsl.migration import migration_action
from charter.dsl.model import (
    ACTION_TYPES,
    AUTOMATION,
    DSL_VERSION,
    MIGRATE_ACTION,
    NAME_PATTERN,
    RESERVED_PREFIX,
    Action,
    ActionType,
    ErasureSpec,
    RetentionSpec,
    Workflow,
)
from charter.dsl.mutate_checks import check_mutate
from charter.dsl.personal import flows_out, personal_pointers
from charter.dsl.retention import hold_actions

TOP_KEYS = frozenset(
    {"dsl", "states", "roles", "actions", "migration", "erasure", "retention", "description"}
)
MIGRATION_KEYS = frozenset({"role"})
ERASURE_KEYS = frozenset({"role", "from", "when", "bases"})
RETENTION_KEYS = frozenset({"after", "states", "hold_role"})
ACTION_KEYS = frozenset(
    {"type", "role", "from", "to", "when", "input", "mutate", "spawn", "schedule", "cancel"}
    | {"auto", "description"}
)


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with a workflow: where (RFC 6901 pointer) and what."""

    pointer: str
    message: str
    code: str | None = None

    def to_dict(self) -> dict[str, str]:
        found = {"pointer": self.pointer, "message": self.message}
        return found if self.code is None else found | {"code": self.code}


def validate_workflow(doc: JsonValue) -> list[Problem]:
    """Every problem in `doc`, sorted by pointer then message; empty when it is valid."""
    return _Pass().run(doc)[1]


def load_workflow(doc: JsonValue) -> Workflow:
    """The model of `doc`; InvalidWorkflow carrying every problem when it has any."""
    workflow, problems = _Pass().run(doc)
    if workflow is None or problems:
        first = problems[0]
        raise InvalidWorkflow(
            f"{len(problems)} problem(s); first at {first.pointer or '/'}: {first.message}",
            problems=[p.to_dict() for p in problems],
        )
    return workflow


@dataclass
class _Summary:
    """What the cross-action checks need to know about one action."""

    type: ActionType | None
    roles: tuple[str, ...] | None


@dataclass
class _Pass:
    out: Problems = field(default_factory=Problems)
    summaries: dict[str, _Summary] = field(default_factory=dict)
    # (from states or None for "*", to) per state-changing action, for reachability.
    edges: list[tuple[tuple[str, ...] | None, str]] = field(default_factory=list)
    starts: set[str] = field(default_factory=set)
    graph_complete: bool = True

    def run(self, doc: JsonValue) -> tuple[Workflow | None, list[Problem]]:
        workflow = self._workflow(doc)
        problems = sorted(set(self.out.items))
        codes = self.out.codes
        found = [Problem(p, m, codes.get((p, m))) for p, m in problems]
        return (workflow if not problems else None), found

    def _workflow(self, doc: JsonValue) -> Workflow | None:
        out = self.out
        if not isinstance(doc, dict):
            out.add((), "a workflow must be a JSON object")
            return None
        out.keys(doc, (), TOP_KEYS, ("dsl", "states", "roles", "actions"))
        dsl = doc.get("dsl")
        if "dsl" in doc and (type(dsl) is not int or dsl != DSL_VERSION):
            out.add(("dsl",), f"unsupported dsl version {dsl!r}: must be {DSL_VERSION}")
        description = checks.optional_string(out, doc, "description", ())
        states = checks.names(out, doc, "states", "state", non_empty=True)
        roles = checks.names(out, doc, "roles", "role", non_empty=False)
        raw_actions = doc.get("actions")
        actions: dict[str, Action] = {}
        ctx = checks.Context(
            out,
            None if states is None else frozenset(states),
            None if roles is None else frozenset(roles),
        )
        migration_roles = self._migration(ctx, doc)
        erasure = self._erasure(ctx, doc)
        retention = self._retention(ctx, doc)
        if "actions" in doc and not isinstance(raw_actions, dict):
            out.add(("actions",), "must be an object mapping action names to actions")
        if isinstance(raw_actions, dict):
            for name, raw in raw_actions.items():
                action = self._action(ctx, name, raw)
                if action is not None:
                    actions[name] = action
            self._cross_checks(ctx, raw_actions)
            self._personal_checks(doc, actions)
            if states is not None:
                self._reachability(states)
            if retention is not None:
                self._terminal(retention, raw_actions, actions)
        if states is None or roles is None or not isinstance(raw_actions, dict):
            return None
        return Workflow(
            states=states,
            roles=roles,
            actions=MappingProxyType(actions),
            description=description,
            migration=None
            if migration_roles is None
            else migration_action(migration_roles, states),
            erasure=erasure,
            eraser=None if erasure is None else erase_action(erasure),
            retention=retention,
            holds={} if retention is None else {a.name: a for a in hold_actions(retention)},
        )

    def _migration(self, ctx: checks.Context, doc: dict[str, JsonValue]) -> tuple[str, ...] | None:
        """The roles of the `migration` block, which grants the built-in `charter:migrate`."""
        if "migration" not in doc:
            return None
        out, raw, path = self.out, doc["migration"], ("migration",)
        if not isinstance(raw, dict):
            out.add(path, 'must be an object: {"role": [roles that may migrate processes]}')
            return None
        out.keys(raw, path, MIGRATION_KEYS, ("role",))
        roles = checks.roles(ctx, raw, path)
        if roles is not None and AUTOMATION in roles:
            value = raw["role"]
            where: Path = (*path, "role")
            if isinstance(value, list):
                where = (*where, value.index(AUTOMATION))
            out.add(
                where,
                f"the automation actor cannot migrate processes: {AUTOMATION} cannot be a "
                "migration role",
            )
        return roles

    def _retention(self, ctx: checks.Context, doc: dict[str, JsonValue]) -> RetentionSpec | None:
        """The `retention` block: when a finished process may be archived, and the roles
        that may hold it (granting `charter:hold` and `charter:release`)."""
        if "retention" not in doc:
            return None
        out, raw, path = self.out, doc["retention"], ("retention",)
        if not isinstance(raw, dict):
            out.add(path, 'must be an object: {"after", "states", "hold_role"}')
            return None
        before = len(out.items)
        out.keys(raw, path, RETENTION_KEYS, ("after", "states", "hold_role"))
        after = None
        if "after" in raw:
            try:
                after = parse_duration(raw["after"])  # type: ignore[arg-type]
            except DurationError as exc:
                out.add((*path, "after"), exc.message)
        states = checks.state_list(ctx, raw, path, "states") if "states" in raw else None
        roles = checks.roles(ctx, raw, path, "hold_role")
        if roles is not None and AUTOMATION in roles:
            out.add((*path, "hold_role"), f"the automation actor cannot hold processes: "
                    f"{AUTOMATION} cannot be a hold role")  # fmt: skip
        if len(out.items) != before or after is None or states is None or roles is None:
            return None
        return RetentionSpec(after=after, states=states, hold_roles=roles)

    def _terminal(
        self, retention: RetentionSpec, raw: dict[str, JsonValue], actions: dict[str, Action]
    ) -> None:
        """A state retention counts from must be one the process cannot leave."""
        for index, state in enumerate(retention.states):
            leaving = [a.name for a in actions.values() if a.type == "transition"
                       and a.allows_state(state) and a.to != state]  # fmt: skip
            if leaving:
                self.out.add(
                    ("retention", "states", index),
                    f"state {state!r} is not final: action {leaving[0]!r} leaves it, so a "
                    "process in it is not finished",
                )

    def _erasure(self, ctx: checks.Context, doc: dict[str, JsonValue]) -> ErasureSpec | None:
        """The `erasure` block, which grants the built-in `charter:erase`."""
        if "erasure" not in doc:
            return None
        out, raw, path = self.out, doc["erasure"], ("erasure",)
        if not isinstance(raw, dict):
            out.add(path, 'must be an object: {"role", "from", "when"?, "bases"}')
            return None
        before = len(out.items)
        out.keys(raw, path, ERASURE_KEYS, ("role", "from", "bases"))
        roles = checks.roles(ctx, raw, path)
        if roles is not None and AUTOMATION in roles:
            out.add((*path, "role"), f"the automation actor cannot erase: {AUTOMATION} cannot "
                    "be an erasure role")  # fmt: skip
        from_states: tuple[str, ...] | None = None
        if "from" in raw:  # a missing one is reported with the block's other keys
            from_states, _ = checks.from_states(ctx, raw, path, "update")
        when = checks.condition(ctx, raw, path)
        bases = _bases(out, raw.get("bases"), (*path, "bases")) if "bases" in raw else None
        if len(out.items) != before or roles is None or bases is None:
            return None
        return ErasureSpec(roles=roles, from_states=from_states, when=when, bases=bases)

    def _personal_checks(self, doc: dict[str, JsonValue], actions: dict[str, Action]) -> None:
        with_personal = [name for name, action in actions.items() if action.personal]
        if with_personal and "erasure" not in doc:
            self.out.add(
                (),
                f"action(s) {', '.join(map(repr, with_personal))} have personal input "
                'fields but the workflow has no `erasure` block ({"role", "from", "bases"}): '
                "say who may erase them, and on which grounds",
                "personal_without_erasure",
            )
        flows_out(self.out, actions)

    def _action(self, ctx: checks.Context, name: str, raw: JsonValue) -> Action | None:
        out, path = self.out, ("actions", name)
        if not NAME_PATTERN.fullmatch(name):
            out.add(path, f"action name must match {NAME_PATTERN.pattern}")
        elif name.startswith(RESERVED_PREFIX):
            out.add(
                path,
                f"the {RESERVED_PREFIX!r} prefix is reserved for Charter's built-in actions "
                f"(such as {MIGRATE_ACTION}): give the action another name",
                "reserved_action",
            )
        if not isinstance(raw, dict):
            out.add(path, "an action must be a JSON object")
            self.summaries[name] = _Summary(None, None)
            self.graph_complete = False
            return None
        before = len(out.items)
        out.keys(raw, path, ACTION_KEYS, ("role",))
        kind = _action_type(out, raw, path)
        roles = checks.roles(ctx, raw, path)
        from_states, from_ok = checks.from_states(ctx, raw, path, kind)
        to, to_ok = checks.target_state(ctx, raw, path, kind)
        self.summaries[name] = _Summary(kind, roles)
        if kind is None or not (from_ok and to_ok):
            self.graph_complete = False
        elif kind == "create" and to is not None:
            self.starts.add(to)
        elif kind == "transition" and to is not None:
            self.edges.append((from_states, to))
        when = checks.condition(ctx, raw, path)
        schema, validator = checks.input_schema(out, raw, path)
        personal = personal_pointers(out, raw.get("input"), (*path, "input"))
        mutate = check_mutate(ctx, raw, path, to, to_ok)
        spawn = checks.spawns(ctx, raw, path)
        schedule = checks.schedules(ctx, raw, path)
        cancel = checks.cancels(ctx, raw, path)
        auto = checks.auto(ctx, raw.get("auto", False), (*path, "auto"))
        # Judged on intent, so a malformed `auto` still gets these two checks.
        if raw.get("auto", False) is not False:
            if kind == "create":
                out.add(
                    (*path, "auto"),
                    "a create action cannot be automatic: there is no process to fire on",
                )
            if roles is not None and AUTOMATION not in roles:
                out.add((*path, "auto"), f"an automatic action must grant the {AUTOMATION} role")
        description = checks.optional_string(out, raw, "description", path)
        if len(out.items) != before or kind is None or roles is None:
            return None
        return Action(
            name=name,
            type=kind,
            roles=roles,
            from_states=from_states,
            to=to,
            when=when,
            input_schema=schema,
            input_validator=validator,
            mutate=mutate,
            spawn=spawn,
            schedule=schedule,
            cancel=cancel,
            auto=auto,
            description=description,
            personal=personal,
        )

    def _cross_checks(self, ctx: checks.Context, raw_actions: dict[str, JsonValue]) -> None:
        out = self.out
        for path, target in ctx.schedule_targets:
            summary = self.summaries.get(target)
            if target not in raw_actions or summary is None:
                out.add(path, f"unknown action {target!r}")
            elif summary.type == "create":
                out.add(path, f"cannot schedule create action {target!r}: it starts a process")
            elif summary.roles is not None and AUTOMATION not in summary.roles:
                out.add(
                    path,
                    f"scheduled action {target!r} must grant the {AUTOMATION} role "
                    "(the automation actor fires it)",
                )
        for path, schedule_id in ctx.cancel_ids:
            if schedule_id not in ctx.schedule_ids:
                out.add(path, f"unknown schedule id {schedule_id!r}: no action schedules it")
        types = [s.type for s in self.summaries.values()]
        if "create" not in types and None not in types:
            out.add(("actions",), "no create action: a process of this workflow can never start")

    def _reachability(self, states: tuple[str, ...]) -> None:
        # Partial graphs would report states that a broken action does reach; the
        # problems already reported for that action come first.
        if not self.graph_complete or not self.starts:
            return
        reached = set(self.starts)
        frontier = list(self.starts)
        while frontier:
            state = frontier.pop()
            for sources, target in self.edges:
                if target not in reached and (sources is None or state in sources):
                    reached.add(target)
                    frontier.append(target)
        for index, state in enumerate(states):
            if state not in reached:
                self.out.add(
                    ("states", index), f"state {state!r} is unreachable from every create action"
                )


def _bases(out: Problems, value: JsonValue, path: Path) -> tuple[str, ...] | None:
    """The legal grounds an erasure may cite: names like `art17-1a`, at least one."""
    if not isinstance(value, list) or not value:
        out.add(path, 'must be a non-empty list of legal bases, e.g. ["art17-1a"]')
        return None
    found: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not BASIS_PATTERN.fullmatch(item):
            out.add((*path, index), f"a basis must match {BASIS_PATTERN.pattern}")
        elif item in found:
            out.add((*path, index), f"basis {item!r} is listed twice")
        else:
            found.append(item)
    return tuple(found) if len(found) == len(value) else None


def _action_type(out: Problems, raw: dict[str, JsonValue], path: Path) -> ActionType | None:
    value = raw.get("type", "transition")
    for kind in ACTION_TYPES:
        if value == kind:
            return kind
    out.add((*path, "type"), "must be one of " + ", ".join(ACTION_TYPES))
    return None
