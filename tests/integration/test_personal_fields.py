"""Personal input fields on the wire: the workflow's reading lists each action's
personal pointers; a deploy with a misplaced mark is refused with coded problems."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from tests.integration.apikit import Harness, bearer, make_harness

PATH = "tests/personal"
KYC: JsonObject = {
    "dsl": 2,
    "states": ["draft", "closed"],
    "roles": ["clerk", "dpo"],
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "draft",
            "input": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "x-personal": True},
                    "address": {
                        "type": "object",
                        "properties": {"street": {"type": "string", "x-personal": True}},
                    },
                    "country": {"type": "string"},
                },
            },
        },
        "close": {"role": "clerk", "from": "draft", "to": "closed"},
    },
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


def test_a_workflow_reading_lists_the_personal_pointers_of_each_action(h: Harness) -> None:
    h.deploy(PATH, KYC)
    response = h.http.get(f"/v1/workflows/{PATH}", headers=bearer(h.admin))
    assert response.status_code == 200, response.text
    assert response.json()["personal"] == {"open": ["/name", "/address/street"]}


def test_a_workflow_without_personal_fields_lists_none(h: Harness) -> None:
    plain: Any = {**KYC, "actions": {"open": {"type": "create", "role": "clerk", "to": "draft"}}}
    plain.pop("erasure")
    plain["states"] = ["draft"]
    h.deploy(f"{PATH}-plain", plain)
    response = h.http.get(f"/v1/workflows/{PATH}-plain", headers=bearer(h.admin))
    assert response.json()["personal"] == {}


def test_a_deploy_with_personal_fields_and_no_erasure_block_is_refused_with_codes(
    h: Harness,
) -> None:
    broken: Any = {**KYC}
    broken.pop("erasure")
    response = h.http.post(
        "/v1/workflows",
        json={"path": f"{PATH}-broken", "definition": broken},
        headers=bearer(h.admin),
    )
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"]["code"] == "invalid_workflow"
    [problem] = body["error"]["problems"]
    assert problem["code"] == "personal_without_erasure"
    assert problem["pointer"] == ""
