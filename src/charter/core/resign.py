"""Sign on the process head, and re-sign on `stale_prev`: the one loop that does it.

An event names the head it extends (`prev`). If another event got there first the
engine refuses with `stale_prev` (its context carries the head it holds), and the event
must be signed again on the new head. Every submitter runs this same loop — the SDK's
`Client.submit` and `AsyncClient.submit` (HTTP, sync and async), the `charter submit`
command and the `charter.submit` action host (through the SDK), and the automation
worker (straight into the engine inside its transaction).

The loop does no I/O itself: `sign_on_head` is a generator that yields what it needs —
`ReadHead` (answer with the head to sign on) or `Send` (answer with the result of
submitting, or raise the refusal into it) — and `drive`/`adrive` run it with a head
reader and a sender, blocking or async. So the worker's reader can be a dict lookup and
its sender an engine call, with no HTTP and no extra round trip on its batched path.
It lives in `core` so the worker does not load the HTTP client to use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from charter.core.envelope import Submission
from charter.core.errors import StalePrev

T = TypeVar("T")

DEFAULT_STALE_RETRIES = 5


@dataclass(frozen=True)
class ReadHead:
    """The loop needs the head to sign on. `hint` is the head a `stale_prev` refusal
    named (`hinted` False: none, as on the first attempt); a reader may trust it or read
    again."""

    hint: str | None = None
    hinted: bool = False
    # 0 for the first read; n for the read before the n-th re-sign.
    retry: int = 0

    @classmethod
    def after(cls, refusal: StalePrev, retry: int) -> ReadHead:
        head = refusal.context.get("head")
        if "head" in refusal.context and (head is None or isinstance(head, str)):
            return cls(head, hinted=True, retry=retry)
        return cls(retry=retry)


@dataclass(frozen=True)
class Send:
    """The loop signed an event: submit it."""

    submission: Submission


Steps = Generator[ReadHead | Send, Any, T]


def sign_on_head(signer: Callable[[str | None], Submission], stale_retries: int) -> Steps[Any]:
    """Sign with `signer(head)` and send; on `stale_prev` read the head and sign again, at
    most `stale_retries` times (then the last refusal is raised). Returns what the
    sender returned."""
    if stale_retries < 0:
        raise ValueError("stale_retries must not be negative")
    head = yield ReadHead()
    for attempt in range(stale_retries + 1):
        try:
            return (yield Send(signer(head)))
        except StalePrev as refusal:
            if attempt == stale_retries:
                raise
            head = yield ReadHead.after(refusal, attempt + 1)
    raise AssertionError("unreachable")  # pragma: no cover


def drive(
    steps: Steps[Any],
    read_head: Callable[[ReadHead], str | None],
    send: Callable[[Submission], T],
) -> T:
    """Run the loop with a blocking head reader and sender; the sender's result."""
    step = next(steps)
    while True:
        try:
            if isinstance(step, ReadHead):
                step = steps.send(read_head(step))
                continue
            result = send(step.submission)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except StalePrev as refusal:
            step = steps.throw(refusal)
            continue
        try:
            steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        raise AssertionError("the loop went on after a result")  # pragma: no cover


async def adrive(
    steps: Steps[Any],
    read_head: Callable[[ReadHead], Awaitable[str | None]],
    send: Callable[[Submission], Awaitable[T]],
) -> T:
    """Run the loop with an async head reader and sender; the sender's result."""
    step = next(steps)
    while True:
        try:
            if isinstance(step, ReadHead):
                step = steps.send(await read_head(step))
                continue
            result = await send(step.submission)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except StalePrev as refusal:
            step = steps.throw(refusal)
            continue
        try:
            steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        raise AssertionError("the loop went on after a result")  # pragma: no cover
