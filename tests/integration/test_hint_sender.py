"""The hint sender: hints leave from its thread, in order, and none is lost on close."""

from __future__ import annotations

import psycopg
import pytest

from charter.db.database import Database
from charter.db.hint_sender import HintSender
from charter.db.hints import hint

CHANNEL = "charter_test_hint_sender"


def _received(listener: psycopg.Connection[tuple[object, ...]], count: int) -> list[str]:
    payloads: list[str] = []
    for note in listener.notifies(timeout=10, stop_after=count):
        payloads.append(note.payload)
    return payloads


def test_hints_arrive_in_the_order_posted(database_url: str, database: Database) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        sender = HintSender(database)
        try:
            for n in range(50):
                sender.post([hint(CHANNEL, {"n": n})])
            payloads = _received(listener, 50)
        finally:
            sender.close()
    assert payloads == [f'{{"n":{n}}}' for n in range(50)]
    assert sender.sent == 50


def test_close_sends_what_is_queued_and_later_posts_go_inline(
    database_url: str, database: Database
) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        sender = HintSender(database)
        sender.post([hint(CHANNEL, {"n": 1}), hint(CHANNEL, {"n": 2})])
        sender.close()
        assert sender.sent == 2  # close() waited for the thread to send them
        sender.post([hint(CHANNEL, {"n": 3})])  # after close: sent before post returns
        assert sender.sent == 3
        assert _received(listener, 3) == ['{"n":1}', '{"n":2}', '{"n":3}']


def test_a_sender_with_nothing_to_send_starts_no_thread(database: Database) -> None:
    sender = HintSender(database)
    sender.post([])
    assert sender._thread is None
    sender.close()


def test_a_database_refusal_is_logged_and_the_thread_goes_on(
    database_url: str, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        sender = HintSender(database)
        # A payload over NOTIFY's 8000-byte limit: pg_notify refuses it.
        sender.post([hint(CHANNEL, {"big": "x" * 9000})])
        sender.post([hint(CHANNEL, {"n": 2})])
        payloads = _received(listener, 1)
        sender.close()
    assert payloads == ['{"n":2}']
    assert "could not send" in caplog.text
