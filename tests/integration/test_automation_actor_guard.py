"""The automation actor holds the AUTOMATION role alone, always: every role change on it
is refused (`automation_roles_fixed`, nothing changes), in the API and in the database.
Registering it, rotating its key, disabling or enabling it takes a `*` token (a token
with only `actors:write` gets 403 `forbidden`), and every actor change is written to
system_log with who made it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg
import pytest

from charter.cli import main as cli_main
from charter.cli import remote
from charter.core.ed25519 import SecretKey, write_secret_key_file
from charter.core.errors import AutomationRolesFixed
from charter.db.database import Database, Role, connect
from charter.db.errors import translated
from charter.db.migrate import _apply, available_migrations, migrate
from charter.db.queries import query
from charter.engine import actors
from charter.sdk import Client
from tests.integration.apikit import Harness, bearer, dumps, make_harness


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        actors.add_actor(conn, "automation", SecretKey.generate().public_key_hex, ["AUTOMATION"])
    yield harness
    harness.http.close()


def post(h: Harness, token: str, path: str, body: Any = None) -> httpx.Response:
    content = dumps(body) if body is not None else None
    response: httpx.Response = h.http.post(path, content=content, headers=bearer(token))
    return response


def actor_row(h: Harness, actor_id: str = "automation") -> tuple[Any, ...]:
    """The actor's row and every key it has had: equal before and after means untouched."""
    with connect(h.database.url) as conn:
        row = conn.execute(
            "SELECT a.roles, a.disabled_at, a.updated_at,"
            " (SELECT array_agg((k.public_key, k.retired_at)::text ORDER BY k.added_at,"
            "  k.public_key) FROM charter.actor_keys k WHERE k.actor_id = a.id)"
            " FROM charter.actors a WHERE a.id = %s",
            (actor_id,),
        ).fetchone()
    assert row is not None
    return tuple(row)


def logged(h: Harness, kind: str, actor_id: str) -> list[dict[str, Any]]:
    with connect(h.database.url) as conn:
        rows = conn.execute(
            "SELECT detail FROM charter.system_log WHERE kind = %s"
            " AND detail->>'actor_id' = %s ORDER BY id",
            (kind, actor_id),
        ).fetchall()
    return [cast("dict[str, Any]", r[0]) for r in rows]


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    detail: dict[str, Any] = response.json()["error"]
    assert detail["code"] == code
    return detail


# --- roles ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "roles",
    [["customer"], ["AUTOMATION", "customer"], [], ["analyst", "manager"]],
)
def test_every_role_change_on_the_automation_actor_is_refused(h: Harness, roles: list[str]) -> None:
    before = actor_row(h)
    for token in (h.token("actors:write"), h.admin):
        refused = post(h, token, "/v1/actors/automation/roles", {"roles": roles})
        detail = error(refused, 422, "automation_roles_fixed")
        assert "AUTOMATION" in detail["message"]
        assert "alone" in detail["message"]
    assert actor_row(h) == before
    assert logged(h, "actor.roles_set", "automation") == []


def test_the_automation_actor_cannot_be_registered_with_other_roles(h: Harness) -> None:
    # It exists here, but the roles are checked first: the answer names the rule.
    key = SecretKey.generate().public_key_hex
    body = {"id": "automation", "public_key": key, "roles": ["AUTOMATION", "customer"]}
    error(post(h, h.admin, "/v1/actors", body), 422, "automation_roles_fixed")


def test_the_database_keeps_the_automation_actor_to_automation_alone(h: Harness) -> None:
    """Another code path, or a superuser, cannot give it other roles either."""
    before = actor_row(h)
    with connect(h.database.url) as conn, pytest.raises(psycopg.errors.CheckViolation) as caught:
        conn.execute(
            "UPDATE charter.actors SET roles = '{AUTOMATION,customer}' WHERE id = 'automation'"
        )
    assert caught.value.diag.constraint_name == "automation_actor_roles"
    # The engine's own query, without the Python check in front of it.
    with (
        h.database.connection(Role.ENGINE) as conn,
        pytest.raises(AutomationRolesFixed),
        conn.transaction(),
        translated(),
    ):
        conn.execute(query("set_actor_roles"), {"id": "automation", "roles": ["customer"]})
    assert actor_row(h) == before


