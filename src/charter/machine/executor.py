"""The machine executor (`charter machine run`): claim a run, walk its plan, journal.

For a claimed run (docs/machines.md, rules 1 and 4 to 7):

1. The plan is the run's immutable snapshot (never the automation's current plan). An
   invalid snapshot, or an action id no host is registered for, fails the run before
   any step starts.
2. Steps run in plan order. A step the journal has completed is skipped, never invoked
   again; the first incomplete one is where a resumed run picks up.
3. A step is journalled `running` under the lease before its action is invoked (the
   service confirming the lease is what allows the action to begin), then its host is
   called with the payload, the step's stable idempotency key and a cancellation event.
4. While the action runs the lease is renewed every `heartbeat` seconds. If a renewal
   fails the cancellation event is set, the action is given `cancel_grace` seconds and
   then cancelled, and the run is not advanced: nothing more is journalled.
5. When the action returns, its output is journalled before the run advances (the
   crash point `machine.step_returned_before_journal` sits between the two). After the
   last step the run is completed with the last step's output.

Failures (rule 7: only transient transport failures retry; failures.py tells them
apart). A transport failure (`transient_failure`) — of an action, or between the
machine and the service, which also counts the service answering that it is
unavailable (`service_unavailable`) — releases the run to a retry time
`now + retry_delay(attempt)` (capped by `max_retry_delay`, and again by the service)
keeping completed outputs, until `max_attempts` claims have been spent — then the run
fails. A step's target answering with an error status (`TargetAnswered`, whichever
host raised it) fails the run, unless the step's `retry.on` names the condition the
status meets (`http_5xx`, `http_429`): then it is released like a transport failure,
at the answer's `Retry-After` when it gave one (within the same caps). Everything else
is deterministic and fails the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol

from opentelemetry.trace import Span, StatusCode

from charter.automations.plan import Plan, Policy, Step, parse_plan, parse_policy
from charter.core.crashpoints import STEP_RETURNED_BEFORE_JOURNAL, crash_point
from charter.core.errors import CharterError, LeaseLost
from charter.core.errors.automations import InvalidDpop, InvalidPlan
from charter.core.ijson import check_value
from charter.core.jsontypes import JsonValue
from charter.machine.actions import ActionCall, TargetAnswered
from charter.machine.client import ClaimedRun, JournalEntry
from charter.machine.failures import service_transient, transient_failure
from charter.machine.registry import ActionRegistry
from charter.tracing import Attributes, run_carrier, span

log = logging.getLogger("charter.machine")
RUN_SPAN = "charter.run"
STEP_SPAN = "charter.run.step"

_SNAPSHOT_KEYS = frozenset({"version", "steps", "allowlist", "limits"})


def default_retry_delay(attempt: int) -> float:
    """Exponential backoff: 2, 4, 8, ... seconds, at most 300."""
    return float(min(300, 2 ** max(1, attempt)))


class MachineApi(Protocol):
    """What the executor needs of the service (MachineClient, or a test double)."""

    async def claim(self) -> ClaimedRun | None: ...
    async def renew(self, run_id: str, token: str) -> datetime: ...
    async def start_step(self, run_id: str, step_id: str, token: str) -> JournalEntry: ...
    async def complete_step(
        self, run_id: str, step_id: str, token: str, output: JsonValue
    ) -> JournalEntry: ...
    async def complete_and_start(
        self, run_id: str, step_id: str, token: str, output: JsonValue, next_step: str
    ) -> JournalEntry: ...
    async def complete_run(self, run_id: str, token: str, output: JsonValue) -> object: ...
    async def finish(
        self, run_id: str, token: str, output: JsonValue, *, step: str | None, claim: bool
    ) -> ClaimedRun | None: ...
    async def fail_run(self, run_id: str, token: str, error: str) -> object: ...
    async def release_run(
        self, run_id: str, token: str, error: str, retry_at: datetime | None
    ) -> object: ...


class Outcome(StrEnum):
    COMPLETED = "completed"  # every step journalled, the run completed
    FAILED = "failed"  # a deterministic error failed the run
    RELEASED = "released"  # a transient failure (or a stop) released it for a retry
    LOST = "lost"  # the lease was lost: the run was left to whoever holds it now
    ABANDONED = "abandoned"  # the service could not be told; the lease will expire


@dataclass(frozen=True)
class ExecutorOptions:
    """The executor's options: `now`, `heartbeatMs`, `maxAttempts`, `retryDelayMs`."""

    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    heartbeat: float = 10.0  # seconds between lease renewals while an action runs
    max_attempts: int = 5  # claims of one run before a transient failure fails it
    retry_delay: Callable[[int], float] = default_retry_delay  # seconds, by attempt
    max_retry_delay: float = 3600.0
    cancel_grace: float = 5.0  # seconds a cancelled action may take to wind down

    def __post_init__(self) -> None:
        if not (0 < self.heartbeat < math.inf):
            raise ValueError("heartbeat must be a positive number of seconds")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 <= self.max_retry_delay < math.inf or self.cancel_grace < 0:
            raise ValueError("max_retry_delay and cancel_grace must be finite and >= 0")


