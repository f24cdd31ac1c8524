"""Text PostgreSQL cannot store (U+0000) is a client error, never a 500: every route of the
OpenAPI document, with NUL in each path parameter, each string query parameter and the
strings of its JSON body."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.auth.tokens import create_token
from charter.core.clock import FakeClock
from charter.core.config import Settings
from charter.db.database import Database, Role
from tests.integration.apikit import NOW, bearer

NUL = "a\x00b"
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def http(database: Database) -> Iterator[TestClient]:
    app = create_app(database, clock=FakeClock(NOW), settings=Settings())
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        token = create_token(conn, scopes=["*"], name="nul", principal="nul-tester")
    with TestClient(app, raise_server_exceptions=False, headers=bearer(token)) as client:
        yield client


@pytest.fixture(scope="module")
def ids(http: TestClient) -> dict[str, str]:
    """An automation with a plan, a schedule and a webhook: ids that exist, so a request
    whose only flaw is one NUL reaches as deep as it can."""
    created = http.post("/v1/automations", json={"name": "nul", "target": "machine-1"})
    automation_id = created.json()["id"]
    base = f"/v1/automations/{automation_id}"
    plan = {"version": 1, "steps": [{"id": "s", "actionId": "http.request", "input": {}}]}
    assert http.put(f"{base}/plan", json=plan).status_code == 200
    schedule = http.post(f"{base}/schedules", json={"cron": "0 9 * * *", "timezone": "UTC"})
    hook = http.post(f"{base}/webhooks", json={"source": "shop"})
    return {
        "automation_id": automation_id,
        "schedules": schedule.json()["id"],
        "webhooks": hook.json()["id"],
    }


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    # The document is built from the routes alone; no database is needed to read it.
    document = create_app(Database("postgresql://unused"), settings=Settings()).openapi()
    found = []
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                found.append((method.upper(), path, item[method]))
    return found


OPERATIONS = _operations()


def _sample(path: str, name: str, ids: dict[str, str]) -> str:
    """A well-formed value for a path parameter, so only the NUL one is wrong."""
    if name == "trigger_id":
        return ids["schedules" if "/schedules/" in path else "webhooks"]
    if name in ids:
        return ids[name]
    if name == "path":
        return "tests/nul"
    return str(uuid.uuid4()) if name.endswith("_id") else "x"


def _path_cases() -> list[tuple[str, str, str]]:
    cases = []
    for method, path, operation in OPERATIONS:
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                cases.append((method, path, parameter["name"]))
    return cases


def _url(path: str, ids: dict[str, str], nul_in: str | None = None) -> str:
    url = path
    for name in _names(path):
        value = "a%00b" if name == nul_in else _sample(path, name, ids)
        url = url.replace("{" + name + "}", value).replace("{" + name + ":path}", value)
    return url


def _names(path: str) -> list[str]:
    return [part.split("}")[0].split(":")[0] for part in path.split("{")[1:]]


# Well-formed values by property name, so that a body's only flaw is the one NUL.
VALID = {
    "name": "nightly",
    "target": "machine-1",
    "cron": "0 9 * * *",
    "timezone": "UTC",
    "source": "shop",
    "event": "order.paid",
    "secret": "whsec_" + "A" * 43 + "=",
    "path": "tests/nul",
    "id": "step-1",
    "actionId": "http.request",
}


def _instance(schema: dict[str, Any], key: str = "") -> Any:
    """A value of `schema` (roughly: patterns aside, it need only parse)."""
    if "const" in schema:
        return schema["const"]
    if "oneOf" in schema:
        return _instance(schema["oneOf"][0], key)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: _instance(sub, name) for name, sub in properties.items()} or {"note": "x"}
    if kind == "array":
        return [_instance(schema.get("items", {}), key)]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    if kind == "string":
        return VALID.get(key, "x")
    return {"note": "x"}  # any JSON: an object with a string in it


def _with_nul_leaves(value: Any) -> Iterator[Any]:
    """Copies of `value`, each with NUL added to one of its strings."""
    if isinstance(value, str):
        yield value + "\x00"
    elif isinstance(value, dict):
        for key, item in value.items():
            for changed in _with_nul_leaves(item):
                yield {**value, key: changed}
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for changed in _with_nul_leaves(item):
                yield [*value[:index], changed, *value[index + 1 :]]


def _body_cases() -> list[Any]:
    cases = []
    for method, path, operation in OPERATIONS:
        if method not in ("POST", "PUT", "PATCH"):
            continue
        content = operation.get("requestBody", {}).get("content", {})
        schema = content.get("application/json", {}).get("schema")
        # A machine call checks its DPoP proof (401) before it reads its body.
        documented = schema is not None and {"DPoP": []} not in operation.get("security", [])
        valid = _instance(schema) if schema is not None else {"note": "x"}
        variants = [*_with_nul_leaves(valid), {**valid, "\x00": "x"}]
        for number, body in enumerate(variants):
            cases.append(
                pytest.param(method, path, body, documented, id=f"{method} {path} {number}")
            )
    return cases


def _no_server_error(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text[:300]
    if response.status_code >= 400:
        assert set(response.json()) == {"error"}


@pytest.mark.parametrize(("method", "path", "name"), _path_cases())
def test_nul_in_a_path_parameter_is_400_malformed(
    http: TestClient, ids: dict[str, str], method: str, path: str, name: str
) -> None:
    response = http.request(method, _url(path, ids, name), json={})
    _no_server_error(response)
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"]["code"] == "malformed"


@pytest.mark.parametrize(("method", "path", "body", "documented"), _body_cases())
def test_nul_in_a_json_body_string_is_400_malformed(
    http: TestClient, ids: dict[str, str], method: str, path: str, body: Any, documented: bool
) -> None:
    response = http.request(method, _url(path, ids), json=body)
    _no_server_error(response)
    # A documented body is parsed before anything else could refuse the request; routes
    # without one (a body they ignore, or DPoP checked first) must just not fail.
    if documented:
        assert response.status_code == 400, response.text[:300]
        assert response.json()["error"]["code"] == "malformed"


def _query_cases() -> list[tuple[str, str, str]]:
    cases = []
    for method, path, operation in OPERATIONS:
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query":
                cases.append((method, path, parameter["name"]))
    return cases


@pytest.mark.parametrize(("method", "path", "name"), _query_cases())
def test_nul_in_a_query_parameter_is_400_malformed(
    http: TestClient, ids: dict[str, str], method: str, path: str, name: str
) -> None:
    response = http.request(method, _url(path, ids), params={name: NUL})
    _no_server_error(response)
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"]["code"] == "malformed"
