"""What `Client.submit` signs, for the one sign-on-head loop (`charter.core.resign`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, sign
from charter.core.errors import Duplicate, Malformed
from charter.core.jsontypes import JsonObject
from charter.core.resign import DEFAULT_STALE_RETRIES as DEFAULT_STALE_RETRIES
from charter.core.resign import ReadHead as ReadHead
from charter.core.resign import Send as Send
from charter.core.resign import adrive as adrive
from charter.core.resign import drive as drive
from charter.core.resign import sign_on_head as sign_on_head
from charter.core.timefmt import format_rfc3339
from charter.sdk.results import Accepted, Event, Process


class EventSigner:
    """What `Client.submit` signs: the event's fields but its `prev`, which the loop
    gives. Without a `workflow` it is the one the process runs (learned from reading it);
    a new process needs one named."""

    def __init__(
        self,
        key: SecretKey,
        process: str,
        action: str,
        input: JsonObject | None,
        workflow: str | None,
        now: Callable[[], datetime],
    ) -> None:
        self.key = key
        self.process = process
        self.action = action
        self.input: JsonObject = dict(input or {})
        self.workflow = workflow
        self.now = now

    def head_of(self, found: Process | None) -> str | None:
        """The head to sign on from a read of the process (None: it does not exist yet)."""
        if found is None:
            return None
        if self.workflow is None:
            self.workflow = found.workflow
        return found.head

    def sign(self, head: str | None) -> Submission:
        if self.workflow is None:
            raise Malformed(
                f"process {self.process!r} does not exist yet: name the workflow to create it"
            )
        envelope = Envelope(
            v=1,
            process=self.process,
            workflow=self.workflow,
            action=self.action,
            input=self.input,
            prev=head,
            actor=self.key.public_key_hex,
            at=format_rfc3339(self.now()),
        )
        return sign(envelope, self.key)


def utc_now() -> datetime:
    return datetime.now(UTC)


def recorded(submission: Submission, process: Process, events: list[Event]) -> Accepted:
    """The acceptance of `submission`, an event the engine holds already (it answered
    `duplicate`); Duplicate again if the process holds no event with its hash."""
    wanted = submission.envelope.hash()
    for event in reversed(events):
        if event.hash == wanted:
            answer: JsonObject = {"hash": event.hash, "seq": event.seq, "process": process.raw}
            return Accepted(hash=event.hash, seq=event.seq, process=process, raw=answer)
    raise Duplicate(f"event {wanted} is already recorded, but not on {process.id!r}")
