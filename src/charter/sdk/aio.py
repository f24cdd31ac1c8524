"""`charter.AsyncClient`: a client of the Charter API, one method per endpoint.

    import charter

    async with charter.AsyncClient.from_env() as client:  # CHARTER_API_URL, CHARTER_TOKEN
        accepted = await client.submit(key, "order-1", "create", {"amount": 5}, "shop/order")
        done = await client.wait_for("order-1", state="closed", timeout=60)
        async for process in client.iter_processes(state="open"):
            ...

sdk/aio.py, the asyncio client, is written by hand; tools/async_to_sync.py generates
sdk/client.py, the blocking one, from it: the same methods, arguments, results and
errors. Both are thin transports over `charter.sdk.calls` (what each endpoint asks and
answers) and `charter.sdk.protocol` (deadline, retries, errors). Where the two must
differ, `if ASYNC:` holds the asyncio code and its `else:` the blocking code, which
is all the generated file keeps.

Every call has a total deadline (`timeout`, 15 s unless given to the client or the
call), retries and their waits included; errors are `CharterError`s carrying the wire
code, HTTP status, `retryable` and the server's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import datetime
from typing import Self, TypeVar, Unpack

import httpx

from charter import deadline
from charter.core import identifiers
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Submission
from charter.core.errors import (
    BadDisclosure,
    Duplicate,
    PersonalInClear,
    UnknownProcess,
    UnknownWorkflow,
)
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.unset import UNSET, Unset
from charter.sdk import calls
from charter.sdk.calls import WorkFields, WorkFilter
from charter.sdk.errors import ApiTimeout, answer_error, transport_error
from charter.sdk.live import (
    DEFAULT_POLL_SECONDS,
    STREAM_PATH,
    SseDecoder,
    StreamGone,
    Waiting,
    live_headers,
    stream_refused,
)
from charter.sdk.options import Options
from charter.sdk.protocol import DEFAULT_TIMEOUT, Attempts, Call, RetryPolicy, retry_after
from charter.sdk.results import (
    Accepted,
    Actor,
    Automation,
    AutomationDetail,
    Deployed,
    Deployment,
    DeployPlan,
    Event,
    Machine,
    Page,
    Plan,
    Process,
    ProcessAutomation,
    Run,
    RunDetail,
    Schedule,
    StateCount,
    Stats,
    Verification,
    Webhook,
    Workflow,
    WorkItem,
)
from charter.sdk.signing import (
    DEFAULT_STALE_RETRIES,
    EventSigner,
    ReadHead,
    adrive,
    recorded,
    sign_on_head,
    utc_now,
)

T = TypeVar("T")
# The blocking client is the `else:` of every `if ASYNC:` (type-checked in client.py).
ASYNC = True


class AsyncClient:
    """Calls the API at `base_url` (CHARTER_API_URL by default) with a bearer `token`
    (CHARTER_TOKEN by default). `http` lets tests hand in their own httpx.AsyncClient,
    one that calls the app in process; whoever made it closes it."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.options = Options.of(base_url, token, timeout, retry, settings)
        self._owns_http = http is None
        if ASYNC:
            # asyncio cancels a call wherever it is, so a plain client keeps the deadline.
            self._http = http or httpx.AsyncClient(timeout=self.options.timeout)
        else:
            # A blocked socket read cannot be cancelled: the sockets keep the deadline.
            self._http = http or deadline.sync_client(self.options.base_url, self.options.timeout)
        # Each workflow path's personal pointers by action, as its current revision marks
        # them when first read; a refusal that says they changed reads them again.
        self._personal: dict[str, Mapping[str, tuple[str, ...]]] = {}

    @classmethod
    def from_env(cls, settings: Settings | None = None) -> AsyncClient:
        """A client for CHARTER_API_URL with CHARTER_TOKEN."""
        settings = settings or Settings.from_env()
        return cls(settings.api_url, settings.token)

    @property
    def base_url(self) -> str:
        return self.options.base_url

    @property
    def token(self) -> str | None:
        return self.options.token

    @property
    def timeout(self) -> float:
        return self.options.timeout

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- submit: sign on the head, re-sign on stale_prev ------------------------------

    async def submit(
        self,
        key: SecretKey,
        process: str,
        action: str,
        input: JsonObject | None = None,
        workflow: str | None = None,
        *,
        stale_retries: int = DEFAULT_STALE_RETRIES,
        now: Callable[[], datetime] | None = None,
        on_stale: Callable[[int], None] | None = None,
        timeout: float | None = None,
    ) -> Accepted:
        """Sign the event with `key` on the process head and submit it; when another event
        got there first (`stale_prev`), sign again on the new head, at most
        `stale_retries` times (`on_stale(n)` is told before the n-th). `workflow` is needed
        only to create a process; `now` is the clock of the envelope's `at`.

        The input fields the workflow marks personal (`"x-personal": true`) are sent as
        disclosures beside a v2 envelope that commits to them, never in its input; an
        action without any present gets a v1 envelope. The marks are read from the
        workflow once per client, and again once when the server answers that they are
        not the ones it holds (`personal_in_clear`, `bad_disclosure`)."""
        signer = EventSigner(key, process, action, input, workflow, now or utc_now)
        marks = PersonalMarks(self, signer, timeout)

        async def read_head(step: ReadHead) -> str | None:
            if step.retry and on_stale is not None:
                on_stale(step.retry)
            if step.hinted:
                head = step.hint  # the refusal named the head: no need to read it
            else:
                head = signer.head_of(await self._maybe_process(process, timeout))
            await marks.learn()
            return head

        async def send(submission: Submission) -> Accepted:
            try:
                return await self.submit_signed(submission, timeout=timeout)
            except Duplicate:
                # Recorded already: by an earlier send of this very event whose answer
                # was lost (a retry), so it is accepted — say how.
                found = await self.process(process, timeout=timeout)
                return recorded(submission, found, await self.events(process, timeout=timeout))
            except (PersonalInClear, BadDisclosure):
                again = await marks.resign(submission)
                if again is None:
                    raise
            # Outside the handler: a refusal of the new event is not chained to this one.
            return await send(again)

        steps = sign_on_head(signer.sign, stale_retries)
        accepted: Accepted = await adrive(steps, read_head, send)
        return accepted

    async def _personal_fields(
        self, workflow: str, action: str, timeout: float | None, *, fresh: bool = False
    ) -> tuple[str, ...]:
        """The personal pointers of `action` at `workflow`, from the cache unless `fresh`."""
        marks = None if fresh else self._personal.get(workflow)
        if marks is None:
            if not identifiers.WORKFLOW_PATH.fullmatch(workflow):
                return ()  # signing refuses the path, as it did before any lookup
            try:
                found = await self.workflow(workflow, timeout=timeout)
            except UnknownWorkflow:
                return ()  # nothing deployed there: the submit's answer says so
            marks = self._personal[workflow] = found.personal
        return marks.get(action, ())

    async def _maybe_process(self, process_id: str, timeout: float | None) -> Process | None:
        try:
            return await self.process(process_id, timeout=timeout)
        except UnknownProcess:
            return None

    # --- wait_for: the live stream, or polling -----------------------------------------

    async def wait_for(
        self,
        process: str,
        state: str | Iterable[str],
        *,
        timeout: float = 60.0,
        poll_interval: float = DEFAULT_POLL_SECONDS,
        live: bool = True,
    ) -> Process:
        """The process once it is in `state` (or one of several); WaitTimeout when it is
        not within `timeout` seconds. A process that does not exist yet is waited for.
        Uses the live stream unless `live` is False or the server has none (a client
        over an in-process transport, which cannot stream, passes `live=False`)."""
        waiting = Waiting.of(process, state)
        end = time.monotonic() + timeout
        last: Process | None = None
        if live:
            # No live stream here, or it broke: poll for the rest of the time.
            with contextlib.suppress(StreamGone):
                last = await self._watch(waiting, end)
        while not waiting.reached(last):
            left = end - time.monotonic()
            if left <= 0:
                raise waiting.timeout(timeout, last)
            await asyncio.sleep(min(poll_interval, left))
            last = await self._read_while_waiting(process, end, last)
        assert last is not None
        return last

    async def _watch(self, waiting: Waiting, end: float) -> Process | None:
        """Follow the stream until the process is in a wanted state or time is up; the
        last read of it. StreamGone when the stream is not there or breaks."""
        last: Process | None = None
        try:
            async with self._stream(end - time.monotonic()) as response:
                if response.status_code != 200:  # a redirect too: it is not followed
                    await response.aread()
                    raise stream_refused(answer_error(response))
                last = await self._read_while_waiting(waiting.process_id, end, last)
                decoder = SseDecoder()
                lines = response.aiter_lines()
                while not waiting.reached(last):
                    line = await anext(lines, None)
                    if line is None:
                        raise StreamGone("the live stream ended")
                    message = decoder.line(line)
                    if message is not None and waiting.concerns(message):
                        last = await self._read_while_waiting(waiting.process_id, end, last)
                return last
        except (TimeoutError, httpx.TimeoutException):
            return last  # time is up; the caller says so
        except httpx.TransportError as exc:
            raise StreamGone(str(exc)) from exc

    @contextlib.asynccontextmanager
    async def _stream(self, seconds: float) -> AsyncIterator[httpx.Response]:
        """The live stream, open for at most `seconds`, what is read of it included."""
        url = self.options.base_url + STREAM_PATH
        headers = live_headers(self.options.token)
        if ASYNC:
            # Messages may be a keep-alive interval apart: no read timeout of its own;
            # the wait's deadline (a TimeoutError) bounds the whole stream.
            timeout = httpx.Timeout(DEFAULT_TIMEOUT, read=None)
            async with (
                asyncio.timeout(seconds),
                self._http.stream("GET", url, headers=headers, timeout=timeout) as response,
            ):
                yield response
        else:
            # Every socket operation ends by the wait's deadline (an httpx timeout).
            with (
                deadline.within(seconds),
                self._http.stream("GET", url, headers=headers, timeout=seconds) as response,
            ):
                yield response

    async def _read_while_waiting(
        self, process_id: str, end: float, last: Process | None
    ) -> Process | None:
        """The process now, read within what is left of the wait (`last` if that ran out)."""
        left = end - time.monotonic()
        if left <= 0:
            return last
        try:
            return await self._maybe_process(process_id, min(self.options.timeout, left))
        except ApiTimeout:
            if time.monotonic() < end:
                raise
            return last

    # --- paginated listings, as iterators ----------------------------------------------

    def iter_processes(
        self,
        *,
        workflow: str | None = None,
        state: str | None = None,
        parent: str | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        q: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Process]:
        """Every process the filters match, newest first, page after page."""
        filters = {"workflow": workflow, "state": state, "parent": parent, "q": q}
        return self._walk(
            lambda cursor: calls.processes(
                **filters,
                updated_after=updated_after,
                updated_before=updated_before,
                cursor=cursor,
                limit=page_size,
            )
        )

    def iter_scheduled(
        self,
        where: WorkFilter | None = None,
        *,
        page_size: int | None = None,
        **filters: Unpack[WorkFields],
    ) -> AsyncIterator[WorkItem]:
        chosen = WorkFilter.of(where, **filters)
        return self._walk(lambda cursor: calls.scheduled(chosen, cursor=cursor, limit=page_size))

    def iter_queue(
        self,
        where: WorkFilter | None = None,
        *,
        page_size: int | None = None,
        **filters: Unpack[WorkFields],
    ) -> AsyncIterator[WorkItem]:
        chosen = WorkFilter.of(where, **filters)
        return self._walk(lambda cursor: calls.queue(chosen, cursor=cursor, limit=page_size))

    def iter_automations(self, *, page_size: int | None = None) -> AsyncIterator[Automation]:
        return self._walk(lambda cursor: calls.automations(cursor=cursor, limit=page_size))

    def iter_runs(
        self,
        *,
        status: str | None = None,
        automation_id: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Run]:
        return self._walk(
            lambda cursor: calls.runs(
                status=status, automation_id=automation_id, cursor=cursor, limit=page_size
            )
        )

    async def _walk(self, page: Callable[[str | None], Call[Page[T]]]) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            found = await self._run(page(cursor))
            for item in found.items:
                yield item
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    # --- composite calls ---------------------------------------------------------------

    async def rotate_secret(
        self, automation_id: str, trigger_id: str, secret: str | None = None
    ) -> tuple[Webhook, str]:
        """Replace the webhook trigger's secret with `secret` or a fresh one, and return
        the new secret: the API never shows it."""
        chosen = secret if secret is not None else calls.new_secret()
        return await self.update_webhook(automation_id, trigger_id, secret=chosen), chosen

    # --- the endpoints, one call each (charter.sdk.calls) ---------------------------

    async def health(self, *, timeout: float | None = None) -> JsonObject:
        return await self._run(calls.health(), timeout)

    async def metrics(self, *, timeout: float | None = None) -> str:
        return await self._run(calls.metrics(), timeout)

    async def submit_signed(
        self, submission: Submission, *, timeout: float | None = None
    ) -> Accepted:
        """POST a signed event; no token needed, the signature is the authority."""
        return await self._run(calls.submit_signed(submission), timeout)

    async def process(self, process_id: str, *, timeout: float | None = None) -> Process:
        return await self._run(calls.process(process_id), timeout)

    async def events(self, process_id: str, *, timeout: float | None = None) -> list[Event]:
        return await self._run(calls.events(process_id), timeout)

    async def processes(
        self,
        *,
        workflow: str | None = None,
        state: str | None = None,
        parent: str | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        q: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> Page[Process]:
        """A page of processes, newest first (by last update, then id)."""
        return await self._run(
            calls.processes(
                workflow=workflow,
                state=state,
                parent=parent,
                updated_after=updated_after,
                updated_before=updated_before,
                q=q,
                cursor=cursor,
                limit=limit,
            ),
            timeout,
        )

    async def verify(
        self, process_id: str, *, replay: bool = False, timeout: float | None = None
    ) -> Verification:
        return await self._run(calls.verify(process_id, replay=replay), timeout)

    async def export(self, process_id: str, *, timeout: float | None = None) -> JsonObject:
        """The `charter-export/1` bundle, for `charter verify --bundle` offline."""
        return await self._run(calls.export(process_id), timeout)

    async def process_automation(
        self, process_id: str, *, timeout: float | None = None
    ) -> ProcessAutomation:
        return await self._run(calls.process_automation(process_id), timeout)

    async def workflows(self, *, timeout: float | None = None) -> list[Deployment]:
        return await self._run(calls.workflows(), timeout)

    async def workflow(
        self, path: str, *, revision: int | None = None, timeout: float | None = None
    ) -> Workflow:
        """The current definition at `path` (or that of `revision`) and every revision."""
        return await self._run(calls.workflow(path, revision), timeout)

    async def workflow_states(self, path: str, *, timeout: float | None = None) -> list[StateCount]:
        """How many processes at `path` are in each state, by the revision of their last
        event: newest revision first, then by state."""
        return await self._run(calls.workflow_states(path), timeout)

    async def deploy_workflow(
        self,
        path: str,
        definition: JsonValue,
        *,
        allow_stranding: bool = False,
        migration_map: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Deployed:
        """Deploy `definition` at `path`. StrandsProcesses (409) when it would strand
        processes that `migration_map` (old state to new) does not cover, unless
        `allow_stranding`; both are recorded with the revision."""
        call = calls.deploy_workflow(path, definition, allow_stranding, migration_map)
        return await self._run(call, timeout)

    async def plan_workflow(
        self,
        path: str,
        definition: JsonValue,
        *,
        cursor: str | None = None,
        replay: bool = True,
        timeout: float | None = None,
    ) -> DeployPlan:
        """What deploying `definition` at `path` would do; nothing is deployed. The
        lists hold up to 100 entries each: pass `next_cursor` as `cursor` for more.
        `replay=False` leaves out the diverging list (no history is replayed)."""
        return await self._run(calls.plan_workflow(path, definition, cursor, replay), timeout)

    async def actors(self, *, timeout: float | None = None) -> list[Actor]:
        return await self._run(calls.actors(), timeout)

    async def actor(self, actor_id: str, *, timeout: float | None = None) -> Actor:
        return await self._run(calls.actor(actor_id), timeout)

    async def add_actor(
        self, actor_id: str, public_key: str, roles: list[str], *, timeout: float | None = None
    ) -> Actor:
        return await self._run(calls.add_actor(actor_id, public_key, roles), timeout)

    async def rotate_key(
        self, actor_id: str, public_key: str, *, timeout: float | None = None
    ) -> Actor:
        return await self._run(calls.rotate_key(actor_id, public_key), timeout)

    async def set_roles(
        self, actor_id: str, roles: list[str], *, timeout: float | None = None
    ) -> Actor:
        return await self._run(calls.set_roles(actor_id, roles), timeout)

    async def disable_actor(self, actor_id: str, *, timeout: float | None = None) -> Actor:
        return await self._run(calls.disable_actor(actor_id), timeout)

    async def enable_actor(self, actor_id: str, *, timeout: float | None = None) -> Actor:
        return await self._run(calls.enable_actor(actor_id), timeout)

    async def stats(self, *, timeout: float | None = None) -> Stats:
        return await self._run(calls.stats(), timeout)

    async def scheduled(
        self,
        where: WorkFilter | None = None,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        **filters: Unpack[WorkFields],
    ) -> Page[WorkItem]:
        """A page of scheduled actions, soonest due first; `where` and the keyword
        filters (`status`, `due_before`, `workflow`, `process`) narrow it."""
        call = calls.scheduled(where, cursor=cursor, limit=limit, **filters)
        return await self._run(call, timeout)

    async def queue(
        self,
        where: WorkFilter | None = None,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        **filters: Unpack[WorkFields],
    ) -> Page[WorkItem]:
        """A page of automatic-action queue rows; `where` and the keyword filters
        (`status`, `due_before`, `workflow`, `process`) narrow it."""
        call = calls.queue(where, cursor=cursor, limit=limit, **filters)
        return await self._run(call, timeout)

    async def machines(self, *, timeout: float | None = None) -> list[Machine]:
        return await self._run(calls.machines(), timeout)

    async def register_machine(
        self,
        target: str,
        public_jwk: JsonObject,
        *,
        machine_id: str | None = None,
        principal: str | None = None,
        timeout: float | None = None,
    ) -> Machine:
        """Register a machine by its DPoP public key (`automations:write`; a `*` token for
        another `principal`)."""
        call = calls.register_machine(
            target, public_jwk, machine_id=machine_id, principal=principal
        )
        return await self._run(call, timeout)

    async def disable_machine(self, machine_id: str, *, timeout: float | None = None) -> Machine:
        return await self._run(calls.disable_machine(machine_id), timeout)

    async def enable_machine(self, machine_id: str, *, timeout: float | None = None) -> Machine:
        return await self._run(calls.enable_machine(machine_id), timeout)

    async def create_automation(
        self, name: str, target: str, *, enabled: bool = True, timeout: float | None = None
    ) -> Automation:
        return await self._run(calls.create_automation(name, target, enabled=enabled), timeout)

    async def automations(
        self, *, cursor: str | None = None, limit: int | None = None, timeout: float | None = None
    ) -> Page[Automation]:
        """A page of the principal's automations, oldest first."""
        return await self._run(calls.automations(cursor=cursor, limit=limit), timeout)

    async def automation(
        self, automation_id: str, *, timeout: float | None = None
    ) -> AutomationDetail:
        return await self._run(calls.automation(automation_id), timeout)

    async def update_automation(
        self,
        automation_id: str,
        *,
        name: str | None = None,
        target: str | None = None,
        enabled: bool | None = None,
        timeout: float | None = None,
    ) -> Automation:
        """Change the fields given; the others stay."""
        return await self._run(
            calls.update_automation(automation_id, name=name, target=target, enabled=enabled),
            timeout,
        )

    async def delete_automation(self, automation_id: str, *, timeout: float | None = None) -> None:
        return await self._run(calls.delete_automation(automation_id), timeout)

    async def pause_automation(
        self, automation_id: str, *, timeout: float | None = None
    ) -> Automation:
        return await self._run(calls.pause_automation(automation_id), timeout)

    async def resume_automation(
        self, automation_id: str, *, timeout: float | None = None
    ) -> Automation:
        return await self._run(calls.resume_automation(automation_id), timeout)

    async def schedules(
        self, automation_id: str, *, timeout: float | None = None
    ) -> list[Schedule]:
        return await self._run(calls.schedules(automation_id), timeout)

    async def add_schedule(
        self,
        automation_id: str,
        cron: str,
        timezone: str,
        *,
        max_occurrences: int | None = None,
        timeout: float | None = None,
    ) -> Schedule:
        """A schedule trigger; `max_occurrences` None: unbounded."""
        return await self._run(
            calls.add_schedule(automation_id, cron, timezone, max_occurrences=max_occurrences),
            timeout,
        )

    async def update_schedule(
        self,
        automation_id: str,
        trigger_id: str,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        enabled: bool | None = None,
        max_occurrences: int | Unset | None = UNSET,
        timeout: float | None = None,
    ) -> Schedule:
        """Change the fields given. `max_occurrences=None` makes the schedule unbounded;
        leaving it out keeps its budget."""
        return await self._run(
            calls.update_schedule(
                automation_id,
                trigger_id,
                cron=cron,
                timezone=timezone,
                enabled=enabled,
                max_occurrences=max_occurrences,
            ),
            timeout,
        )

    async def remove_schedule(
        self, automation_id: str, trigger_id: str, *, timeout: float | None = None
    ) -> None:
        return await self._run(calls.remove_schedule(automation_id, trigger_id), timeout)

    async def webhooks(self, automation_id: str, *, timeout: float | None = None) -> list[Webhook]:
        return await self._run(calls.webhooks(automation_id), timeout)

    async def add_webhook(
        self,
        automation_id: str,
        source: str,
        *,
        event: str | None = None,
        secret: str | None = None,
        timeout: float | None = None,
    ) -> Webhook:
        """A webhook trigger; the result's `secret` (given or generated) is shown only here."""
        return await self._run(
            calls.add_webhook(automation_id, source, event=event, secret=secret), timeout
        )

    async def update_webhook(
        self,
        automation_id: str,
        trigger_id: str,
        *,
        source: str | None = None,
        event: str | Unset | None = UNSET,
        enabled: bool | None = None,
        secret: str | None = None,
        timeout: float | None = None,
    ) -> Webhook:
        """Change the fields given; `event=None` matches every event of the source."""
        return await self._run(
            calls.update_webhook(
                automation_id,
                trigger_id,
                source=source,
                event=event,
                enabled=enabled,
                secret=secret,
            ),
            timeout,
        )

    async def remove_webhook(
        self, automation_id: str, trigger_id: str, *, timeout: float | None = None
    ) -> None:
        return await self._run(calls.remove_webhook(automation_id, trigger_id), timeout)

    async def set_plan(
        self, automation_id: str, plan: Mapping[str, JsonValue], *, timeout: float | None = None
    ) -> Plan:
        """Set the plan: `{"version": 1, "steps": [...], "allowlist"?, "limits"?}`."""
        return await self._run(calls.set_plan(automation_id, plan), timeout)

    async def plan(self, automation_id: str, *, timeout: float | None = None) -> Plan:
        return await self._run(calls.plan(automation_id), timeout)

    async def clear_plan(self, automation_id: str, *, timeout: float | None = None) -> None:
        return await self._run(calls.clear_plan(automation_id), timeout)

    async def trigger(
        self, automation_id: str, input: JsonValue = None, *, timeout: float | None = None
    ) -> Run:
        """Admit a pending manual run (needs `runs:execute`)."""
        return await self._run(calls.trigger(automation_id, input), timeout)

    async def runs(
        self,
        *,
        status: str | None = None,
        automation_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> Page[Run]:
        """A page of the principal's runs, newest first."""
        return await self._run(
            calls.runs(status=status, automation_id=automation_id, cursor=cursor, limit=limit),
            timeout,
        )

    async def run(self, run_id: str, *, timeout: float | None = None) -> RunDetail:
        return await self._run(calls.run(run_id), timeout)

    async def cancel_run(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Cancel a pending or running run (needs `runs:execute`)."""
        return await self._run(calls.cancel_run(run_id), timeout)

    async def retry_run(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Retry a failed run: the new run (needs `runs:execute`)."""
        return await self._run(calls.retry_run(run_id), timeout)

    # --- one call: the transport ---------------------------------------------------------

    async def _run(self, call: Call[T], timeout: float | None = None) -> T:
        """`call` within its deadline, retried as the policy allows; its result."""
        o = self.options
        attempts = Attempts(call, o.seconds(timeout), o.retry, o.rng)
        url = o.base_url + call.path
        while True:
            left = attempts.left()
            try:
                response = await deadline.arequest(
                    self._http,
                    left,
                    call.method,
                    url,
                    params=call.params or None,
                    content=call.body,
                    headers=call.headers(o.token),
                )
            except httpx.TransportError as exc:
                error, uncertain = transport_error(
                    exc, o.base_url, call.method, call.path, attempts.seconds
                )
                wait = attempts.after(error, uncertain=uncertain, retry_after=None)
            else:
                if response.status_code in call.expect:
                    return call.decode(response.content)
                error = answer_error(response, call.expect)
                wait = attempts.after(
                    error,
                    uncertain=False,
                    retry_after=retry_after(response.headers.get("retry-after")),
                )
            await asyncio.sleep(wait)


class PersonalMarks:
    """The personal-field handling of one submit, apart from `AsyncClient.submit` so that
    any other sign-on-head loop over a client (the `charter.submit` action host's, for
    one) handles personal fields the same way.

    `learn` gives the signer its action's personal pointers (read from the workflow
    once per client) before it first signs; `resign` answers a `personal_in_clear` or
    `bad_disclosure` refusal by reading them once more, since a revision deployed since
    they were read may mark other fields."""

    def __init__(
        self, client: AsyncClient, signer: EventSigner, timeout: float | None = None
    ) -> None:
        self.client = client
        self.signer = signer
        self.timeout = timeout
        self._reread = False

    async def learn(self) -> None:
        """Tell the signer its personal pointers, unless it knows them or does not know
        its workflow yet (reading the process head tells it that)."""
        signer = self.signer
        if signer.personal is None and signer.workflow is not None:
            found = await self.client._personal_fields(signer.workflow, signer.action, self.timeout)
            signer.use_personal(found)

    async def resign(self, refused: Submission) -> Submission | None:
        """After the server refused `refused` for its personal fields: the event signed
        again on the same head (the refused one stored nothing) when a fresh read of the
        marks discloses other fields; None, to raise the refusal, when it does not or
        the one fresh read is spent."""
        signer = self.signer
        if self._reread or signer.workflow is None:
            return None
        self._reread = True
        fresh = await self.client._personal_fields(
            signer.workflow, signer.action, self.timeout, fresh=True
        )
        if not signer.use_personal(fresh):
            return None
        return signer.sign(refused.envelope.prev)
