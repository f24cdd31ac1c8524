"""The SDK without a server: errors rebuilt from their wire codes, which failures are
retried (and which never are), the sign-on-head loop, the SSE decoder, and the two
clients having the same calls."""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, sign
from charter.core.errors import (
    CharterError,
    DatabaseUnavailable,
    InvalidWorkflow,
    Malformed,
    StalePrev,
    TooLarge,
    UnknownProcess,
)
from charter.core.resign import ReadHead, drive, sign_on_head
from charter.sdk import ApiUnavailable, AsyncClient, Client, RetryPolicy, WorkFilter, calls
from charter.sdk.calls import WorkFields
from charter.sdk.errors import error_class
from charter.sdk.live import Message, SseDecoder, Waiting
from charter.sdk.protocol import NO_RETRY, Attempts
from charter.sdk.results import Page

FAST = RetryPolicy(attempts=3, base_seconds=0.001, cap_seconds=0.001)


def _client(
    *answers: httpx.Response,
    seen: list[httpx.Request] | None = None,
    retry: RetryPolicy = NO_RETRY,
) -> Client:
    """A client whose server gives `answers` in turn (the last one from then on)."""
    queue = list(answers)

    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return queue.pop(0) if len(queue) > 1 else queue[0]

    http = httpx.Client(transport=httpx.MockTransport(answer))
    return Client("http://charter.test", "ch_secret", http=http, retry=retry)


def _error(status: int, code: str, message: str = "m", **context: object) -> httpx.Response:
    body = {"error": {"code": code, "message": message, **context}}
    return httpx.Response(status, content=json.dumps(body).encode())


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("malformed", Malformed),
        ("unknown_process", UnknownProcess),
        ("too_large", TooLarge),
        ("invalid_workflow", InvalidWorkflow),
    ],
)
def test_error_codes_map_to_their_classes(code: str, cls: type[CharterError]) -> None:
    assert error_class(code) is cls


def test_stale_prev_comes_back_with_its_code_status_and_head() -> None:
    client = _client(_error(409, "stale_prev", "stale", head="ab" * 32, seq=3))
    with pytest.raises(StalePrev) as caught:
        client.process("p-1")
    error = caught.value
    assert (error.code, error.http_status, error.retryable) == ("stale_prev", 409, False)
    assert error.message == "stale"
    assert error.context == {"head": "ab" * 32, "seq": 3}
    assert isinstance(error.__cause__, httpx.HTTPStatusError)  # the answer, for its headers


def test_invalid_workflow_keeps_its_problems() -> None:
    problems = [{"pointer": "/states", "message": "empty"}]
    client = _client(_error(422, "invalid_workflow", "1 problem(s)", problems=problems))
    with pytest.raises(InvalidWorkflow) as caught:
        client.deploy_workflow("a/b", {})
    assert caught.value.context["problems"] == problems


def test_an_unknown_code_keeps_its_code_and_status() -> None:
    client = _client(_error(418, "teapot", "short and stout"))
    with pytest.raises(CharterError) as caught:
        client.workflows()
    error = caught.value
    assert (error.code, error.http_status, error.retryable) == ("teapot", 418, False)
    assert error.message == "short and stout"
    assert error.context == {"code": "teapot", "status": 418}
    unknown_5xx = _client(_error(507, "full"))
    with pytest.raises(CharterError) as full:
        unknown_5xx.workflows()
    assert full.value.retryable


def test_a_non_json_error_body_is_reported_with_its_status() -> None:
    client = _client(httpx.Response(502, content=b"<html>bad gateway</html>"))
    with pytest.raises(CharterError, match="HTTP 502: <html>bad gateway") as caught:
        client.actors()
    assert caught.value.http_status == 502


def test_requests_carry_the_token_and_quote_path_segments() -> None:
    seen: list[httpx.Request] = []
    process: dict[str, object] = {
        "id": "x",
        "workflow": "w",
        "state": "s",
        "data": {},
        "head": None,
        "seq": 0,
    }
    body: dict[str, object] = {
        **process,
        "parent": None,
        "created_at": None,
        "updated_at": None,
        "children": [],
    }
    client = _client(httpx.Response(200, json=body), seen=seen)
    client.process("a b/c")
    with pytest.raises(CharterError):
        client.workflow("customer/retail")  # the answer is not a workflow
    assert seen[0].headers["authorization"] == "Bearer ch_secret"
    assert seen[0].url.raw_path == b"/v1/processes/a%20b%2Fc"
    assert seen[1].url.raw_path == b"/v1/workflows/customer/retail"


