"""The engine's objects on the wire. Field order is the JSON's key order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from charter.core.jsontypes import JsonObject, JsonValue
from charter.wire.codec import Meta, Wire
from charter.wire.patterns import HEX64, NAME, PRINCIPAL, WORKFLOW_PATH


@dataclass(frozen=True)
class Actor(Wire):
    id: Annotated[str, Meta(pattern=PRINCIPAL)]
    roles: tuple[str, ...]
    # The active key (64 hex); None when it holds none.
    public_key: Annotated[str | None, Meta(pattern=HEX64, description="The active key.")]
    disabled: bool
    created_at: datetime
    # How many keys the actor has held, the active one included.
    keys: Annotated[int, Meta(ge=0, description="How many keys it has held.")]


@dataclass(frozen=True)
class Process(Wire):
    """A process (docs/wire-format.md): its state, data, head and seq."""

    id: Annotated[str, Meta(pattern=NAME, examples=("p-4f2a9c",))]
    workflow: Annotated[
        str, Meta(pattern=WORKFLOW_PATH, examples=("customer/retail/retail-customer",))
    ]
    state: Annotated[str, Meta(examples=("open",))]
    data: Annotated[JsonObject, Meta(description="The process document without `state`.")]
    # The hash of the last event; a new event's `prev`.
    head: Annotated[str | None, Meta(pattern=HEX64, description="Hash of the last event.")]
    seq: Annotated[int, Meta(ge=0)]
    parent: Annotated[str | None, Meta(description="The process that spawned this one.")]
    created_at: datetime | None
    updated_at: datetime | None
    # Null only in the answer of a process that has no event yet (never seen on the API).
    revision: Annotated[
        int | None,
        Meta(ge=1, required=True, description="The workflow revision of its last event."),
    ] = None
    # Only GET /v1/processes/{id} and the process list name them.
    children: Annotated[
        tuple[str, ...], Meta(description="Ids of the processes it spawned.", detail=True)
    ] = ()


@dataclass(frozen=True)
class Event(Wire):
    """A stored event: the signed envelope and what the engine recorded with it."""

    seq: Annotated[int, Meta(ge=1)]
    hash: Annotated[str, Meta(pattern=HEX64)]
    envelope: Annotated[
        JsonObject, Meta(description="The signed v1 or v2 envelope (docs/wire-format.md).")
    ]
    signature: Annotated[str | None, Meta(description="Null for a spawn genesis (it is caused).")]
    kind: Annotated[str, Meta(choices=("action", "spawn"))]
    workflow_version: str
    received_at: datetime | None
    actor_id: str
    actor_roles: tuple[str, ...]
    # The revision of the workflow path whose rules decided the event (`workflow_version`
    # is that revision's definition hash).
    workflow_revision: Annotated[
        int | None,
        Meta(
            key="revision",
            ge=1,
            required=True,
            description="The revision of the workflow path the event was decided under.",
        ),
    ] = None
    disclosures: Annotated[
        dict[str, str] | None,
        Meta(
            description="With `?disclosures=true` (scope `personal:read`): the disclosure "
            "texts kept for the event's personal fields, by JSON pointer (`{}` for none).",
        ),
    ] = None

    @property
    def action(self) -> str:
        return str(self.envelope.get("action", ""))

    @property
    def input(self) -> JsonValue:
        return self.envelope.get("input")


@dataclass(frozen=True)
class Accepted(Wire):
    """An accepted event: its hash and seq, and the process as it now is."""

    hash: Annotated[str, Meta(pattern=HEX64, description="The new event's hash, the process head.")]
    seq: Annotated[int, Meta(ge=1)]
    process: Process


@dataclass(frozen=True)
class Problem(Wire):
    """One thing verification found wrong; `seq` None: about the whole process."""

    seq: Annotated[
        int | None, Meta(description="The event's seq; null for the process as a whole.")
    ]
    code: str
    message: str


@dataclass(frozen=True)
class ErasedValue(Wire):
    """A personal value a `charter:erase` event removed, as governance allows."""

    seq: Annotated[int, Meta(description="The seq of the event whose value it was.")]
    pointer: Annotated[str, Meta(description="The input field, as a JSON pointer.")]
    by_seq: Annotated[int, Meta(description="The seq of the `charter:erase` event.")]
    basis: Annotated[str, Meta(description="The legal basis the erase event cites.")]


@dataclass(frozen=True)
class WithheldValue(Wire):
    """A personal value the export left out (`--withhold-personal`)."""

    seq: int
    pointer: str


@dataclass(frozen=True)
class UnverifiableCheck(Wire):
    """A check replay could not make because a value it reads is gone."""

    seq: int
    why: str


@dataclass(frozen=True)
class Erasure(Wire):
    """What became of the personal values of the process's v2 events."""

    erased: tuple[ErasedValue, ...]
    withheld: tuple[WithheldValue, ...]
    unverifiable: tuple[UnverifiableCheck, ...]


@dataclass(frozen=True)
class Verification(Wire):
    ok: Annotated[bool, Meta(description="True exactly when there are no problems.")]
    events: Annotated[int, Meta(ge=0)]
    problems: tuple[Problem, ...]
    erasure: Annotated[
        Erasure | None,
        Meta(description="Present when the process has events with personal fields "
             "(envelope v2): which values were erased or withheld, and what replay could "
             "not check without them."),
    ] = None  # fmt: skip


