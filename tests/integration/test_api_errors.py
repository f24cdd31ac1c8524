"""Every error code of docs/architecture.md provoked over HTTP: status, code, one system_log row
with that code, and no other change to processes, events or work rows."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest

from charter.api.limits import MAX_BODY_BYTES
from charter.core.disclosures import make_disclosure
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Submission, sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, Role
from charter.engine.work import fired_input
from charter.firing.bookkeeping import Bookkeeping
from tests.integration.apikit import OTHER, Harness, dumps, make_harness, new_id

Request = Callable[[], httpx.Response]


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


def _create_text(h: Harness, input_text: str) -> bytes:
    """A well-formed create submission whose `input` is replaced by raw JSON text."""
    clerk = h.keys["clerk"]
    text = dumps(sign(h.envelope(clerk, new_id(), "create", {"amount": 1}), clerk).to_json())
    assert b'"input":{"amount":1}' in text
    return text.replace(b'"input":{"amount":1}', b'"input":' + input_text.encode())


def _valid_text(h: Harness) -> bytes:
    clerk = h.keys["clerk"]
    return dumps(sign(h.envelope(clerk, new_id(), "create", {"amount": 1}), clerk).to_json())


MALFORMED: dict[str, Callable[[Harness], bytes]] = {
    "bad JSON": lambda h: _valid_text(h)[:-7],
    "empty body": lambda h: b"",
    "duplicate key": lambda h: _valid_text(h)[:-1] + b',"signature":"' + b"0" * 128 + b'"}',
    "NaN": lambda h: _create_text(h, '{"amount":NaN}'),
    "Infinity": lambda h: _create_text(h, '{"amount":Infinity}'),
    "1e400": lambda h: _create_text(h, '{"amount":1e400}'),
    "huge integer": lambda h: _create_text(h, '{"amount":9007199254740993}'),
    "lone surrogate": lambda h: _create_text(h, '{"amount":1,"s":"\\ud800"}'),
    "not UTF-8": lambda h: _create_text(h, '{"amount":1,"s":"\xff"}').replace(b"\xc3\xbf", b"\xff"),
    "extra key": lambda h: _valid_text(h)[:-1] + b',"extra":1}',
    "missing key": lambda h: _valid_text(h).split(b',"signature"')[0] + b"}",
    "extra envelope key": lambda h: _valid_text(h).replace(b'"v":1', b'"v":1,"x":1'),
    "not an object": lambda h: b"[]",
    "bad signature format": lambda h: _valid_text(h).replace(b'"signature":"', b'"signature":"zz'),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_bodies_are_400_malformed_and_logged(h: Harness, case: str) -> None:
    body = MALFORMED[case](h)
    with h.only_logged("malformed"):
        response = h.post(body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "malformed"
    assert response.json()["error"]["message"]


def _bad_signature(h: Harness) -> Request:
    clerk = h.keys["clerk"]
    envelope = h.envelope(clerk, new_id(), "create", {"amount": 1})
    forged = Submission(envelope, clerk.sign(b"some other message"))
    return lambda: h.post(forged)


def _unknown_actor(h: Harness) -> Request:
    stranger = SecretKey.generate()
    return lambda: h.post(sign(h.envelope(stranger, new_id(), "create", {"amount": 1}), stranger))


def _forbidden_role(h: Harness) -> Request:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    return lambda: h.post(sign(h.envelope(clerk, process_id, "approve", prev=head), clerk))


def _reserved_field(h: Harness) -> Request:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    forged = {"meta": {"automation": {"kind": "auto_action", "work_id": "x"}}}
    envelope = h.envelope(clerk, process_id, "note", forged, prev=head)  # type: ignore[arg-type]
    return lambda: h.post(sign(envelope, clerk))


def _unknown_process(h: Harness) -> Request:
    clerk = h.keys["clerk"]
    envelope = h.envelope(clerk, new_id(), "note", prev=secrets.token_hex(32))
    return lambda: h.post(sign(envelope, clerk))


def _unknown_workflow(h: Harness) -> Request:
    clerk = h.keys["clerk"]
    envelope = h.envelope(clerk, new_id(), "create", {"amount": 1}, workflow="tests/nowhere")
    return lambda: h.post(sign(envelope, clerk))


def _unknown_action(h: Harness) -> Request:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    return lambda: h.post(sign(h.envelope(clerk, process_id, "fly", prev=head), clerk))


def _duplicate_process(h: Harness) -> Request:
    process_id, _ = h.open_process()
    clerk = h.keys["clerk"]
    envelope = h.envelope(clerk, process_id, "create", {"amount": 2})
    return lambda: h.post(sign(envelope, clerk))


def _duplicate_event(h: Harness) -> Request:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    note = sign(h.envelope(clerk, process_id, "note", {"n": 1}, prev=head), clerk)
    h.accept(note)
    return lambda: h.post(note)


def _too_large(h: Harness) -> Request:
    return lambda: h.post(b"{" + b" " * MAX_BODY_BYTES + b"}")


def _too_large_streamed(h: Harness) -> Request:
    chunk = b" " * 65536

    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BODY_BYTES // len(chunk)):
            yield chunk
        yield b"x"

    def send() -> httpx.Response:
        response = h.post(chunks())  # type: ignore[arg-type]
        assert "content-length" not in response.request.headers
        return response

    return send


def _wrong_state(h: Harness) -> Request:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    return lambda: h.post(sign(h.envelope(clerk, process_id, "close", prev=head), clerk))


def _condition_failed(h: Harness) -> Request:
    process_id, head = h.open_process(amount=500)
    boss = h.keys["boss"]
    return lambda: h.post(sign(h.envelope(boss, process_id, "approve", prev=head), boss))


def _invalid_input(h: Harness) -> Request:
    clerk = h.keys["clerk"]
    envelope = h.envelope(clerk, new_id(), "create", {"amount": "lots"})
    return lambda: h.post(sign(envelope, clerk))


def _workflow_mismatch(h: Harness) -> Request:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    envelope = h.envelope(clerk, process_id, "note", prev=head, workflow=OTHER)
    return lambda: h.post(sign(envelope, clerk))


def _clock_skew(h: Harness) -> Request:
    clerk = h.keys["clerk"]
    late = h.clock.now() - timedelta(minutes=6)
    envelope = h.envelope(clerk, new_id(), "create", {"amount": 1}, at=late)
    return lambda: h.post(sign(envelope, clerk))


TIMED = "tests/timed"
TIMED_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "open",
                   "schedule": [{"id": "tick", "action": "tick", "in": "1h", "data": {}}]},
        "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
    },
}  # fmt: skip


def _not_due(h: Harness) -> Request:
    # A worker-role caller claims a timer with `now` an hour early; the engine's own clock
    # refuses the firing.
    if "automation" not in h.keys:
        h.actor("automation", "AUTOMATION")
        h.deploy(TIMED, TIMED_DEFINITION)
    clerk, automation = h.keys["clerk"], h.keys["automation"]
    process_id = new_id()
    created = h.accept(sign(h.envelope(clerk, process_id, "create", workflow=TIMED), clerk))
    with h.database.connection(Role.WORKER) as conn, conn.transaction():
        work_id = conn.execute(
            "SELECT id FROM charter.scheduled_actions WHERE process_id = %s", (process_id,)
        ).fetchone()
        assert work_id is not None
        books = Bookkeeping(conn, "eager", now=h.clock.now() + timedelta(hours=2))
        row = books.claim_scheduled_one(str(work_id[0]), lease_seconds=60)
    assert row is not None
    envelope = h.envelope(
        automation, process_id, "tick", fired_input(row), prev=str(created["hash"]), workflow=TIMED
    )
    return lambda: h.post(sign(envelope, automation))


PERSONAL = "tests/personal-errors"
PERSONAL_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk"],
    "erasure": {"role": "clerk", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "open",
                   "input": {"type": "object",
                             "properties": {"name": {"type": "string", "x-personal": True}}}},
    },
}  # fmt: skip


def _personal_workflow(h: Harness) -> SecretKey:
    h.deploy(PERSONAL, PERSONAL_DEFINITION)
    return h.keys["clerk"]


def _personal_in_clear(h: Harness) -> Request:
    clerk = _personal_workflow(h)
    envelope = h.envelope(clerk, new_id(), "create", {"name": "Ada"}, workflow=PERSONAL)
    return lambda: h.post(sign(envelope, clerk))


def _bad_disclosure(h: Harness) -> Request:
    clerk = _personal_workflow(h)
    disclosed = make_disclosure("/name", "Ada")
    base = h.envelope(clerk, new_id(), "create", workflow=PERSONAL)
    envelope = replace(base, v=2, sd={"/name": "0" * 64})
    return lambda: h.post(sign(envelope, clerk, [disclosed.text]))


CASES: dict[str, tuple[Callable[[Harness], Request], int, str]] = {
    "bad_signature": (_bad_signature, 401, "bad_signature"),
    "unknown_actor": (_unknown_actor, 403, "unknown_actor"),
    "forbidden_role": (_forbidden_role, 403, "forbidden_role"),
    "reserved_field": (_reserved_field, 403, "reserved_field"),
    "unknown_process": (_unknown_process, 404, "unknown_process"),
    "unknown_workflow": (_unknown_workflow, 404, "unknown_workflow"),
    "unknown_action": (_unknown_action, 404, "unknown_action"),
    "duplicate process": (_duplicate_process, 409, "duplicate"),
    "duplicate event": (_duplicate_event, 409, "duplicate"),
    "too_large": (_too_large, 413, "too_large"),
    "too_large streamed": (_too_large_streamed, 413, "too_large"),
    "wrong_state": (_wrong_state, 422, "wrong_state"),
    "condition_failed": (_condition_failed, 422, "condition_failed"),
    "invalid_input": (_invalid_input, 422, "invalid_input"),
    "workflow_mismatch": (_workflow_mismatch, 422, "workflow_mismatch"),
    "clock_skew": (_clock_skew, 422, "clock_skew"),
    "not_due": (_not_due, 422, "not_due"),
    "personal_in_clear": (_personal_in_clear, 422, "personal_in_clear"),
    "bad_disclosure": (_bad_disclosure, 422, "bad_disclosure"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rejection_has_its_status_code_and_log_row_and_changes_nothing(
    h: Harness, case: str
) -> None:
    prepare, status, code = CASES[case]
    send = prepare(h)
    with h.only_logged(code):
        response = send()
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]


def test_stale_prev_is_409_with_the_current_head(h: Harness) -> None:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    stale = sign(h.envelope(clerk, process_id, "note", prev=secrets.token_hex(32)), clerk)
    with h.only_logged("stale_prev"):
        response = h.post(stale)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "stale_prev"
    assert error["head"] == head


def test_the_clock_skew_window_is_the_engines(h: Harness) -> None:
    # Just inside the 300 s default the same event is accepted.
    clerk = h.keys["clerk"]
    at = h.clock.now() - timedelta(seconds=299)
    response = h.post(sign(h.envelope(clerk, new_id(), "create", {"amount": 1}, at=at), clerk))
    assert response.status_code == 201, response.text


def test_every_submission_code_is_covered() -> None:
    from charter.engine.process_event import SUBMISSION_CODES

    covered = {code for _, _, code in CASES.values()} | {"malformed", "stale_prev"}
    assert covered == SUBMISSION_CODES


@pytest.mark.parametrize(
    "query",
    ["state=open&state=done", "limit=1&limit=2", "workflow=a&workflow=b&state=open"],
)
def test_a_repeated_single_valued_query_parameter_is_malformed(h: Harness, query: str) -> None:
    answer = h.http.get("/v1/processes?" + query, headers={"Authorization": f"Bearer {h.admin}"})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "malformed"
    assert "more than once" in answer.json()["error"]["message"]
    once = h.http.get("/v1/processes?state=open", headers={"Authorization": f"Bearer {h.admin}"})
    assert once.status_code == 200
