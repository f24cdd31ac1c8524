"""Warnings about valid workflows: things that deploy but are likely mistakes.

A warning never refuses a workflow. Today there is one: automatic actions without a
`when` that enable one another in a cycle. Each fires the next as soon as it can, so
they would run until the engine's cascade limit stops them (docs/automation.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from charter.dsl.model import Action, Workflow, json_pointer
from charter.dsl.validate import Problem


def workflow_warnings(workflow: Workflow) -> list[Problem]:
    """Every warning about a valid workflow, sorted like problems are."""
    return sorted(_unguarded_auto_cycles(workflow))


def _unguarded_auto_cycles(workflow: Workflow) -> Iterable[Problem]:
    unguarded = [a for a in workflow.auto_actions() if a.when is None]
    # State graph of what each unguarded automatic action does: (from, to, action).
    edges = [
        (source, action.to if action.to is not None else source, action.name)
        for action in unguarded
        for source in _sources(action, workflow.states)
    ]
    for component in _strongly_connected(workflow.states, edges):
        inside = {
            (source, target, name)
            for source, target, name in edges
            if source in component and target in component
        }
        names = sorted({name for _, _, name in inside})
        # An action is never queued by its own firing, so one action looping on one
        # state is no cycle; two distinct actions, or a cycle through several states, are.
        if len(component) == 1 and len(names) < 2:
            continue
        states = [s for s in workflow.states if s in component]
        yield Problem(
            json_pointer("actions", names[0], "auto"),
            f"automatic actions {', '.join(names)} have no `when` and enable one another "
            f"in state(s) {', '.join(states)}: they would fire in a loop until the cascade "
            "limit (CHARTER_MAX_AUTO_CASCADE, default 100) stops them",
        )


def _sources(action: Action, states: tuple[str, ...]) -> tuple[str, ...]:
    return states if action.from_states is None else action.from_states


def _strongly_connected(
    nodes: tuple[str, ...], edges: list[tuple[str, str, str]]
) -> list[frozenset[str]]:
    """Strongly connected components that hold at least one edge. Workflows are small:
    reachability from every node is simple and needs no recursion."""
    successors: dict[str, set[str]] = {node: set() for node in nodes}
    for source, target, _ in edges:
        successors[source].add(target)
    reachable = {node: _reach(node, successors) for node in nodes}
    found: list[frozenset[str]] = []
    seen: set[str] = set()
    for node in nodes:
        if node in seen or node not in reachable[node]:
            continue  # on no cycle at all
        component = frozenset(other for other in reachable[node] if node in reachable[other])
        seen |= component
        found.append(component)
    return found


def _reach(start: str, successors: dict[str, set[str]]) -> set[str]:
    """The nodes reachable from `start` by one edge or more."""
    reached: set[str] = set()
    frontier = list(successors[start])
    while frontier:
        node = frontier.pop()
        if node not in reached:
            reached.add(node)
            frontier.extend(successors[node])
    return reached
