"""The database scenarios run in: its automation actor, its workflows, its actors.

One `ScenarioDatabase` serves any number of scenarios, one after the other: the
automation actor is registered once with a key kept here (never in the database),
each workflow is deployed once, and each actor keeps its key from one scenario to the
next while its roles are set to what the scenario at hand declares.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonValue
from charter.db.database import Database, Role
from charter.db.scratch import scratch_database, scratch_server
from charter.dsl.canonical import version_hash
from charter.engine import actors
from charter.engine.records import AUTOMATION_ACTOR_ID, AUTOMATION_ROLE
from charter.engine.registry import Registry
from charter.firing.keys import registered_public_key

DERIVED_ROOT = "scenarios"
_NOT_NAME = re.compile(r"[^A-Za-z0-9._:-]+")


class ScenarioError(Exception):
    """A scenario could not run as written (not a refusal of the engine: those are
    CharterErrors, and not a failed expectation: that is an AssertionError)."""


def slug(text: str) -> str:
    """`text` as a name (process ids, path segments): other characters become `-`."""
    return _NOT_NAME.sub("-", text).strip("-._:")[:80] or "scenario"


def derived_path(stem: str, definition: JsonValue) -> str:
    """Where a workflow file is deployed when the scenario names no path for it: its
    file name and its version, so that two files with one name never share a path and
    one file is deployed once however many scenarios use it."""
    return f"{DERIVED_ROOT}/{slug(stem)}-{version_hash(definition)[:8]}"


@dataclass
class ScenarioDatabase:
    """A migrated database of the scenarios' own (a scratch database: see `scratch`)."""

    database: Database
    automation_key: SecretKey = field(default_factory=SecretKey.generate)
    _deployed: dict[str, str] = field(default_factory=dict)
    _keys: dict[str, SecretKey] = field(default_factory=dict)
    _roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    registry: Registry = field(default_factory=Registry)

    def __post_init__(self) -> None:
        registered = registered_public_key(self.database)
        if registered is not None:
            raise ScenarioError(
                "this database has an automation actor already, whose key scenarios do not "
                "hold: scenarios run on a scratch database of their own"
            )
        with self.database.connection(Role.ENGINE) as conn:
            actors.add_actor(
                conn, AUTOMATION_ACTOR_ID, self.automation_key.public_key_hex, [AUTOMATION_ROLE]
            )
            conn.commit()

    @classmethod
    @contextmanager
    def scratch(cls, admin_url: str | None = None) -> Iterator[ScenarioDatabase]:
        """A scratch database on the server `admin_url` names (a superuser URL), or on a
        throwaway embedded server when None; dropped afterwards, also on failure."""
        with (
            scratch_server(admin_url) as server,
            scratch_database(server, prefix="charter_scenarios") as url,
            Database(url, max_size=4, application_name="charter-scenarios") as database,
        ):
            yield cls(database)

    def deploy(self, path: str, definition: JsonValue) -> str:
        """Deploy `definition` at `path` once; its version. A path this database has
        already given another definition is refused: it would change the rules of every
        process of the scenarios before."""
        version = version_hash(definition)
        known = self._deployed.get(path)
        if known == version:
            return version
        if known is not None:
            raise ScenarioError(
                f"the workflow path {path!r} was deployed with another definition by an "
                "earlier scenario of this database: give each definition its own path"
            )
        with self.database.connection(Role.ENGINE) as conn:
            self.registry.deploy(conn, path, definition, deployed_by="scenario")
            conn.commit()
        self._deployed[path] = version
        return version

    def actor(self, actor_id: str, roles: Sequence[str]) -> SecretKey:
        """The key of `actor_id`, registered now if it is new, holding `roles` from now on."""
        wanted = tuple(sorted(set(roles)))
        with self.database.connection(Role.ENGINE) as conn:
            if actor_id not in self._keys:
                key = SecretKey.generate()
                actors.add_actor(conn, actor_id, key.public_key_hex, wanted)
                self._keys[actor_id] = key
            elif self._roles[actor_id] != wanted:
                actors.set_roles(conn, actor_id, wanted)
            conn.commit()
        self._roles[actor_id] = wanted
        return self._keys[actor_id]

    def actors(self, declared: Mapping[str, Sequence[str]]) -> dict[str, SecretKey]:
        return {name: self.actor(name, roles) for name, roles in declared.items()}