@dataclass(frozen=True)
class Deployment(Wire):
    """One revision of a workflow path: the version (definition hash) it points at."""

    path: Annotated[str, Meta(pattern=WORKFLOW_PATH)]
    revision: Annotated[int, Meta(ge=1)]
    version: Annotated[str, Meta(description="The definition's content hash.")]
    deployed_at: datetime
    deployed_by: Annotated[str | None, Meta(description="The principal that deployed it.")]
    deployed_by_token: Annotated[
        str | None,
        Meta(required=True, description="The id of the API token that deployed it, if one did."),
    ] = None
    allow_stranding: Annotated[
        bool,
        Meta(
            required=True,
            description="The deploy was allowed to strand processes or orphan their work.",
        ),
    ] = False
    migration_map: Annotated[
        dict[str, str] | None,
        Meta(
            required=True,
            description="The state map (old state to new) of the migration the deploy "
            "came with, if any.",
        ),
    ] = None


@dataclass(frozen=True)
class Workflow(Wire):
    """The current deployment of a path, its definition and every revision, newest first."""

    deployment: Annotated[Deployment, Meta(flatten=True)]
    definition: JsonObject
    revisions: Annotated[tuple[Deployment, ...], Meta(description="Newest first.")]
    personal: Annotated[
        dict[str, tuple[str, ...]],
        Meta(
            description="The JSON pointers of each action's personal input fields "
            '(`"x-personal": true`), by action name: a client sends these as disclosures, '
            "never in `input`. Actions without any are left out.",
        ),
    ]


@dataclass(frozen=True)
class StateCount(Wire):
    """How many processes of a workflow path are in one state, among those whose last
    event was decided under one revision."""

    revision: Annotated[int, Meta(ge=1, description="The revision of their last event.")]
    state: str
    processes: Annotated[int, Meta(ge=1, description="How many processes.")]


@dataclass(frozen=True)
class Warning(Wire):
    """What a deploy noticed but did not refuse, and where in the definition."""

    pointer: Annotated[str, Meta(description="A JSON pointer into the definition.")]
    message: str


@dataclass(frozen=True)
class Deployed(Wire):
    """The answer to a deploy: the deployment, the definition's warnings, and whether
    the definition was already the path's current one (nothing deployed)."""

    deployment: Annotated[Deployment, Meta(flatten=True)]
    # Kept as the JSON objects they came as; the document describes them as Warning.
    warnings: Annotated[
        tuple[JsonObject, ...],
        Meta(description="What deploys but deserves a look.", document_as=Warning, required=True),
    ] = ()
    unchanged: Annotated[
        bool,
        Meta(description="True (and 200): the path ran this definition already.", required=True),
    ] = False


@dataclass(frozen=True)
class WorkItem(Wire):
    """A scheduled action or an automatic-action queue row, as the operator views list
    them (`kind` is `scheduled_action` or `auto_action`; `what` the action it fires)."""

    id: str
    kind: Annotated[str, Meta(description="`scheduled_action` or `auto_action`.")]
    what: Annotated[str, Meta(description="The action it fires.")]
    process: str
    workflow: str
    due: Annotated[
        datetime | None, Meta(description="When it fires (next occurrence, or retry time).")
    ]
    status: str
    attempts: int
    last_error: str | None
    last_attempt_at: datetime | None
    last_result: str | None
    # A scheduled action's own keys.
    schedule_id: str | None = None
    every: str | None = None
    retry_at: datetime | None = None
    # A queue row's own key.
    queued_at: datetime | None = None


@dataclass(frozen=True)
class WorkTableRow(Wire):
    """A row of `scheduled_actions` or `automation_queue` (docs/automation.md), every column."""

    id: str
    status: str
    action_name: str


@dataclass(frozen=True)
class ProcessAutomation(Wire):
    """A process's scheduled actions and automatic-action queue rows, as stored."""

    scheduled: Annotated[tuple[JsonObject, ...], Meta(document_as=WorkTableRow)]
    queue: Annotated[tuple[JsonObject, ...], Meta(document_as=WorkTableRow)]


@dataclass(frozen=True)
class ProcessCount(Wire):
    workflow: str
    state: str
    count: int


@dataclass(frozen=True)
class Stats(Wire):
    """Counts for a dashboard (GET /v1/stats)."""

    process_counts: Annotated[tuple[ProcessCount, ...], Meta(key="processes")]
    timers_due_next_hour: Annotated[
        int, Meta(description="Active scheduled actions due within the hour.")
    ]
    queue: Annotated[dict[str, int], Meta(description="Automatic-action queue rows by status.")]
    failed_work: Annotated[
        int, Meta(description="Scheduled actions and queue rows that failed for good.")
    ]
    as_of: Annotated[datetime, Meta(description="The database time the counts were taken at.")]
    runs: Annotated[
        dict[str, int],
        Meta(
            description="Runs by status: the token principal's (everyone's for `*`); empty "
            "without `runs:read`."
        ),
    ]
    machines_seen_recently: Annotated[
        int | None,
        Meta(
            description="Machines that authenticated in the last 5 minutes (the principal's, "
            "everyone's for `*`); null without `automations:read`."
        ),
    ]

    @property
    def processes(self) -> dict[tuple[str, str], int]:
        """(workflow, state) → how many processes are in it."""
        return {(c.workflow, c.state): c.count for c in self.process_counts}
