"""The OpenAPI document describes every operation: a success with its schema (or its
non-JSON media type), and the error statuses in the one error shape."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from charter.api.app import create_app
from charter.core.config import Settings
from charter.db.database import Database

ERROR_REF = "#/components/schemas/ErrorResponse"
OPERATION_ID = re.compile(r"^[a-z][a-z0-9_]*$")
Operation = tuple[str, str, dict[str, Any]]


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    # Describing the routes runs none of them: no database is reached.
    app = create_app(Database("postgresql://unused.invalid/charter"), settings=Settings())
    return app.openapi()


def _operations(document: dict[str, Any]) -> Iterator[Operation]:
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            yield method.upper(), path, operation


def _success(operation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(s, r) for s, r in operation["responses"].items() if s.startswith("2")]


def test_every_operation_has_a_described_success(document: dict[str, Any]) -> None:
    undescribed = []
    for method, path, operation in _operations(document):
        for status, response in _success(operation) or [("none", {})]:
            content = response.get("content", {})
            json_schema = content.get("application/json", {}).get("schema")
            other_media = [m for m in content if m != "application/json"]
            no_body = status == "204" and not content
            if not (json_schema or other_media or no_body):
                undescribed.append(f"{method} {path} {status}")
    assert undescribed == []


def test_every_operation_lists_its_errors_in_the_one_shape(document: dict[str, Any]) -> None:
    problems = []
    for method, path, operation in _operations(document):
        responses = operation["responses"]
        expected = {"400", "500"} | ({"413"} if path != "/healthz" else set())
        if operation.get("security") and {"HTTPBearer": []} in operation["security"]:
            expected |= {"401", "403"}
        if "{" in path:
            expected.add("404")
        missing = expected - responses.keys()
        if missing:
            problems.append(f"{method} {path} lacks {sorted(missing)}")
        for status, response in responses.items():
            if status.startswith(("4", "5")) and not (path == "/healthz" and status == "503"):
                content = response.get("content", {})
                schema = content.get("application/json", {}).get("schema")
                if schema != {"$ref": ERROR_REF}:
                    problems.append(f"{method} {path} {status} is not an ErrorResponse")
    assert problems == []


def test_the_error_shape_is_code_and_message(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["ErrorResponse"]["required"] == ["error"]
    assert set(schemas["ErrorDetail"]["required"]) == {"code", "message"}
    # Parameter problems are 400 `malformed`, never FastAPI's 422 shape.
    assert "HTTPValidationError" not in schemas


def test_non_json_answers_say_their_media_type(document: dict[str, Any]) -> None:
    metrics = document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    stream = document["paths"]["/v1/stream"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    assert list(stream) == ["text/event-stream"]
    paths = document["paths"]
    for path in ("/v1/log/checkpoint", "/v1/log/proof/{event_hash}", "/v1/log/consistency"):
        assert list(paths[path]["get"]["responses"]["200"]["content"]) == [
            "text/plain; charset=utf-8"
        ]
    tile = paths["/v1/log/tile/{path}"]["get"]["responses"]["200"]["content"]
    assert tile == {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


def test_the_log_shapes_are_declared(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    accepted = schemas["Accepted"]["properties"]["log"]
    assert {"$ref": "#/components/schemas/Receipt"} in accepted["anyOf"]
    assert set(schemas["Receipt"]["required"]) == {"index", "proof"}
    bundle = schemas["ExportBundle"]["properties"]
    assert bundle["format"]["enum"] == ["charter-export/1", "charter-export/2"]
    assert {"$ref": "#/components/schemas/BundleLog"} in bundle["log"]["anyOf"]
    status = document["paths"]["/v1/log/status"]["get"]["responses"]["200"]["content"]
    assert status["application/json"]["schema"] == {"$ref": "#/components/schemas/LogStatus"}


def test_identifiers_and_pages_carry_their_bounds(document: dict[str, Any]) -> None:
    def parameter(path: str, name: str) -> dict[str, Any]:
        found = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == name]
        schema: dict[str, Any] = found[0]["schema"]
        return schema

    limit = parameter("/v1/processes", "limit")
    assert (limit["minimum"], limit["maximum"]) == (1, 500)
    assert "pattern" in parameter("/v1/processes", "cursor")
    assert "pattern" in parameter("/v1/processes/{process_id}", "process_id")
    assert "pattern" in parameter("/v1/runs/{run_id}", "run_id")
    assert parameter("/v1/runs", "limit")["maximum"] == 500


def test_machine_calls_are_dpop_authenticated(document: dict[str, Any]) -> None:
    claim = document["paths"]["/v1/machine/runs/claim"]["post"]
    assert claim["security"] == [{"DPoP": []}]
    assert document["components"]["securitySchemes"]["DPoP"]["in"] == "header"


def test_every_operation_id_is_a_plain_unique_name(document: dict[str, Any]) -> None:
    # The route function's name (a client generator's method name), not FastAPI's
    # default of the name, the path and the method run together.
    ids = [operation["operationId"] for _, _, operation in _operations(document)]
    assert [name for name, count in Counter(ids).items() if count > 1] == []
    for name in ids:
        assert OPERATION_ID.fullmatch(name), name
        assert "_v1_" not in name, name
        assert not name.endswith(("_get", "_post", "_put", "_patch", "_delete")), name
    by_route = {(m, p): o["operationId"] for m, p, o in _operations(document)}
    assert by_route[("GET", "/v1/processes")] == "list_processes"
    assert by_route[("POST", "/v1/events")] == "submit_event"
    assert by_route[("GET", "/v1/automation/queue")] == "list_queue"
    assert by_route[("POST", "/v1/actors/{actor_id}/disable")] == "disable_actor"
    assert by_route[("GET", "/v1/log/status")] == "get_log_status"


# Every list route, with the key its list had before the envelope (kept one release).
LISTS = {
    "/v1/processes": "processes",
    "/v1/automation/scheduled": "scheduled",
    "/v1/automation/queue": "queue",
    "/v1/processes/{process_id}/events": "events",
    "/v1/workflows": "workflows",
    "/v1/workflows/{path}/states": None,
    "/v1/actors": "actors",
    "/v1/machines": "machines",
    "/v1/automations": None,
    "/v1/automations/{automation_id}/schedules": None,
    "/v1/automations/{automation_id}/webhooks": None,
    "/v1/runs": None,
}
# Answers that hold lists but are one object, not a list: counts, a verdict, a process's
# two work tables, a bundle, a plan's steps, the log's witnesses.
NOT_LISTS = {
    "/v1/stats",
    "/v1/processes/{process_id}/verify",
    "/v1/processes/{process_id}/automation",
    "/v1/processes/{process_id}/export",
    "/v1/automations/{automation_id}/plan",
    "/v1/log/status",
}


def _answer_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    content = document["paths"][path]["get"]["responses"]["200"]["content"]
    schema: dict[str, Any] = content["application/json"]["schema"]
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def test_every_list_route_answers_the_one_envelope(document: dict[str, Any]) -> None:
    for path, legacy in LISTS.items():
        schema = _answer_schema(document, path)
        properties, required = schema["properties"], set(schema["required"])
        assert properties["items"]["type"] == "array", path
        assert {"items", "next_cursor"} <= required, path
        cursor = properties["next_cursor"]
        assert {"type": "null"} in cursor["anyOf"], path
        if legacy is not None:
            alias = properties[legacy]
            assert alias["deprecated"] is True, path
            assert alias["items"] == properties["items"]["items"], path
            assert "deprecated" in alias["description"].lower(), path
            assert legacy not in required, path


def test_every_get_answering_a_list_is_a_list_route(document: dict[str, Any]) -> None:
    for method, path, operation in _operations(document):
        content = operation["responses"].get("200", {}).get("content", {})
        if method != "GET" or "application/json" not in content:
            continue
        schema = _answer_schema(document, path)
        arrays = [k for k, v in schema.get("properties", {}).items() if v.get("type") == "array"]
        if arrays and not path.endswith("}") and path not in NOT_LISTS:
            assert path in LISTS, f"{path} answers a list ({arrays}): use the envelope"