def test_other_actors_roles_still_change_with_actors_write_and_are_logged(h: Harness) -> None:
    h.actor("temp-worker", "clerk")
    writer = h.token("actors:write", principal="hr")
    changed = post(h, writer, "/v1/actors/temp-worker/roles", {"roles": ["boss", "clerk"]})
    assert changed.status_code == 200, changed.text
    assert changed.json()["roles"] == ["boss", "clerk"]
    [entry] = logged(h, "actor.roles_set", "temp-worker")
    assert entry["by"] == "hr"
    assert entry["roles"] == ["boss", "clerk"]
    assert entry["previous_roles"] == ["clerk"]


# --- key rotation, disable, enable --------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/actors/automation/keys", "key"),
        ("/v1/actors/automation/disable", None),
        ("/v1/actors/automation/enable", None),
    ],
)
def test_actors_write_alone_cannot_touch_the_automation_actors_key_or_status(
    h: Harness, path: str, body: str | None
) -> None:
    before = actor_row(h)
    writer = h.token("actors:write", principal="hr")
    payload = {"public_key": SecretKey.generate().public_key_hex} if body else None
    detail = error(post(h, writer, path, payload), 403, "forbidden")
    assert detail["scope"] == "*"
    assert "automation actor" in detail["message"]
    assert actor_row(h) == before


def test_registering_the_automation_actor_takes_a_star_token(h: Harness) -> None:
    # Whoever registers it chooses the key that signs every automated event.
    key = SecretKey.generate().public_key_hex
    body = {"id": "automation", "public_key": key, "roles": ["AUTOMATION"]}
    writer = h.token("actors:write", principal="hr")
    before = actor_row(h)
    detail = error(post(h, writer, "/v1/actors", body), 403, "forbidden")
    assert detail["scope"] == "*"
    assert actor_row(h) == before


def test_a_star_token_rotates_disables_and_enables_it_and_each_is_logged(h: Harness) -> None:
    admin = h.token("*", principal="root-operator")
    old = actor_row(h)
    new_key = SecretKey.generate().public_key_hex
    rotated = post(h, admin, "/v1/actors/automation/keys", {"public_key": new_key})
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["public_key"] == new_key
    assert rotated.json()["roles"] == ["AUTOMATION"]
    [entry] = logged(h, "actor.key_rotated", "automation")
    assert entry["by"] == "root-operator"
    assert entry["public_key"] == new_key
    assert entry["previous_key"] is not None
    assert entry["previous_key"] != new_key
    assert actor_row(h) != old

    assert post(h, admin, "/v1/actors/automation/disable").json()["disabled"] is True
    assert post(h, admin, "/v1/actors/automation/enable").json()["disabled"] is False
    assert [e["by"] for e in logged(h, "actor.disabled", "automation")] == ["root-operator"]
    assert [e["by"] for e in logged(h, "actor.enabled", "automation")] == ["root-operator"]
    with connect(h.database.url) as conn:
        row = conn.execute(
            "SELECT level, actor, message FROM charter.system_log WHERE kind = 'actor.disabled'"
            " AND detail->>'actor_id' = 'automation'"
        ).fetchone()
    assert row is not None
    assert row[0] == "warning"  # the automation actor's key and status are loud changes
    assert row[1] == new_key
    assert "automation" in str(row[2])


def test_other_actors_keys_and_status_still_change_with_actors_write(h: Harness) -> None:
    h.actor("temp-clerk", "clerk")
    writer = h.token("actors:write", principal="hr")
    key = SecretKey.generate().public_key_hex
    assert post(h, writer, "/v1/actors/temp-clerk/keys", {"public_key": key}).status_code == 200
    assert post(h, writer, "/v1/actors/temp-clerk/disable").status_code == 200
    assert [e["by"] for e in logged(h, "actor.key_rotated", "temp-clerk")] == ["hr"]
    assert [e["by"] for e in logged(h, "actor.disabled", "temp-clerk")] == ["hr"]
    added = post(
        h,
        writer,
        "/v1/actors",
        {"id": "new-hire", "public_key": SecretKey.generate().public_key_hex, "roles": ["clerk"]},
    )
    assert added.status_code == 201, added.text
    assert [e["roles"] for e in logged(h, "actor.added", "new-hire")] == [["clerk"]]


