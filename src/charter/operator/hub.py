"""The live stream's hub: ONE LISTEN connection per API process, fanned out to every
`GET /v1/stream` subscriber through its own bounded queue.

Each hint gets an id from a per-process counter and is kept in a ring buffer, so a client
that reconnects with `Last-Event-ID` gets what it missed, or a `reset` when that is no
longer in the buffer (or the id is from another process's life). A subscriber whose
queue is full is dropped rather than allowed to hold up the others: its stream ends and
its reconnect replays from the buffer. Hints stay hints (docs/automation.md): the tables are
the truth, and a `reset` tells a client to read them again.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from charter.core.jsontypes import JsonObject
from charter.db.listening import ListenLoop

# channel → the kind of hint a client sees
CHANNELS = {
    "charter_events": "event",
    "scheduled_actions_changed": "work",
    "automation_queue_changed": "work",
    "charter_work_failed": "work",
    "charter_runs": "run",
}
# What of each payload a client sees (ids and names; never data).
_EVENT_KEYS = ("process", "seq", "hash", "action", "actor_id")
_WORK_KEYS = ("kind", "id", "process_id", "workflow_path", "action_name", "run_at", "op", "status")
_RUN_KEYS = ("id", "automation_id", "status")


@dataclass(frozen=True)
class Hint:
    id: int
    kind: str  # event | work | run | reset
    data: JsonObject
    principal: str | None = None  # a run's owner: only they (and `*`) see it

    def to_sse(self, epoch: str) -> str:
        payload = json.dumps(self.data, separators=(",", ":"), sort_keys=True)
        return f"id: {epoch}-{self.id}\nevent: {self.kind}\ndata: {payload}\n\n"


class Subscriber:
    """One stream's queue and what it may see."""

    def __init__(self, size: int, visible: Callable[[Hint], bool]) -> None:
        self.queue: asyncio.Queue[Hint] = asyncio.Queue(maxsize=size)
        self.visible = visible
        self.dropped = False


class HintHub:
    def __init__(
        self, url: str, *, buffer: int = 4096, queue_size: int = 1024, max_backoff: float = 30.0
    ) -> None:
        self.url = url
        self.queue_size = queue_size
        self.max_backoff = max_backoff
        self.keepalive_seconds = 15.0
        # Message ids are `<epoch>-<n>`: a Last-Event-ID from another API process (or
        # from before a restart) names another epoch and gets a reset, not wrong hints.
        self.epoch = secrets.token_hex(4)
        self.last_id = 0
        self.dropped = 0
        # Every subscribe ever made: unlike `subscribers`, it never goes back down when
        # a closed stream is noticed late, so a watcher can tell a new one came.
        self.subscriptions = 0
        self._ring: deque[Hint] = deque(maxlen=buffer)
        self._subscribers: set[Subscriber] = set()
        self._task: asyncio.Task[None] | None = None
        self._listening: asyncio.Event | None = None

    # --- the listener -----------------------------------------------------------------

    async def started(self, timeout: float = 10.0) -> bool:
        """Start the listener in this event loop if it is not running; True once it
        listens (False if it could not within `timeout`)."""
        loop = asyncio.get_running_loop()
        # A task of another (finished) loop — a test client's — cannot be awaited here.
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._listening = asyncio.Event()
            self._task = asyncio.create_task(self._listen(), name="charter-stream-listener")
        assert self._listening is not None
        try:
            await asyncio.wait_for(self._listening.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _listen(self) -> None:
        assert self._listening is not None
        await ListenLoop(
            self.url,
            name="charter-stream",
            listen_query="listen_for_hints",
            on_notify=lambda note: self.publish(note.channel, note.payload),
            on_connected=self._connected,
            first_backoff=0.5,
            max_backoff=self.max_backoff,
            connected=self._listening,
        ).run()

    def _connected(self, connects: int) -> None:
        if connects > 1:  # hints sent while we were away are lost
            self.publish_reset("the stream's database connection was re-established")

    # --- fan-out ----------------------------------------------------------------------

    def publish(self, channel: str, payload: str) -> Hint | None:
        """Number a notification, keep it, and hand it to every subscriber that may see it."""
        kind = CHANNELS.get(channel)
        try:
            raw = json.loads(payload)
        except ValueError:
            raw = None
        if kind is None or not isinstance(raw, dict):
            return None
        keys = _EVENT_KEYS if kind == "event" else _WORK_KEYS if kind == "work" else _RUN_KEYS
        data: JsonObject = {key: raw[key] for key in keys if key in raw}
        principal = raw.get("principal") if kind == "run" else None
        return self._add(kind, data, principal if isinstance(principal, str) else None)

    def publish_reset(self, reason: str) -> Hint:
        return self._add("reset", {"reason": reason}, None)

    def _add(self, kind: str, data: JsonObject, principal: str | None) -> Hint:
        self.last_id += 1
        hint = Hint(self.last_id, kind, data, principal)
        self._ring.append(hint)
        for subscriber in list(self._subscribers):
            if not subscriber.visible(hint):
                continue
            try:
                subscriber.queue.put_nowait(hint)
            except asyncio.QueueFull:
                subscriber.dropped = True  # its stream ends; the reconnect replays
                self._subscribers.discard(subscriber)
                self.dropped += 1
        return hint

    def subscribe(
        self, visible: Callable[[Hint], bool], last_event_id: str | None = None
    ) -> tuple[Subscriber, list[Hint]]:
        """A new subscriber and what it missed since `last_event_id`: the hints after it,
        or one `reset` hint when they are no longer all in the buffer."""
        subscriber = Subscriber(self.queue_size, visible)
        self._subscribers.add(subscriber)
        self.subscriptions += 1
        return subscriber, self._missed(visible, last_event_id)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def _missed(self, visible: Callable[[Hint], bool], last_event_id: str | None) -> list[Hint]:
        if last_event_id is None:
            return []
        epoch, _, number = last_event_id.strip().rpartition("-")
        try:
            last = int(number) if epoch == self.epoch else -1
        except ValueError:
            last = -1
        oldest = self._ring[0].id if self._ring else self.last_id + 1
        if last < 0 or last > self.last_id or last + 1 < oldest:
            reason = "Last-Event-ID is older than this server keeps; read the state again"
            return [Hint(self.last_id, "reset", {"reason": reason})]
        return [hint for hint in self._ring if hint.id > last and visible(hint)]
