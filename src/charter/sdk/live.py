"""Waiting for a process, without I/O: the live stream's messages and what they mean.

`wait_for` subscribes to `GET /v1/stream` (Server-Sent Events of small hints), reads the
process once subscribed (so nothing slips between the read and the subscription), and
reads it again whenever a hint names it or says hints were lost (`reset`). A server
without the stream — or one whose stream cannot listen right now, or a stream that
breaks — is polled instead, for what is left of the time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from charter.core import ijson
from charter.core.errors import CharterError
from charter.sdk.errors import WaitTimeout
from charter.sdk.results import Process

STREAM_PATH = "/v1/stream"
DEFAULT_POLL_SECONDS = 1.0
# Answers to the stream request that mean "no live stream here": poll instead.
NO_STREAM_STATUSES = frozenset({404, 405, 501, 503})


@dataclass(frozen=True)
class Message:
    event: str
    data: str
    id: str | None = None


@dataclass
class SseDecoder:
    """Server-Sent Events, one line at a time (the text/event-stream format)."""

    _event: str = "message"
    _data: list[str] = field(default_factory=list)
    _id: str | None = None

    def line(self, line: str) -> Message | None:
        """Feed one line (without its end); the message a blank line completes."""
        if not line:
            if not self._data:
                self._event = "message"
                return None
            message = Message(self._event, "\n".join(self._data), self._id)
            self._event, self._data = "message", []
            return message
        if line.startswith(":"):
            return None  # a comment: the keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None


@dataclass(frozen=True)
class Waiting:
    """One wait: for `process_id` to be in one of `states`."""

    process_id: str
    states: frozenset[str]

    @classmethod
    def of(cls, process_id: str, state: str | Iterable[str]) -> Waiting:
        states = frozenset([state] if isinstance(state, str) else state)
        if not states:
            raise ValueError("wait for at least one state")
        return cls(process_id, states)

    def reached(self, found: Process | None) -> bool:
        return found is not None and found.state in self.states

    def concerns(self, message: Message) -> bool:
        """Whether the hint may mean the process changed (read it again)."""
        if message.event == "reset":
            return True
        if message.event != "event":
            return False
        try:
            data = ijson.loads(message.data)
        except CharterError:
            return False
        return isinstance(data, dict) and data.get("process") == self.process_id

    def timeout(self, seconds: float, last: Process | None) -> WaitTimeout:
        wanted = " or ".join(sorted(self.states))
        now = "does not exist" if last is None else f"is {last.state!r}"
        return WaitTimeout(
            f"process {self.process_id!r} was not {wanted} within {seconds:g} s; it {now}",
            process=self.process_id,
            states=sorted(self.states),
            state=None if last is None else last.state,
        )


class StreamGone(Exception):
    """The live stream is not there, or broke: poll instead."""


def stream_refused(error: CharterError) -> Exception:
    """What an error answer to the stream request means: StreamGone (poll instead) for
    a server without a stream or whose stream cannot listen now; the error otherwise
    (a token that may not read processes could not poll either)."""
    if error.http_status in NO_STREAM_STATUSES:
        gone = StreamGone(error.message)
        gone.__cause__ = error
        return gone
    return error


def live_headers(token: str | None) -> dict[str, str]:
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers
