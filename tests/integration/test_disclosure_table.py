"""charter.event_disclosures: digests checked against their text, unique across events,
rows never deleted, changed only once from text to erased through erase_disclosures,
whose eraser must be a charter:erase event of the same process."""

from __future__ import annotations

import hashlib
import json

import pytest

from charter.core.errors import AppendOnlyViolation, Duplicate, IntegrityViolation, PermissionDenied
from tests.integration import rows
from tests.integration.dbcheck import Conn, allowed, refused

INSERT = (
    "INSERT INTO event_disclosures (event_hash, pointer, digest, disclosure)"
    " VALUES (%s, %s, %s, %s)"
)


def disclosure(pointer: str, value: str, salt: str = "2GLC42sKQveCfGfryNRN9w") -> tuple[str, str]:
    text = json.dumps([salt, pointer, value], separators=(",", ":"), ensure_ascii=False)
    return text, hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def seeded(conn: Conn) -> tuple[str, str, str, list[str]]:
    actor, version, process_id, hashes = rows.seed_chain(conn, events=2)
    for pointer, value, salt in (("/name", "Ada Lovelace", "2GLC42sKQveCfGfryNRN9w"),
                                 ("/dob", "1815-12-10", "aaaaaaaaaaaaaaaaaaaaaA")):  # fmt: skip
        text, digest = disclosure(pointer, value, salt)
        conn.execute(INSERT, (hashes[0], pointer, digest, text))
    return actor, version, process_id, hashes


def _erase_targets(event: str, *pointers: str) -> str:
    return json.dumps([{"event": event, "pointer": p} for p in pointers])


def test_the_golden_disclosure_is_stored_under_its_digest(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    row = conn.execute("SELECT digest FROM event_disclosures WHERE pointer = '/name'").fetchone()
    assert row == ("ed7723ea6241cd3184601d640ce821b623a5642c2e885c3da6cff068def57051",)


def test_a_digest_that_is_not_its_texts_is_refused(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    text, _ = disclosure("/other", "x")
    refused(conn, IntegrityViolation, INSERT, (seeded[3][1], "/other", "0" * 64, text))


def test_a_reused_digest_is_refused_even_on_another_event(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    text, digest = disclosure("/name", "Ada Lovelace")
    refused(conn, Duplicate, INSERT, (seeded[3][1], "/name", digest, text))


def test_rows_are_never_deleted_nor_truncated(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    conn.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred check left pending
    refused(conn, AppendOnlyViolation, "DELETE FROM event_disclosures")
    refused(conn, AppendOnlyViolation, "TRUNCATE event_disclosures")


def test_the_text_never_changes_to_other_text_and_the_key_never_changes(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    text, digest = disclosure("/name", "Grace Hopper", "bbbbbbbbbbbbbbbbbbbbbA")
    refused(
        conn,
        AppendOnlyViolation,
        "UPDATE event_disclosures SET disclosure = %s, digest = %s WHERE pointer = '/name'",
        (text, digest),
    )
    refused(conn, AppendOnlyViolation, "UPDATE event_disclosures SET pointer = '/x'")


def test_the_engine_cannot_update_rows_itself(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    erase = rows.append_event(conn, seeded[2], seeded[0], seeded[1], action="charter:erase")
    refused(
        conn,
        PermissionDenied,
        "UPDATE event_disclosures SET disclosure = NULL, erased_by = %s",
        (erase,),
        role="charter_engine",
    )


def test_only_the_engine_may_erase_and_an_erased_row_stays_erased(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    _, _, process_id, hashes = seeded
    erase = rows.append_event(conn, process_id, seeded[0], seeded[1], action="charter:erase")
    call = "SELECT erase_disclosures(%s, %s::jsonb)"
    for role in ("charter_worker", "charter_reader"):
        refused(conn, PermissionDenied, call, (erase, _erase_targets(hashes[0], "/name")),
                role=role)  # fmt: skip
    allowed(conn, call, (erase, _erase_targets(hashes[0], "/name")), role="charter_engine")
    conn.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the eraser check runs now, not at commit
    found = conn.execute(
        "SELECT pointer, disclosure, erased_by FROM event_disclosures ORDER BY pointer"
    ).fetchall()
    assert found == [("/dob", disclosure("/dob", "1815-12-10", "aaaaaaaaaaaaaaaaaaaaaA")[0], None),
                     ("/name", None, erase)]  # fmt: skip
    again = conn.execute(call, (erase, _erase_targets(hashes[0], "/name", "/dob"))).fetchone()
    assert again == (1,)  # only /dob was left to erase
    refused(conn, AppendOnlyViolation, "UPDATE event_disclosures SET erased_by = %s", (hashes[1],))


def test_the_eraser_must_be_a_charter_erase_event_of_the_same_process(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    actor, version, _, hashes = seeded
    conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
    refused(
        conn,
        AppendOnlyViolation,
        "SELECT erase_disclosures(%s, %s::jsonb)",
        (hashes[1], _erase_targets(hashes[0], "/name")),
    )
    other = rows.add_process(conn)
    rows.append_event(conn, other, actor, version)
    foreign = rows.append_event(conn, other, actor, version, action="charter:erase")
    refused(
        conn,
        AppendOnlyViolation,
        "SELECT erase_disclosures(%s, %s::jsonb)",
        (foreign, _erase_targets(hashes[0], "/name")),
    )


def test_the_worker_cannot_read_disclosures(
    conn: Conn, seeded: tuple[str, str, str, list[str]]
) -> None:
    refused(
        conn, PermissionDenied, "SELECT disclosure FROM event_disclosures", role="charter_worker"
    )
    allowed(conn, "SELECT disclosure FROM event_disclosures", role="charter_reader")