@dataclass
class _Walk:
    """What walking a plan carries from one step to the next."""

    last: JsonValue = None  # the last step's output: the run's
    outputs: dict[str, JsonValue] = field(default_factory=dict)  # `{{ steps.<id>.… }}`
    started: JournalEntry | None = None  # journalled running with the last output
    unjournalled: str | None = None  # the last step, journalled with the run


@dataclass(frozen=True)
class _Returned:
    output: JsonValue


@dataclass(frozen=True)
class _Raised:
    error: BaseException


@dataclass(frozen=True)
class _Lost:
    reason: BaseException


class RunExecutor:
    """Executes claimed runs through registered action hosts."""

    def __init__(
        self,
        api: MachineApi,
        actions: ActionRegistry,
        options: ExecutorOptions | None = None,
    ) -> None:
        self.api = api
        self.actions = actions
        self.options = options or ExecutorOptions()

    # --- the loop ---------------------------------------------------------------------

    async def run(
        self,
        stop: asyncio.Event,
        *,
        once: bool = False,
        poll: float = 1.0,
        max_poll: float = 10.0,
        slots: int = 1,
    ) -> int:
        """Claim and execute runs until `stop` is set (or, with `once`, after one claim
        attempt). Returns how many runs were executed. Deterministic refusals of the
        claim itself (an unregistered or disabled machine) are raised.

        `slots` runs are executed at a time, each under its own lease, by as many claim
        loops (the machine's concurrency; one run's steps stay strictly in order). With
        `once`, one slot claims once.

        An idle machine waits inside its claim (the service's long poll answers when a
        run is admitted), so there is no sleep between claims; a completed run's last
        request claims the next one. Empty claims are kept `poll` seconds apart all the
        same (a service that does not wait answers at once), and after a failed claim
        the pause doubles up to `max_poll`."""
        if slots < 1:
            raise ValueError("slots must be at least 1")
        if once or slots == 1:
            return await self._slot(stop, once=once, poll=poll, max_poll=max_poll)
        loops = [
            asyncio.ensure_future(self._slot(stop, once=False, poll=poll, max_poll=max_poll))
            for _ in range(slots)
        ]
        try:
            return sum(await asyncio.gather(*loops))
        finally:
            for loop in loops:
                loop.cancel()  # one slot raised: stop the others too

    async def _slot(self, stop: asyncio.Event, *, once: bool, poll: float, max_poll: float) -> int:
        """One claim loop: claim, execute, repeat (see `run`)."""
        executed = 0
        idle = poll
        loop = asyncio.get_running_loop()
        handed: ClaimedRun | None = None  # claimed by the last run's completion
        claimed: ClaimedRun | None
        while not stop.is_set():
            began, failed = loop.time(), False
            if handed is not None:
                claimed, handed = handed, None
            else:
                try:
                    claimed = await self._claim(stop)
                except Exception as exc:
                    if not service_transient(exc):
                        raise
                    log.warning("claim failed (%s); retrying in %.1f s", _describe(exc), idle)
                    claimed, failed = None, True
            if claimed is not None:
                idle = poll
                outcome, handed = await self._execute(claimed, stop, claim_next=not once)
                executed += 1
                log.info("run %s: %s", claimed.run_id, outcome)
            if once:
                return executed
            if claimed is None:
                pause = idle if failed else poll - (loop.time() - began)
                if pause > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=pause)
                idle = min(idle * 2, max_poll) if failed else poll
        if handed is not None:  # claimed as the machine stopped: back to the queue at once
            await self._release(handed, "the machine is stopping", retry=False)
        return executed

    async def _claim(self, stop: asyncio.Event) -> ClaimedRun | None:
        """One claim (a long poll), abandoned if the machine is told to stop meanwhile."""
        claim = asyncio.ensure_future(self.api.claim())
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({claim, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not claim.done():
                claim.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await claim
        return None if claim.cancelled() else claim.result()

    # --- one run ----------------------------------------------------------------------

    async def execute(self, claimed: ClaimedRun, stop: asyncio.Event | None = None) -> Outcome:
        """Walk a claimed run's plan from its first incomplete step."""
        outcome, _ = await self._execute(claimed, stop, claim_next=False)
        return outcome

    async def _execute(
        self, claimed: ClaimedRun, stop: asyncio.Event | None, *, claim_next: bool
    ) -> tuple[Outcome, ClaimedRun | None]:
        """`_walk` inside the run's span: a child of the span that admitted the run (the
        trace its claim carries), else the root of a trace of its own."""
        attributes: Attributes = {
            "charter.run_id": claimed.run_id,
            "charter.run.attempt": claimed.attempts,
        }
        with span(RUN_SPAN, attributes, carrier=run_carrier(claimed.traceparent)) as current:
            outcome, handed = await self._walk(claimed, stop, claim_next=claim_next)
            _ended(current, outcome)
            return outcome, handed

    async def _walk(
        self, claimed: ClaimedRun, stop: asyncio.Event | None, *, claim_next: bool
    ) -> tuple[Outcome, ClaimedRun | None]:
        """Walk the plan; with `claim_next`, the run's completion also claims the next
        run, which comes back with the outcome.

        Each step's output is journalled together with the next step's start (one
        request, one commit), and the last one together with the run's completion."""
        try:
            plan, policy = plan_from_snapshot(claimed.plan)
        except InvalidPlan as exc:
            return await self._fail(claimed, f"invalid plan snapshot: {exc.message}"), None
        for step in plan.steps:
            if step.action_id not in self.actions:
                message = f"step {step.id!r}: no action host for {step.action_id!r}"
                return await self._fail(claimed, message), None
            if not policy.allows(step.action_id):
                # An authorization failure: deterministic, the run fails before any step.
                message = f"step {step.id!r}: {step.action_id!r} is not on the allowlist"
                return await self._fail(claimed, message), None
        # A claim may have journalled the first incomplete step running already.
        walk = _Walk(started=claimed.started)
        try:
            for index, step in enumerate(plan.steps):
                entry = claimed.journal.get(step.id)
                if entry is not None and entry.status == "completed":
                    # Rule 4: a completed step is never invoked again.
                    walk.last = walk.outputs[step.id] = entry.output
                    continue
                if stop is not None and stop.is_set():
                    # A step already journalled running is journalled failed by the
                    # release; it starts again, with the same key, on the next claim.
                    released = await self._release(claimed, "the machine is stopping", retry=False)
                    return released, None
                following = plan.steps[index + 1] if index + 1 < len(plan.steps) else None
                ended = await self._step(claimed, step, following, policy, walk, stop)
                if ended is not None:
                    return ended, None
            stopping = stop is not None and stop.is_set()
            handed = await self.api.finish(
                claimed.run_id,
                claimed.token,
                walk.last,
                step=walk.unjournalled,
                claim=claim_next and not stopping,
            )
            return Outcome.COMPLETED, handed
        except Exception as exc:
            return await self._service_failed(claimed, exc), None

    async def _step(
        self,
        claimed: ClaimedRun,
        step: Step,
        following: Step | None,
        policy: Policy,
        walk: _Walk,
        stop: asyncio.Event | None,
    ) -> Outcome | None:
        """One step inside its span: how the run ended, or None when it goes on."""
        attributes = {"charter.run_id": claimed.run_id, "charter.step": step.id}
        with span(STEP_SPAN, attributes) as current:
            try:
                ended = await self._walk_step(claimed, step, following, policy, walk, stop, current)
            except Exception as exc:
                # The service refused or could not be reached: the run ends here.
                ended = await self._service_failed(claimed, exc)
            _ended(current, ended or Outcome.COMPLETED)
            return ended

    async def _walk_step(
        self,
        claimed: ClaimedRun,
        step: Step,
        following: Step | None,
        policy: Policy,
        walk: _Walk,
        stop: asyncio.Event | None,
        current: Span,
    ) -> Outcome | None:
        started = walk.started
        if started is None or started.step_id != step.id:
            # Rule 5: the service confirms the lease by journalling the step running.
            started = await self.api.start_step(claimed.run_id, step.id, claimed.token)
        current.set_attribute("charter.step.attempt", started.attempts)
        payload = step.render_input(claimed.input, walk.outputs)
        result = await self._invoke(
            claimed, step, payload, started.idempotency_key, policy.step_timeout_seconds
        )
        walk.started = None
        ended = await self._step_ended(claimed, step, result)
        if ended is not None or not isinstance(result, _Returned):
            return ended
        crash_point(STEP_RETURNED_BEFORE_JOURNAL)
        walk.last = walk.outputs[step.id] = result.output
        if following is None:
            walk.unjournalled = step.id  # journalled by the run's completion, one commit
        elif stop is not None and stop.is_set():
            await self.api.complete_step(claimed.run_id, step.id, claimed.token, walk.last)
        else:
            walk.started = await self.api.complete_and_start(
                claimed.run_id, step.id, claimed.token, walk.last, following.id
            )
        return None

    async def _step_ended(
        self, claimed: ClaimedRun, step: Step, result: _Returned | _Raised | _Lost
    ) -> Outcome | None:
        """How the run ends with this step's result: None when the step returned JSON and
        the run goes on; otherwise the run is failed, released or left (the lease lost)."""
        if isinstance(result, _Lost):
            log.warning(
                "run %s: lease renewal failed during step %s (%s); not advancing",
                claimed.run_id,
                step.id,
                _describe(result.reason),
            )
            return Outcome.LOST
        if isinstance(result, _Raised):
            return await self._action_failed(claimed, step, result.error)
        try:
            check_value(result.output)
        except CharterError as exc:
            message = f"step {step.id!r}: the output is not JSON: {exc.message}"
            return await self._fail(claimed, message)
        return None

    async def _invoke(
        self,
        claimed: ClaimedRun,
        step: Step,
        payload: JsonValue,
        key: str,
        timeout: float | None = None,
    ) -> _Returned | _Raised | _Lost:
        """Run the action, renewing the lease every heartbeat until it returns (or runs
        past the plan's `stepTimeoutSeconds`: then it is cancelled and the run fails)."""
        cancel = asyncio.Event()
        host = self.actions.get(step.action_id)
        task = asyncio.ensure_future(host(ActionCall(step.action_id, payload, key, cancel)))
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        try:
            while True:
                await asyncio.wait({task}, timeout=self.options.heartbeat)
                if task.done():
                    break
                if deadline is not None and asyncio.get_running_loop().time() >= deadline:
                    cancel.set()
                    await self._wind_down(task)
                    return _Raised(StepTimedOut(f"{step.action_id} ran past {timeout:g} s"))
                try:
                    await self.api.renew(claimed.run_id, claimed.token)
                except Exception as exc:
                    cancel.set()
                    await self._wind_down(task)
                    return _Lost(exc)
        finally:
            if not task.done():  # we are being cancelled ourselves
                task.cancel()
        if task.cancelled():
            return _Raised(asyncio.CancelledError(f"{step.action_id} was cancelled"))
        error = task.exception()
        if error is not None:
            return _Raised(error)
        return _Returned(task.result())

    async def _wind_down(self, task: asyncio.Future[JsonValue]) -> None:
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(task), timeout=self.options.cancel_grace)
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    # --- failures ---------------------------------------------------------------------

    async def _action_failed(
        self, claimed: ClaimedRun, step: Step, error: BaseException
    ) -> Outcome:
        message = f"step {step.id!r} ({step.action_id}): {_describe(error)}"
        if transient_failure(error):
            return await self._release(claimed, message)
        if isinstance(error, TargetAnswered) and step.retries(error.condition):
            # The plan opted this step in to retrying such answers (`retry.on`).
            return await self._release(claimed, message, delay=error.retry_after)
        return await self._fail(claimed, message)

    async def _service_failed(self, claimed: ClaimedRun, error: Exception) -> Outcome:
        """The service refused or could not be reached while advancing the run."""
        if isinstance(error, LeaseLost):
            log.warning("run %s: %s; not advancing", claimed.run_id, error.message)
            return Outcome.LOST
        if service_transient(error):
            return await self._release(claimed, f"the service failed: {_describe(error)}")
        if isinstance(error, InvalidDpop):
            log.error("run %s: the service refused this machine: %s", claimed.run_id, error)
            return Outcome.ABANDONED
        return await self._fail(claimed, f"the service refused a step: {_describe(error)}")

    async def _release(
        self,
        claimed: ClaimedRun,
        message: str,
        *,
        retry: bool = True,
        delay: float | None = None,
    ) -> Outcome:
        """Return the run to the queue: at once (`retry=False`: the machine is stopping),
        after `delay` seconds (a target's Retry-After) or after the backoff."""
        if retry and claimed.attempts >= self.options.max_attempts:
            return await self._fail(
                claimed, f"gave up after {claimed.attempts} attempt(s): {message}"
            )
        retry_at = self.options.now()
        if retry:
            retry_at += timedelta(seconds=self._delay(claimed.attempts, delay))
        try:
            await self.api.release_run(claimed.run_id, claimed.token, message, retry_at)
        except LeaseLost:
            return Outcome.LOST
        except Exception as exc:
            log.warning("run %s: cannot release (%s); its lease will expire", claimed.run_id, exc)
            return Outcome.ABANDONED
        log.info("run %s released until %s: %s", claimed.run_id, retry_at.isoformat(), message)
        return Outcome.RELEASED

    def _delay(self, attempt: int, asked: float | None = None) -> float:
        delay = self.options.retry_delay(attempt) if asked is None else asked
        if not isinstance(delay, int | float) or not math.isfinite(delay):
            return self.options.max_retry_delay
        return min(max(0.0, float(delay)), self.options.max_retry_delay)

    async def _fail(self, claimed: ClaimedRun, message: str) -> Outcome:
        try:
            await self.api.fail_run(claimed.run_id, claimed.token, message)
        except LeaseLost:
            return Outcome.LOST
        except Exception as exc:
            log.warning("run %s: cannot fail it (%s); its lease will expire", claimed.run_id, exc)
            return Outcome.ABANDONED
        log.info("run %s failed: %s", claimed.run_id, message)
        return Outcome.FAILED


def _ended(current: Span, outcome: Outcome) -> None:
    """A run's or step's span records how it ended; anything but completed is an error."""
    current.set_attribute("charter.outcome", outcome.value)
    if outcome is not Outcome.COMPLETED:
        current.set_status(StatusCode.ERROR, outcome.value)


class StepTimedOut(Exception):
    """An action ran past the plan's step time limit (deterministic: the run fails)."""


def plan_from_snapshot(snapshot: JsonValue) -> tuple[Plan, Policy]:
    """The plan and policy of a run's snapshot: `{"version", "steps"}` as admission stored
    it, next to the automation's `allowlist` and `limits`."""
    if not isinstance(snapshot, dict):
        raise InvalidPlan("the plan snapshot is not an object", problems=["/: not an object"])
    unknown = sorted(set(snapshot) - _SNAPSHOT_KEYS)
    if unknown:
        raise InvalidPlan(f"the plan snapshot has unknown keys {unknown}", problems=unknown)
    plan = parse_plan({k: v for k, v in snapshot.items() if k in ("version", "steps")})
    return plan, parse_policy(snapshot.get("allowlist"), snapshot.get("limits"))


def _describe(error: BaseException) -> str:
    if isinstance(error, CharterError):
        return f"{error.code}: {error.message}"
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
