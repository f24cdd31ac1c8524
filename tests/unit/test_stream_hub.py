"""The stream hub's fan-out, without a database: numbering, bounded queues (a slow
subscriber is dropped, the others keep theirs), replay after Last-Event-ID, resets."""

from __future__ import annotations

import asyncio
import json

from charter.operator.hub import Hint, HintHub

EVENT = json.dumps({"process": "p-1", "seq": 2, "hash": "ab" * 32, "action": "go", "actor_id": "a"})


def _all(_hint: Hint) -> bool:
    return True


def _hub(**kwargs: int) -> HintHub:
    return HintHub("postgresql://unused", **kwargs)


def test_hints_are_numbered_and_keep_only_ids_and_names() -> None:
    hub = _hub()
    first = hub.publish("charter_events", EVENT)
    second = hub.publish(
        "charter_runs", json.dumps({"id": "r", "status": "running", "principal": "ann", "x": 1})
    )
    assert first is not None
    assert second is not None
    assert (first.id, first.kind) == (1, "event")
    assert first.data == json.loads(EVENT)
    assert (second.id, second.kind, second.principal) == (2, "run", "ann")
    assert second.data == {"id": "r", "status": "running"}
    assert first.to_sse(hub.epoch).startswith(f"id: {hub.epoch}-1\nevent: event\ndata: {{")
    assert first.to_sse(hub.epoch).endswith("\n\n")


def test_unknown_channels_and_bad_payloads_are_ignored() -> None:
    hub = _hub()
    assert hub.publish("elsewhere", EVENT) is None
    assert hub.publish("charter_events", "not json") is None
    assert hub.last_id == 0


def test_every_subscriber_gets_every_hint_it_may_see() -> None:
    hub = _hub()
    everything, _ = hub.subscribe(_all)
    no_runs, _ = hub.subscribe(lambda hint: hint.kind != "run")
    hub.publish("charter_events", EVENT)
    hub.publish("charter_runs", json.dumps({"id": "r", "status": "pending", "principal": "x"}))
    assert everything.queue.qsize() == 2
    assert no_runs.queue.qsize() == 1


def test_a_full_queue_drops_that_subscriber_only() -> None:
    hub = _hub(queue_size=2)
    slow, _ = hub.subscribe(_all)
    fast, _ = hub.subscribe(_all)
    for _ in range(2):
        hub.publish("charter_events", EVENT)
        fast.queue.get_nowait()
    assert hub.subscribers == 2
    hub.publish("charter_events", EVENT)
    assert slow.dropped
    assert not fast.dropped
    assert hub.subscribers == 1
    assert hub.subscriptions == 2  # made ever, a dropped one included
    assert hub.dropped == 1
    hub.publish("charter_events", EVENT)
    assert fast.queue.qsize() == 2


def test_last_event_id_replays_what_was_missed() -> None:
    hub = _hub()
    for _ in range(5):
        hub.publish("charter_events", EVENT)
    _, missed = hub.subscribe(_all, f"{hub.epoch}-3")
    assert [hint.id for hint in missed] == [4, 5]
    _, nothing = hub.subscribe(_all, f"{hub.epoch}-5")
    assert nothing == []
    _, everything = hub.subscribe(_all, f"{hub.epoch}-0")
    assert [hint.id for hint in everything] == [1, 2, 3, 4, 5]


def test_replay_applies_the_subscribers_scopes() -> None:
    hub = _hub()
    hub.publish("charter_runs", json.dumps({"id": "r", "status": "pending", "principal": "x"}))
    hub.publish("charter_events", EVENT)
    _, missed = hub.subscribe(lambda hint: hint.kind != "run", f"{hub.epoch}-0")
    assert [hint.kind for hint in missed] == ["event"]


def test_an_id_older_than_the_buffer_or_from_elsewhere_gets_a_reset() -> None:
    hub = _hub(buffer=2)
    for _ in range(4):
        hub.publish("charter_events", EVENT)
    other = _hub()  # another API process, or this one before a restart
    for last in (f"{hub.epoch}-1", f"{hub.epoch}-9", f"{other.epoch}-3", "3", "abc", ""):
        _, missed = hub.subscribe(_all, last)
        assert [(hint.kind, hint.id) for hint in missed] == [("reset", 4)], last
    _, missed = hub.subscribe(_all, f"{hub.epoch}-2")
    assert [hint.id for hint in missed] == [3, 4]


def test_unsubscribed_streams_get_nothing_more() -> None:
    hub = _hub()
    subscriber, _ = hub.subscribe(_all)
    hub.unsubscribe(subscriber)
    hub.publish("charter_events", EVENT)
    assert subscriber.queue.empty()
    assert hub.subscribers == 0


def test_queues_are_asyncio_queues_a_stream_can_await() -> None:
    async def scenario() -> Hint:
        hub = _hub()
        subscriber, _ = hub.subscribe(_all)
        asyncio.get_running_loop().call_soon(hub.publish, "charter_events", EVENT)
        return await asyncio.wait_for(subscriber.queue.get(), 5)

    assert asyncio.run(scenario()).kind == "event"


def test_the_listener_starts_anew_in_a_new_event_loop() -> None:
    hub = HintHub("postgresql://postgres@127.0.0.1:1/nowhere")  # nothing listens there

    async def attempt() -> bool:
        return await hub.started(timeout=0.01)

    first = asyncio.new_event_loop()  # left open, its listener task still pending in it
    try:
        assert first.run_until_complete(attempt()) is False
        assert asyncio.run(attempt()) is False  # a task of its own, not the other loop's
    finally:
        pending = asyncio.all_tasks(first)
        for task in pending:
            task.cancel()
        first.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        first.close()
