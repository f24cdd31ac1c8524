"""Response models of the engine routes (docs/api.md), for /openapi.json.

The routes answer with JSONResponse built from their records' `to_json()`; these models
describe those answers (the contract test checks every answer against them). More keys
may be added to any object; the ones listed here are relied on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from charter.api.contract import HEX64, TIME
from charter.api.wire_models import model, page_model
from charter.wire import engine as wire
from charter.wire import lifecycle

if TYPE_CHECKING:
    # What the envelopes below name in annotations; made at run time from the wire.
    Actor = BaseModel
    ProcessBody = BaseModel
    ProcessWithChildren = BaseModel
    StoredEvent = BaseModel
    _Accepted = BaseModel
    Problem = BaseModel
    Verification = BaseModel
    Deployment = BaseModel
    WorkflowDetail = BaseModel
    StateCount = BaseModel
    Deployed = BaseModel
    DeployPlan = BaseModel
    ProcessAutomation = BaseModel
else:
    Actor = model(wire.Actor)
    ProcessBody = model(wire.Process)
    ProcessWithChildren = model(wire.Process, detail=True)
    StoredEvent = model(wire.Event)
    _Accepted = model(wire.Accepted)
    Problem = model(wire.Problem)
    Verification = model(wire.Verification)
    Deployment = model(wire.Deployment)
    WorkflowDetail = model(wire.Workflow)
    StateCount = model(wire.StateCount)
    Deployed = model(wire.Deployed)
    DeployPlan = model(lifecycle.DeployPlan)
    ProcessAutomation = model(wire.ProcessAutomation)

Json = Any  # any JSON value

_TIME = Field(description=TIME)
_EXAMPLE_HASH = "3b7f0c2e9d4a6b8c1e5f7a9d2c4e6b8a0f1d3c5e7a9b2d4f6c8e0a1b3d5f7c9e"


class Receipt(BaseModel):
    """The proof that an event is in the transparency log (`POST /v1/events?wait=log`)."""

    index: int = Field(ge=0, description="The event's leaf index in the log.")
    proof: str = Field(description="A c2sp.org/tlog-proof@v1 text against the checkpoint.")


class Accepted(_Accepted):
    """`POST /v1/events` → 201."""

    # Only the ingest route's wait=log adds it; the event's acceptance is the wire's.
    log: Receipt | None = Field(
        default=None,
        description="With `wait=log`: the receipt once the event is in a published"
        " checkpoint, null on timeout; absent otherwise.",
    )


Events = page_model(
    StoredEvent,
    "Events",
    paged=False,
    old_key="events",
    description="Every event of the process: the list envelope, never paged.",
    items_description="In `seq` order.",
)


class BundleLog(BaseModel):
    """The `log` member of `charter-export/2`: the last logged event's inclusion proof."""

    origin: str = Field(description="The log's origin (its checkpoints' first line).")
    process_key: str | None = Field(
        pattern=HEX64, description="HMAC-SHA256(log salt, process id): the leaf's pseudonym."
    )
    seq: int = Field(ge=0, description="The seq proven; 0 when none is logged yet.")
    proof: str | None = Field(description="A c2sp.org/tlog-proof@v1 text, or null.")
    unlogged: int = Field(ge=0, description="Events after `seq`, not proven.")


class ExportBundle(BaseModel):
    """`charter-export/1`, or `/2` with `log` when the deployment has a transparency log
    (docs/verification.md): everything an offline verifier needs."""

    format: Literal["charter-export/1", "charter-export/2"]
    process: dict[str, Json]
    events: list[dict[str, Json]]
    workflows: dict[str, Json] = Field(description="Definition version → definition.")
    causes: dict[str, Json] = Field(description="Hash → the event that caused a spawn.")
    actors: dict[str, Json] | None = Field(
        default=None, description="The automation actor's keys, current and retired."
    )
    log: BundleLog | None = Field(default=None, description="`charter-export/2` only.")


Workflows = page_model(
    Deployment,
    "Workflows",
    paged=False,
    old_key="workflows",
    description="Every deployed path's current deployment: the list envelope, never paged.",
)

WorkflowStates = page_model(
    StateCount,
    "WorkflowStates",
    paged=False,
    description="How many processes of a workflow path are in each state, by the revision of"
    " their last event: the list envelope, never paged.",
    items_description="Newest revision first, then by state; a (revision, state) without"
    " processes is left out.",
)

Actors = page_model(
    Actor,
    "Actors",
    paged=False,
    old_key="actors",
    description="Every actor: the list envelope, never paged.",
)


class Health(BaseModel):
    ok: Literal[True]
    version: str
    schema_version: int


class Unhealthy(BaseModel):
    ok: Literal[False]
    error: dict[str, Json]


class WebhookAccepted(BaseModel):
    runs: list[str] = Field(description="Ids of the pending runs admitted, maybe none.")


class LogWitnessing(BaseModel):
    """What publishes the log's checkpoints, from the sequencer's policy."""

    mode: Literal["independent", "local", "none"] = Field(
        description="`independent`: witnesses named by URL; `local`: only a witness on this"
        " host (not independent); `none`: no witness (`--no-witness`, or `quorum none`)."
    )
    witnesses: list[str] = Field(description="The policy names of the witnesses asked.")
    warning: str | None = Field(
        description='What the mode cannot detect, e.g. "no witness: a rollback or fork of the'
        ' log is undetectable"; null with independent witnesses.'
    )


class LogStatus(BaseModel):
    """`GET /v1/log/status`: the log as its directory shows it, and the queue before it."""

    origin: str | None = Field(description="The log's origin; null before the first checkpoint.")
    size: int = Field(ge=0, description="Entries in the latest published checkpoint.")
    cosignatures: int = Field(ge=0, description="Witness cosignatures on that checkpoint.")
    halted: str | None = Field(description="Why the sequencer halted (`db_behind_log`, ...).")
    halt_message: str | None
    pending: int = Field(ge=0, description="Events committed but not logged yet.")
    oldest_pending_s: float = Field(ge=0, description="How long the oldest has waited.")
    witnessing: LogWitnessing