def test_an_unreachable_api_is_api_unavailable() -> None:
    with Client("http://127.0.0.1:1", timeout=2) as client, pytest.raises(ApiUnavailable):
        client.health()


# --- retries ----------------------------------------------------------------------------


def test_a_retryable_answer_is_retried_until_it_passes() -> None:
    seen: list[httpx.Request] = []
    down = _error(503, "database_unavailable")
    client = _client(down, down, httpx.Response(200, json={"ok": True}), seen=seen, retry=FAST)
    assert client.health() == {"ok": True}
    assert len(seen) == 3


def test_retries_are_bounded_by_the_policy() -> None:
    seen: list[httpx.Request] = []
    client = _client(_error(503, "database_unavailable"), seen=seen, retry=FAST)
    with pytest.raises(DatabaseUnavailable):
        client.health()
    assert len(seen) == FAST.attempts


def test_a_refusal_is_never_retried() -> None:
    seen: list[httpx.Request] = []
    client = _client(_error(422, "wrong_state"), seen=seen, retry=FAST)
    with pytest.raises(CharterError):
        client.health()
    assert len(seen) == 1


def test_a_lost_answer_to_a_post_is_not_retried_but_one_to_a_get_is() -> None:
    seen: list[httpx.Request] = []

    def lose(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise httpx.ReadError("connection reset", request=request)

    http = httpx.Client(transport=httpx.MockTransport(lose))
    client = Client("http://charter.test", "t", http=http, retry=FAST)
    with pytest.raises(ApiUnavailable):
        client.pause_automation("a-1")  # may have been applied: not repeated
    assert len(seen) == 1
    with pytest.raises(ApiUnavailable):
        client.stats()
    assert len(seen) == 1 + FAST.attempts


def test_a_retry_waits_no_sooner_than_retry_after_and_never_past_the_deadline() -> None:
    policy = RetryPolicy(attempts=5, base_seconds=0.1, cap_seconds=1.0)
    now = [0.0]
    call = calls.health()
    attempts = Attempts(call, 10.0, policy, random.Random(7), clock=lambda: now[0])
    attempts.left()
    error = DatabaseUnavailable()
    assert attempts.after(error, uncertain=False, retry_after=3.0) == 3.0
    now[0] = 9.0
    attempts.left()
    with pytest.raises(DatabaseUnavailable):
        attempts.after(error, uncertain=False, retry_after=3.0)  # 12 s is past the deadline


def test_jitter_stays_within_the_capped_exponential_bound() -> None:
    policy = RetryPolicy(attempts=10, base_seconds=0.5, cap_seconds=2.0)
    rng = random.Random(1)
    for retry in range(8):
        bound = min(2.0, 0.5 * 2**retry)
        delays = [policy.delay(retry, rng) for _ in range(50)]
        assert all(0 <= d <= bound for d in delays)
        assert len(set(delays)) > 1  # jittered, not a fixed step


# --- the sign-on-head loop --------------------------------------------------------------

KEY = SecretKey.generate()


def _head(n: int) -> str:
    return f"{n:064x}"


def _signer(signed_on: list[str | None]) -> Callable[[str | None], Submission]:
    def signed(head: str | None) -> Submission:
        signed_on.append(head)
        envelope = Envelope(
            1, "p-1", "w", "a", {}, head, KEY.public_key_hex, "2026-01-01T00:00:00Z"
        )
        return sign(envelope, KEY)

    return signed


def test_the_loop_signs_on_the_head_and_resigns_on_the_head_a_refusal_names() -> None:
    signed_on: list[str | None] = []
    reads: list[ReadHead] = []
    refusals = [StalePrev(head=_head(2)), StalePrev(head=_head(3))]

    def send(_submission: Submission) -> str:
        if refusals:
            raise refusals.pop(0)
        return "accepted"

    def read_head(step: ReadHead) -> str | None:
        reads.append(step)
        return step.hint if step.hinted else _head(1)

    steps = sign_on_head(_signer(signed_on), stale_retries=5)
    assert drive(steps, read_head, send) == "accepted"
    assert signed_on == [_head(1), _head(2), _head(3)]
    assert [(r.hinted, r.retry) for r in reads] == [(False, 0), (True, 1), (True, 2)]


def test_the_loop_gives_up_after_its_retries_with_the_last_refusal() -> None:
    signed_on: list[str | None] = []

    def send(_submission: Submission) -> str:
        raise StalePrev(head=_head(len(signed_on)))

    steps = sign_on_head(_signer(signed_on), stale_retries=2)
    with pytest.raises(StalePrev) as caught:
        drive(steps, lambda step: step.hint, send)
    assert len(signed_on) == 3
    assert caught.value.context["head"] == _head(3)


def test_other_refusals_pass_through_the_loop_at_once() -> None:
    signed_on: list[str | None] = []

    def send(_submission: Submission) -> str:
        raise UnknownProcess()

    steps = sign_on_head(_signer(signed_on), stale_retries=5)
    with pytest.raises(UnknownProcess):
        drive(steps, lambda step: None, send)
    assert signed_on == [None]


# --- waiting ----------------------------------------------------------------------------


def test_the_sse_decoder_reads_messages_and_skips_comments() -> None:
    decoder = SseDecoder()
    lines = [": connected", "", "id: e-1", "event: event", 'data: {"process":"p"}', ""]
    messages = [m for m in map(decoder.line, lines) if m is not None]
    assert messages == [Message("event", '{"process":"p"}', "e-1")]


def test_a_wait_is_concerned_with_its_process_and_with_resets() -> None:
    waiting = Waiting.of("p-1", "done")
    assert waiting.concerns(Message("event", '{"process":"p-1","seq":2}'))
    assert not waiting.concerns(Message("event", '{"process":"p-2","seq":2}'))
    assert not waiting.concerns(Message("work", '{"process":"p-1"}'))
    assert waiting.concerns(Message("reset", "{}"))


# --- one implementation, two transports ------------------------------------------------


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_the_async_client_has_every_call_of_the_sync_one_with_the_same_parameters() -> None:
    sync, asynchronous = _public(Client), _public(AsyncClient)
    assert set(sync) - {"close"} == set(asynchronous) - {"aclose"}
    for name, signature in sync.items():
        if name != "close":
            assert list(signature.parameters) == list(asynchronous[name].parameters), name


def test_every_endpoint_is_a_call_of_both_clients() -> None:
    endpoints = {
        name
        for name, member in inspect.getmembers(calls, inspect.isfunction)
        if member.__module__ == calls.__name__ and not name.startswith("_")
    } - {"new_secret"}
    assert endpoints <= set(_public(Client))
    assert endpoints <= set(_public(AsyncClient))


def test_the_sdk_loads_nothing_of_the_automations_service() -> None:
    # A fresh interpreter: this one has loaded the whole package by now. The wire objects
    # are the SDK's results, so they must not bring pydantic (the API's) along.
    heavy = ("charter.automations", "charter.api", "psycopg", "pydantic")
    program = (
        f"import sys, charter.sdk; print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_every_code_the_server_answers_comes_back_as_its_class_in_a_bare_sdk() -> None:
    """A process that imports the SDK alone (no server module) still rebuilds every
    catalogued code as the server's class: the table is explicit, not what is imported."""
    program = (
        "import sys, charter.sdk.errors as e; "
        "from charter.core.errors.catalogue import WIRE_ERRORS; "
        "wrong = [c.code for c in WIRE_ERRORS if e.error_class(c.code) is not c]; "
        "names = [e.error_class(c).__name__ for c in ('run_finished', 'lease_lost')]; "
        "print(wrong, *names, "
        "sorted(m for m in sys.modules if m.startswith(('charter.automations', 'charter.tlog'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[] RunFinished LeaseLost []"


def _argument(annotation: str) -> object:
    if annotation == "Submission":
        key = SecretKey.generate()
        at = "2026-01-01T00:00:00Z"
        envelope = Envelope(1, "p-1", "w/x", "create", {}, None, key.public_key_hex, at)
        return sign(envelope, key)
    return {"str": "x1", "list[str]": []}.get(annotation, {})


def test_every_call_expects_exactly_the_success_statuses_of_its_operation() -> None:
    from starlette.routing import compile_path

    from charter.api.app import create_app
    from charter.core.config import Settings
    from charter.db.database import Database

    app = create_app(Database("postgresql://unused.invalid/charter"), settings=Settings())
    operations = [
        (compile_path(template)[0], method.upper(), operation)
        for template, methods in app.openapi()["paths"].items()
        for method, operation in methods.items()
    ]
    checked = 0
    for name, member in inspect.getmembers(calls, inspect.isfunction):
        if member.__module__ != calls.__name__ or name.startswith("_") or name == "new_secret":
            continue
        required = [
            _argument(p.annotation)
            for p in inspect.signature(member).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
        ]
        call = member(*required)
        found = [
            op
            for pattern, method, op in operations
            if method == call.method and pattern.match(call.path)
        ]
        assert len(found) == 1, (name, call.method, call.path)
        documented = {int(s) for s in found[0]["responses"] if s.startswith(("2", "3"))}
        assert call.expect == documented, name
        checked += 1
    assert checked >= 45


# --- lists -----------------------------------------------------------------------------

PROCESS: dict[str, object] = {
    "id": "p-1",
    "workflow": "shop/order",
    "state": "open",
    "data": {},
    "head": None,
    "seq": 1,
    "parent": None,
    "created_at": None,
    "updated_at": None,
}
LISTS: dict[str, Callable[[Client], object]] = {
    "processes": lambda c: c.processes(),
    "scheduled": lambda c: c.scheduled(),
    "queue": lambda c: c.queue(),
    "events": lambda c: c.events("p-1"),
    "workflows": lambda c: c.workflows(),
    "workflow_states": lambda c: c.workflow_states("shop/order"),
    "actors": lambda c: c.actors(),
    "machines": lambda c: c.machines(),
    "automations": lambda c: c.automations(),
    "schedules": lambda c: c.schedules("a-1"),
    "webhooks": lambda c: c.webhooks("a-1"),
    "runs": lambda c: c.runs(),
}


def _envelope(*items: object, next_cursor: str | None = None) -> httpx.Response:
    """A list answer in the one envelope, without the keys lists had before it."""
    body = {"items": list(items), "next_cursor": next_cursor}
    return httpx.Response(200, content=json.dumps(body).encode())


@pytest.mark.parametrize("listing", LISTS.values(), ids=LISTS.keys())
def test_every_list_is_read_from_its_items(listing: Callable[[Client], object]) -> None:
    found = listing(_client(_envelope()))
    items = found.items if isinstance(found, Page) else found
    assert list(items) == []  # type: ignore[call-overload]


def test_a_listing_walks_its_pages_by_next_cursor() -> None:
    seen: list[httpx.Request] = []
    second = {**PROCESS, "id": "p-2"}
    client = _client(_envelope(PROCESS, next_cursor="c2"), _envelope(second), seen=seen)
    assert [p.id for p in client.iter_processes(page_size=1)] == ["p-1", "p-2"]
    assert seen[1].url.params["cursor"] == "c2"


# --- the work views' one filter ---------------------------------------------------------


def test_work_fields_are_the_work_filters_fields() -> None:
    fields = [f.name for f in dataclasses.fields(WorkFilter)]
    assert list(WorkFields.__annotations__) == fields


DUE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize("view", ["scheduled", "queue"])
def test_a_work_view_takes_a_work_filter_or_the_same_keywords(view: str) -> None:
    seen: list[httpx.Request] = []
    client = _client(_envelope(), seen=seen)
    listing: Callable[..., Page[object]] = getattr(client, view)
    where = WorkFilter(status="failed", due_before=DUE, workflow="shop/*", process="p-1")
    listing(where, limit=5)
    listing(status="failed", due_before=DUE, workflow="shop/*", process="p-1", limit=5)
    listing(WorkFilter(status="active", workflow="shop/*"), status="failed", process=None)
    listing()
    path = f"/v1/automation/{view}"
    wanted = {
        "status": "failed",
        "due_before": "2026-01-02T03:04:05.000Z",
        "workflow": "shop/*",
        "process": "p-1",
        "limit": "5",
    }
    assert [r.url.path for r in seen] == [path] * 4
    assert [dict(r.url.params) for r in seen] == [
        wanted,
        wanted,
        {"status": "failed", "workflow": "shop/*"},  # a keyword overrides the filter
        {},
    ]


def test_the_work_iterators_take_a_work_filter_and_walk_the_pages() -> None:
    seen: list[httpx.Request] = []
    row = {
        **dict.fromkeys(("id", "kind", "what", "process", "workflow", "status"), "x"),
        "attempts": 0,
        # The server sends every key, null or not; a reader refuses a row missing one.
        **dict.fromkeys(("due", "last_error", "last_attempt_at", "last_result")),
    }
    client = _client(_envelope(row, next_cursor="c2"), _envelope(), seen=seen)
    found = list(client.iter_queue(WorkFilter(process="p-1"), status="pending", page_size=1))
    assert len(found) == 1
    assert [dict(r.url.params) for r in seen] == [
        {"status": "pending", "process": "p-1", "limit": "1"},
        {"status": "pending", "process": "p-1", "cursor": "c2", "limit": "1"},
    ]


def test_a_work_filter_refuses_a_field_it_does_not_have() -> None:
    client = _client(_envelope())
    with pytest.raises(TypeError):
        client.scheduled(state="open")  # type: ignore[call-arg]
