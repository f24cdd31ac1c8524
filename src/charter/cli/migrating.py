"""Migrating processes over the API: which process moves where, and signing one
`charter:migrate` for each on the client (the operator's key never leaves the machine).

`plan_state_moves` finds the processes of a workflow in the states a map names;
`migrate_processes` takes any list of (process, target state) pairs, wherever they come
from, and signs and submits one migration per pair, re-signing on `stale_prev` for as
long as the process is still in the state it was planned from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from charter.core import identifiers
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Submission
from charter.core.errors import CharterError, Duplicate, InvalidInput, Malformed
from charter.core.jsontypes import JsonObject
from charter.core.resign import ReadHead, drive, sign_on_head
from charter.dsl.migration import REASON_PATTERN
from charter.dsl.model import MIGRATE_ACTION, Workflow
from charter.dsl.validate import load_workflow
from charter.sdk.client import Client
from charter.sdk.results import Process
from charter.sdk.signing import EventSigner, recorded, utc_now

Move = tuple[Process, str]
"""A process as it was read when the move was planned, and the state to move it to."""
Result = Literal["migrated", "skipped", "failed"]
DEFAULT_RETRIES = 5


@dataclass(frozen=True)
class Outcome:
    """What became of one move."""

    process: str
    from_state: str
    to_state: str
    result: Result
    code: str | None = None  # the refusal's code, for a failed or skipped move
    detail: str = ""
    seq: int | None = None  # the migration event's seq, once accepted

    def to_json(self) -> JsonObject:
        return {
            "process": self.process,
            "from": self.from_state,
            "to": self.to_state,
            "result": self.result,
            "code": self.code,
            "detail": self.detail,
            "seq": self.seq,
        }


def parse_state_map(pairs: Sequence[str]) -> dict[str, str]:
    """`OLD=NEW` pairs as a map; Malformed for a pair that is not one, or an OLD twice."""
    found: dict[str, str] = {}
    for pair in pairs:
        old, equals, new = pair.partition("=")
        if not equals or not all(identifiers.NAME.fullmatch(s) for s in (old, new)):
            raise Malformed(f"--map {pair!r}: expected OLD=NEW, two state names")
        if old in found:
            raise Malformed(f"--map names {old!r} twice")
        found[old] = new
    if not found:
        raise Malformed("give at least one --map OLD=NEW")
    return found


def check_reason(reason: str) -> str:
    if not REASON_PATTERN.fullmatch(reason):
        raise Malformed(
            f"--reason {reason!r}: a ticket reference matching {REASON_PATTERN.pattern}"
        )
    return reason


def migratable(api: Client, path: str, targets: Iterable[str]) -> Workflow:
    """The current definition at `path`, once it is known to grant `charter:migrate` and
    to have every state in `targets` (the engine would refuse each event otherwise)."""
    workflow = load_workflow(api.workflow(path).definition)
    if workflow.migration is None:
        raise InvalidInput(
            f"the current definition of {path!r} has no `migration` block: deploy one that "
            'names the roles that may migrate (`"migration": {"role": [...]}`)'
        )
    unknown = sorted(set(targets) - set(workflow.states))
    if unknown:
        raise InvalidInput(
            f"the current definition of {path!r} has no state {', '.join(map(repr, unknown))}"
        )
    return workflow


def plan_state_moves(api: Client, path: str, state_map: Mapping[str, str]) -> list[Move]:
    """Every process of `path` in a state `state_map` names, with its target; read in full
    before anything moves, so that paging never meets a process a migration touched."""
    moves: list[Move] = []
    for old, new in state_map.items():
        moves.extend((process, new) for process in api.iter_processes(workflow=path, state=old))
    return sorted(moves, key=lambda move: move[0].id)


def migrate_processes(
    api: Client,
    key: SecretKey,
    moves: Iterable[Move],
    *,
    reason: str,
    cancel: Sequence[str] = (),
    cancel_for: Mapping[str, Sequence[str]] | None = None,
    retries: int = DEFAULT_RETRIES,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Sign and submit one `charter:migrate` per move, one after another: what became of
    each (`on_outcome` is told as each ends). A refusal fails that move only. Each event
    cancels the schedules of `cancel`, and those `cancel_for` names for its process."""
    outcomes: list[Outcome] = []
    for process, target in moves:
        listed = [*cancel, *(cancel_for or {}).get(process.id, ())]
        outcome = migrate_one(api, key, process, target, reason=reason,
                              cancel=list(dict.fromkeys(listed)), retries=retries)  # fmt: skip
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    return outcomes


class _Moved(Exception):
    """Another event moved the process out of the state the move was planned from."""

    def __init__(self, state: str) -> None:
        super().__init__(state)
        self.state = state


def migrate_one(
    api: Client,
    key: SecretKey,
    process: Process,
    target: str,
    *,
    reason: str,
    cancel: Sequence[str] = (),
    retries: int = DEFAULT_RETRIES,
) -> Outcome:
    """One migration, signed on the head `process` was read with. On `stale_prev` the
    process is read again: still in its planned state, the event is signed again on the
    new head (at most `retries` times); moved elsewhere meanwhile, the move is skipped,
    since whoever moved it decided otherwise."""
    planned = process.state
    migration: JsonObject = {"state": target, "reason": reason}
    if cancel:
        migration["cancel"] = list(cancel)
    signer = EventSigner(key, process.id, MIGRATE_ACTION, migration, process.workflow, utc_now)

    def read_head(step: ReadHead) -> str | None:
        if not step.retry:
            return process.head
        current = api.process(process.id)
        if current.state != planned:
            raise _Moved(current.state)
        return current.head

    def send(submission: Submission) -> int:
        try:
            return api.submit_signed(submission).seq
        except Duplicate:
            # Recorded already: an earlier send of this very event whose answer was lost.
            found = api.process(process.id)
            return recorded(submission, found, api.events(process.id)).seq

    def ended(result: Result, code: str | None = None, detail: str = "") -> Outcome:
        return Outcome(process.id, planned, target, result, code, detail)

    try:
        seq = drive(sign_on_head(signer.sign, retries), read_head, send)
    except _Moved as moved:
        return ended("skipped", "stale_prev", f"another event moved it to {moved.state!r}")
    except CharterError as refused:
        detail = refused.message
        if refused.code == "stale_prev":
            detail = f"the head kept moving: gave up after {retries} re-signs"
        return ended("failed", refused.code, detail)
    return Outcome(process.id, planned, target, "migrated", seq=seq)
