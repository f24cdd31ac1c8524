"""What `Client.submit` signs, for the one sign-on-head loop (`charter.core.resign`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from charter.core.disclosures import Disclosure, digests, split_personal
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
    a new process needs one named.

    Until `use_personal` names the action's personal fields, none are assumed. When some
    of them are in the input, it signs a v2 envelope that commits to them in `sd` and
    sends them as disclosures; otherwise a v1 envelope, as before v2 existed."""

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
        # The personal pointers signed with (None: not learned yet), and the split of the
        # input they give: the input in clear and one disclosure per personal field.
        self.personal: tuple[str, ...] | None = None
        self._clear: JsonObject = self.input
        self._disclosures: tuple[Disclosure, ...] = ()

    def use_personal(self, personal: Iterable[str]) -> bool:
        """Sign with `personal` as the action's personal pointers from now on; whether
        that changes which fields are disclosed (False: the earlier split is kept).

        The input is split once, not at every signing: the re-signs of one submit on a
        new head carry the same disclosures, salts included. That is safe because an
        event refused (`stale_prev`) stores no disclosure, so no salt is ever stored
        twice; only an event signed anew for other personal fields gets fresh salts."""
        chosen = tuple(personal)
        clear, disclosed = split_personal(self.input, chosen)
        first = self.personal is None
        self.personal = chosen
        if not first and _pointers(disclosed) == _pointers(self._disclosures):
            return False
        self._clear, self._disclosures = clear, disclosed
        return True

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
        disclosed = self._disclosures
        envelope = Envelope(
            v=2 if disclosed else 1,
            process=self.process,
            workflow=self.workflow,
            action=self.action,
            input=self._clear if disclosed else self.input,
            prev=head,
            actor=self.key.public_key_hex,
            at=format_rfc3339(self.now()),
            sd=digests(disclosed) if disclosed else None,
        )
        return sign(envelope, self.key, [d.text for d in disclosed])


def _pointers(disclosed: tuple[Disclosure, ...]) -> frozenset[str]:
    return frozenset(d.pointer for d in disclosed)


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
