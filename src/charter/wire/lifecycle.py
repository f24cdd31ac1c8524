"""A deploy plan on the wire (`POST /v1/workflows/plan`, docs/lifecycle.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from charter.wire.codec import Meta, Wire


@dataclass(frozen=True)
class PlanStranded(Wire):
    process: str
    state: Annotated[str, Meta(description="The process's state now.")]
    reason: Annotated[
        str,
        Meta(
            choices=("state_removed", "no_action"),
            description="`state_removed`: the new definition has no such state; `no_action`: "
            "some action ran from it before, none does now.",
        ),
    ]


@dataclass(frozen=True)
class PlanOrphanedWork(Wire):
    process: str
    work_id: Annotated[str, Meta(description="The scheduled action's or queue row's id.")]
    kind: Annotated[str, Meta(choices=("scheduled", "queue"))]
    action: str
    reason: Annotated[
        str,
        Meta(
            choices=("action_removed", "unreachable"),
            description="`action_removed`: the new definition has no such action; "
            "`unreachable`: it runs from no state the process can reach before it fires.",
        ),
    ]
    state: Annotated[str, Meta(description="The process's state now.")]
    schedule_id: Annotated[
        str | None,
        Meta(description="A scheduled action's schedule id (what a migration cancels)."),
    ] = None


@dataclass(frozen=True)
class PlanDiverging(Wire):
    process: str
    seq: Annotated[int, Meta(ge=1, description="The first event the new definition refuses.")]
    code: Annotated[str, Meta(description="The refusal's error code, e.g. `wrong_state`.")]
    message: str


@dataclass(frozen=True)
class PlanCounts(Wire):
    stranded: Annotated[int, Meta(ge=0)]
    orphaned_work: Annotated[int, Meta(ge=0)]
    diverging: Annotated[
        int | None,
        Meta(description="Left out of a refused deploy's plan: it replays no history."),
    ] = None


@dataclass(frozen=True)
class DeployPlan(Wire):
    """What deploying a definition would do: whole counts, up to 100 entries per list."""

    counts: PlanCounts
    stranded: tuple[PlanStranded, ...]
    orphaned_work: tuple[PlanOrphanedWork, ...]
    diverging: Annotated[
        tuple[PlanDiverging, ...],
        Meta(description="Left out of a refused deploy's plan: it replays no history."),
    ] = ()
    next_cursor: Annotated[
        str | None,
        Meta(required=True, description="Pass as `cursor` for the lists' next pages."),
    ] = None
