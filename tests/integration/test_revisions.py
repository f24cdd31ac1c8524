"""Workflow revisions on the wire: each event names the revision it was decided under, a
process the revision of its last event, and any revision's definition can be read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from charter.audit.bundle import evidence_from_bundle
from charter.audit.verify_stored import export_bundle
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from tests.integration.apikit import Harness, bearer, make_harness, new_id

PATH = "tests/revised"
FIRST: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "note": {"type": "update", "role": "clerk", "from": "open"},
    },
}
SECOND: JsonObject = {**FIRST, "description": "the same rules, described"}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


def _get(h: Harness, path: str, **params: Any) -> Any:
    response = h.http.get(path, params=params, headers=bearer(h.admin))
    assert response.status_code == 200, response.text
    return response.json()


def test_events_and_processes_name_the_revision_that_decided_them(h: Harness) -> None:
    clerk = h.keys["clerk"]
    process_id = new_id("rev")
    h.deploy(PATH, FIRST)  # revision 1
    opened: Any = h.accept(sign(h.envelope(clerk, process_id, "open", workflow=PATH), clerk))
    assert opened["process"]["revision"] == 1
    h.deploy(PATH, SECOND)  # revision 2
    noted: Any = h.accept(
        sign(h.envelope(clerk, process_id, "note", prev=opened["hash"], workflow=PATH), clerk)
    )
    assert noted["process"]["revision"] == 2
    h.deploy(PATH, FIRST)  # revision 3: the first definition again, one version, 2 revisions
    again: Any = h.accept(
        sign(h.envelope(clerk, process_id, "note", prev=noted["hash"], workflow=PATH), clerk)
    )
    assert again["process"]["revision"] == 3

    events = _get(h, f"/v1/processes/{process_id}/events")["items"]
    assert [e["revision"] for e in events] == [1, 2, 3]
    assert events[0]["workflow_version"] == events[2]["workflow_version"]
    assert _get(h, f"/v1/processes/{process_id}")["revision"] == 3
    listed = _get(h, "/v1/processes", q=process_id)["items"]
    assert [p["revision"] for p in listed] == [3]

    # The export carries them, and reads them back.
    bundle: Any = export_bundle(h.database, process_id)
    assert [e["revision"] for e in bundle["events"]] == [1, 2, 3]
    read = evidence_from_bundle(bundle)
    assert [e.workflow_revision for e in read.events] == [1, 2, 3]


def test_any_revision_s_definition_can_be_read(h: Harness) -> None:
    path = "tests/revised-shown"
    h.deploy(path, FIRST)
    h.deploy(path, SECOND)
    current = _get(h, f"/v1/workflows/{path}")
    assert (current["revision"], current["definition"]) == (2, SECOND)
    first = _get(h, f"/v1/workflows/{path}", revision=1)
    assert (first["revision"], first["definition"]) == (1, FIRST)
    assert [r["revision"] for r in first["revisions"]] == [2, 1]

    missing = h.http.get(f"/v1/workflows/{path}", params={"revision": 9}, headers=bearer(h.admin))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_workflow"
    assert "no revision 9" in missing.json()["error"]["message"]
    for bad in ("0", "x", "99999999999"):
        refused = h.http.get(
            f"/v1/workflows/{path}", params={"revision": bad}, headers=bearer(h.admin)
        )
        assert refused.status_code in (400, 422), (bad, refused.text)


def test_the_sdk_reads_a_revision(h: Harness) -> None:
    path = "tests/revised-sdk"
    h.deploy(path, FIRST)
    h.deploy(path, SECOND)
    with h.client() as client:
        assert client.workflow(path, revision=1).definition == FIRST
        assert client.workflow(path).definition == SECOND