# --- the migration -------------------------------------------------------------------------


def test_the_migration_gives_a_wrongly_roled_automation_actor_back_its_one_role(
    empty_database_url: str,
) -> None:
    with connect(empty_database_url) as conn:
        conn.execute(query("bootstrap_migrations"))
        for migration in available_migrations():
            if migration.version < 18:
                _apply(conn, migration)
        conn.execute(
            "INSERT INTO charter.actors (id, roles) VALUES ('automation', '{AUTOMATION,customer}')"
        )
        conn.commit()
        migrate(conn)
        conn.commit()
        [(roles,)] = conn.execute("SELECT roles FROM charter.actors WHERE id = 'automation'")
        assert roles == ["AUTOMATION"]
        [(level, detail)] = conn.execute(
            "SELECT level, detail FROM charter.system_log WHERE kind = 'actor.roles_repaired'"
        )
    assert level == "warning"
    assert detail == {"actor_id": "automation", "previous_roles": ["AUTOMATION", "customer"],
                      "roles": ["AUTOMATION"]}  # fmt: skip


# --- the CLI ------------------------------------------------------------------------------


def charter(
    h: Harness,
    token: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
) -> tuple[int, str, str]:
    """`charter ARGS` through the real entry point, as a client with `token`."""
    monkeypatch.setattr(remote, "client", lambda: Client(str(h.http.base_url), token, http=h.http))
    monkeypatch.setattr(sys, "argv", ["charter", *args])
    capsys.readouterr()
    code: object = 0
    try:
        cli_main.main()
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return (code if isinstance(code, int) else 0), captured.out, captured.err


def test_the_cli_says_why_the_automation_actor_is_refused(
    h: Harness,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    writer = h.token("actors:write", principal="hr")
    key_file = tmp_path / "new.key"
    write_secret_key_file(key_file, SecretKey.generate())
    before = actor_row(h)
    refusals = [
        (writer, ["actors", "roles", "automation", "--role", "customer"], "AUTOMATION role alone"),
        (h.admin, ["actors", "roles", "automation", "--role", "customer"], "AUTOMATION role alone"),
        (writer, ["actors", "rotate", "automation", "--key-file", str(key_file)], "'*' token"),
        (writer, ["actors", "disable", "automation"], "'*' token"),
        (writer, ["actors", "enable", "automation"], "'*' token"),
    ]
    for token, args, said in refusals:
        code, out, err = charter(h, token, monkeypatch, capsys, *args)
        assert code == 1, (args, out, err)
        [line] = err.strip().splitlines()
        assert line.startswith("error: ")
        assert said in line
        assert "automation actor" in line
        code, _, err = charter(h, token, monkeypatch, capsys, *args, "--json")
        assert code == 1
        refused = json.loads(err)["error"]
        assert refused["code"] in ("automation_roles_fixed", "forbidden")
    assert actor_row(h) == before

    code, out, err = charter(
        h,
        h.admin,
        monkeypatch,
        capsys,
        "actors",
        "rotate",
        "automation",
        "--key-file",
        str(key_file),
    )
    assert code == 0, err
    assert out.startswith("rotated the key of automation: ")
    code, out, _ = charter(
        h,
        writer,
        monkeypatch,
        capsys,
        "actors",
        "roles",
        "clerk",
        "--role",
        "clerk",
        "--role",
        "boss",
    )
    assert code == 0
    assert out.strip() == "clerk now holds boss, clerk"
    code, out, _ = charter(h, writer, monkeypatch, capsys, "actors", "disable", "clerk")
    assert (code, out.strip()) == (0, "disabled clerk")
    code, out, _ = charter(h, writer, monkeypatch, capsys, "actors", "enable", "clerk", "--json")
    assert code == 0
    assert json.loads(out)["disabled"] is False
