"""Bearer tokens: 401 without or with an unknown or revoked token, 403 without the scope,
`*` grants everything, tokens are stored only as SHA-256, events need no token."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from charter.auth.tokens import create_token, find_token, list_tokens, revoke_token
from charter.core.envelope import sign
from charter.core.errors import Malformed, NotFound
from charter.db.database import Database, Role, connect
from tests.integration.apikit import Harness, bearer, make_harness, new_id


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


# Each protected endpoint with the scope it needs (GET reads need processes:read).
PROTECTED = [
    ("GET", "/v1/processes/{pid}", "processes:read"),
    ("GET", "/v1/processes/{pid}/events", "processes:read"),
    ("GET", "/v1/processes/{pid}/automation", "processes:read"),
    ("GET", "/v1/processes/{pid}/verify", "processes:read"),
    ("GET", "/v1/workflows", "processes:read"),
    ("GET", "/v1/workflows/tests/errands", "processes:read"),
    ("GET", "/v1/actors", "processes:read"),
    ("POST", "/v1/workflows", "workflows:write"),
    ("POST", "/v1/actors", "actors:write"),
    ("POST", "/v1/actors/nobody/disable", "actors:write"),
    ("POST", "/v1/actors/nobody/keys", "actors:write"),
]


@pytest.mark.parametrize(("method", "path", "scope"), PROTECTED)
def test_no_token_is_401_unauthorized(h: Harness, method: str, path: str, scope: str) -> None:
    response = h.http.request(method, path.format(pid="p-1"), content=b"{}")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("header", ["Bearer ch_not-a-real-token", "Basic dXNlcjpwYXNz", "Bearer"])
def test_an_unknown_or_non_bearer_token_is_401(h: Harness, header: str) -> None:
    response = h.http.get("/v1/workflows", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(("method", "path", "scope"), PROTECTED)
def test_a_token_without_the_scope_is_403_forbidden(
    h: Harness, method: str, path: str, scope: str
) -> None:
    others = {"processes:read", "workflows:write", "actors:write", "runs:read"} - {scope}
    token = h.token(*others)
    response = h.http.request(method, path.format(pid="p-1"), content=b"{}", headers=bearer(token))
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "forbidden",
        "message": f"the token lacks the scope {scope!r}",
        "scope": scope,
    }


@pytest.mark.parametrize(("method", "path", "scope"), PROTECTED)
def test_the_right_scope_or_star_passes_authentication(
    h: Harness, method: str, path: str, scope: str
) -> None:
    for token in (h.token(scope), h.admin):
        response = h.http.request(
            method, path.format(pid="p-1"), content=b"{}", headers=bearer(token)
        )
        # Past auth: whatever the endpoint says next, it is not an auth error.
        assert response.status_code not in (401, 403) or response.json()["error"]["code"] not in (
            "unauthorized",
            "forbidden",
        ), response.text


def test_a_revoked_token_is_refused(h: Harness) -> None:
    token = h.token("processes:read")
    assert h.http.get("/v1/workflows", headers=bearer(token)).status_code == 200
    with h.database.connection(Role.ENGINE) as conn, conn.transaction():
        info = find_token(conn, token)
        assert info is not None
        revoke_token(conn, info.id)
        revoke_token(conn, info.id)  # twice is fine
    response = h.http.get("/v1/workflows", headers=bearer(token))
    assert response.status_code == 401
    assert response.json()["error"] == {
        "code": "unauthorized",
        "message": "the bearer token was revoked",
    }


def test_tokens_are_stored_only_as_their_sha256(h: Harness) -> None:
    with h.database.connection(Role.ENGINE) as conn, conn.transaction():
        token = create_token(conn, scopes=["runs:read"], name="hashed", principal="ops@example")
    assert token.startswith("ch_")
    assert len(token) > 40
    with connect(h.database.url) as conn:
        rows = conn.execute(
            "SELECT to_jsonb(t)::text, token_hash FROM charter.api_tokens t WHERE name = 'hashed'"
        ).fetchall()
    assert len(rows) == 1
    assert token not in str(rows[0][0])
    assert rows[0][1] == hashlib.sha256(token.encode()).hexdigest()


def test_token_records_list_without_hashes(h: Harness) -> None:
    with h.database.connection(Role.ENGINE) as conn, conn.transaction():
        token = create_token(conn, scopes=["*", "runs:read", "*"], name="listed")
        listed = [t for t in list_tokens(conn) if t.name == "listed"]
    assert len(listed) == 1
    assert listed[0].scopes == ("*", "runs:read")
    assert listed[0].principal == "admin"
    assert token not in str(listed[0].to_json())


@pytest.mark.parametrize(
    ("scopes", "principal"),
    [([], "admin"), (["processes:write"], "admin"), (["*"], "not a principal")],
)
def test_bad_scopes_or_principal_are_refused(h: Harness, scopes: list[str], principal: str) -> None:
    with (
        h.database.connection(Role.ENGINE) as conn,
        conn.transaction(),
        pytest.raises(Malformed),
    ):
        create_token(conn, scopes=scopes, principal=principal)


def test_revoking_an_unknown_token_is_not_found(h: Harness) -> None:
    with h.database.connection(Role.ENGINE) as conn, conn.transaction():
        with pytest.raises(NotFound):
            revoke_token(conn, "00000000-0000-0000-0000-000000000000")
        with pytest.raises(NotFound):
            revoke_token(conn, "not-a-uuid")


def test_submitting_an_event_needs_no_token(h: Harness) -> None:
    clerk = h.keys["clerk"]
    response = h.post(sign(h.envelope(clerk, new_id(), "create", {"amount": 3}), clerk))
    assert response.status_code == 201
    # And a token, even a bad one, does not stand in for a signature.
    response = h.post(
        sign(h.envelope(clerk, new_id(), "create", {"amount": 3}), clerk),
        headers={"Authorization": "Bearer nonsense"},
    )
    assert response.status_code == 201
