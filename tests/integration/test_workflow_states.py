"""GET /v1/workflows/{path}/states on a real database: processes counted per state, by the
revision of their last event; the definition route beside it still answers its own paths."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.sdk import StateCount
from tests.integration.apikit import Harness, bearer, make_harness, new_id

PATH = "tests/counted"
FIRST: JsonObject = {
    "dsl": 2,
    "states": ["open", "approved"],
    "roles": ["clerk"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "approve": {"role": "clerk", "from": "open", "to": "approved"},
    },
}
# Revision 2 adds a state: a process moved there runs under it.
SECOND: JsonObject = {
    "dsl": 2,
    "states": ["open", "approved", "held"],
    "roles": ["clerk"],
    "actions": {
        **FIRST["actions"],  # type: ignore[dict-item]
        "hold": {"role": "clerk", "from": "open", "to": "held"},
    },
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


def _get(h: Harness, path: str, token: str | None = None) -> Any:
    response = h.http.get(path, headers=bearer(token or h.admin))
    assert response.status_code == 200, response.text
    return response.json()


def _open(h: Harness, path: str) -> tuple[str, str]:
    """A new process at `path` in `open`: (id, head)."""
    clerk, process = h.keys["clerk"], new_id("count")
    body = h.accept(sign(h.envelope(clerk, process, "open", workflow=path), clerk))
    return process, str(body["hash"])


def _take(h: Harness, process: tuple[str, str], action: str, path: str = PATH) -> None:
    clerk = h.keys["clerk"]
    h.accept(sign(h.envelope(clerk, process[0], action, prev=process[1], workflow=path), clerk))


def _counts(h: Harness, path: str) -> list[tuple[int, str, int]]:
    items = _get(h, f"/v1/workflows/{path}/states")["items"]
    return [(i["revision"], i["state"], i["processes"]) for i in items]


def test_processes_are_counted_per_state_by_the_revision_of_their_last_event(
    h: Harness,
) -> None:
    h.deploy(PATH, FIRST)
    assert _get(h, f"/v1/workflows/{PATH}/states") == {"items": [], "next_cursor": None}
    first = [_open(h, PATH) for _ in range(3)]
    _take(h, first[0], "approve")  # still revision 1
    h.deploy(PATH, SECOND)
    _open(h, PATH)
    _open(h, PATH)
    _take(h, first[1], "hold")  # its last event now is revision 2's

    h.deploy(PATH + "-other", FIRST)
    _open(h, PATH + "-other")  # another path's process is not counted here

    assert _counts(h, PATH) == [(2, "held", 1), (2, "open", 2), (1, "approved", 1), (1, "open", 1)]
    assert _counts(h, PATH + "-other") == [(1, "open", 1)]
    with h.client() as client:
        assert client.workflow_states(PATH) == [
            StateCount(2, "held", 1),
            StateCount(2, "open", 2),
            StateCount(1, "approved", 1),
            StateCount(1, "open", 1),
        ]


def test_the_counts_take_processes_read_and_a_deployed_path(h: Harness) -> None:
    h.deploy(PATH, FIRST)
    reader = h.token("processes:read")
    assert "items" in _get(h, f"/v1/workflows/{PATH}/states", reader)
    refused = h.http.get(f"/v1/workflows/{PATH}/states", headers=bearer(h.token("runs:read")))
    assert refused.status_code == 403
    assert refused.json()["error"]["scope"] == "processes:read"
    missing = h.http.get("/v1/workflows/tests/nowhere/states", headers=bearer(reader))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_workflow"
    unsigned = h.http.get(f"/v1/workflows/{PATH}/states")
    assert unsigned.status_code == 401


def test_the_definition_route_still_answers_beside_the_counts(h: Harness) -> None:
    h.deploy(PATH, FIRST)
    shown = _get(h, f"/v1/workflows/{PATH}")
    assert shown["path"] == PATH
    assert "definition" in shown
    assert "items" in _get(h, f"/v1/workflows/{PATH}/states")
    # A one-segment path named `states` is a workflow like any other.
    h.deploy("states", FIRST)
    assert _get(h, "/v1/workflows/states")["path"] == "states"
    assert _get(h, "/v1/workflows/states/states")["items"] == []


def test_no_workflow_can_be_deployed_where_its_counts_would_be(h: Harness) -> None:
    """`.../states` is where a path's counts are: a workflow there could not be read."""
    refused = h.http.post(
        "/v1/workflows",
        json={"path": PATH + "/states", "definition": FIRST},
        headers=bearer(h.admin),
    )
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "malformed")
    assert "cannot end in '/states'" in refused.json()["error"]["message"]
