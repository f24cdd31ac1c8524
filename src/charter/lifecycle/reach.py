"""What a definition lets a process do from a state, read off the definition alone.

A deploy plan asks two questions of the new definition for every state live processes
are in: can any action still run from here (else the process is stranded), and can the
action of a pending work row still run from some state the process can reach before
it fires (else the row would only fail later). Roles and `when` conditions are not
weighed: they depend on who acts and on the data, and the plan speaks of what the
definition allows at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from charter.dsl.model import Action, Workflow

STATE_REMOVED = "state_removed"
"""Stranded: the process's state is not a state of the new definition."""
NO_ACTION = "no_action"
"""Stranded: some action could run from its state before; none can now."""
ACTION_REMOVED = "action_removed"
"""Orphaned work: the new definition has no action of that name."""
UNREACHABLE = "unreachable"
"""Orphaned work: the action exists but runs from no state the process can reach."""


def runnable_from(workflow: Workflow, state: str) -> tuple[Action, ...]:
    """The workflow's own actions (not `charter:migrate`) a process in `state` may run."""
    return tuple(a for a in workflow.actions.values() if a.allows_state(state))


def stranded_reason(before: Workflow | None, after: Workflow, state: str) -> str | None:
    """Why a process in `state` would be stranded under `after`, or None.

    A dropped state strands even a terminal one: the process would sit in a state its
    definition no longer names."""
    if state not in after.states:
        return STATE_REMOVED
    if before is not None and runnable_from(before, state) and not runnable_from(after, state):
        return NO_ACTION
    return None


@dataclass
class Reach:
    """The states a process can reach under one definition, memoised per start state."""

    workflow: Workflow
    _memo: dict[str, frozenset[str]] = field(default_factory=dict)

    def states_from(self, state: str) -> frozenset[str]:
        """`state` and every state some chain of actions leads to from it."""
        found = self._memo.get(state)
        if found is not None:
            return found
        seen = {state}
        frontier = [state]
        while frontier:
            here = frontier.pop()
            for action in runnable_from(self.workflow, here):
                if action.to is not None and action.to not in seen:
                    seen.add(action.to)
                    frontier.append(action.to)
        found = frozenset(seen)
        self._memo[state] = found
        return found

    def orphan_reason(self, action_name: str, state: str) -> str | None:
        """Why work that runs `action_name` on a process now in `state` is orphaned."""
        action = self.workflow.actions.get(action_name)
        if action is None:
            return ACTION_REMOVED
        if any(action.allows_state(s) for s in self.states_from(state)):
            return None
        return UNREACHABLE
