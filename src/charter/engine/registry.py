"""The workflow registry: append-only deployments of content-addressed definitions.

A definition is stored once under the SHA-256 of its canonical text; deploying a path
appends a revision. Parsed workflows are cached by version: a version never changes.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from threading import Lock
from typing import cast

import psycopg

from charter import wire
from charter.core.errors import Duplicate, Malformed, UnknownWorkflow
from charter.core.ijson import check_value, loads
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.errors import translated
from charter.db.queries import query
from charter.dsl.canonical import canonical_definition, version_hash
from charter.dsl.lint import workflow_warnings
from charter.dsl.model import WORKFLOW_PATH_PATTERN, Workflow
from charter.dsl.validate import Problem, load_workflow
from charter.engine.store import Store
from charter.wire import engine as shapes

MAX_PATH_LENGTH = 1024  # as the workflow_deployments CHECK says


@dataclass(frozen=True)
class Deployment:
    path: str
    revision: int
    version: str
    deployed_at: datetime
    deployed_by: str | None
    # What a deploy noticed but did not refuse (charter.dsl.lint); empty when read back.
    warnings: tuple[Problem, ...] = ()
    # The definition was the path's current version already: no new revision was made.
    unchanged: bool = False
    deployed_by_token: str | None = None  # the id of the API token that deployed it
    # The deploy was allowed to leave processes stranded or work orphaned.
    allow_stranding: bool = False
    # The state map of the migration the deploy came with (docs/lifecycle.md).
    migration_map: Mapping[str, str] | None = None

    def to_json(self) -> JsonObject:
        return wire.to_json(self, shapes.Deployment)

    def deployed_json(self) -> JsonObject:
        """The deploy's answer: this deployment, its warnings, whether it was unchanged."""
        warnings = [w.to_dict() for w in self.warnings]
        answer = {"deployment": self, "warnings": warnings, "unchanged": self.unchanged}
        return wire.to_json(answer, shapes.Deployed)


def workflow_json(
    history: list[Deployment],
    definition: JsonValue,
    shown: Deployment | None = None,
    personal: Mapping[str, list[str]] | None = None,
) -> JsonObject:
    """A path's deployment `shown` (default: the current one), its definition, every
    revision, newest first, and the personal input fields of its actions."""
    answer = {
        "deployment": shown or history[0],
        "definition": definition,
        "revisions": history,
        "personal": {name: tuple(pointers) for name, pointers in (personal or {}).items()},
    }
    return wire.to_json(answer, shapes.Workflow)


class Registry:
    """Deploys definitions and hands out parsed workflows by version."""

    def __init__(self, cache_size: int = 256) -> None:
        self._cache: OrderedDict[str, Workflow] = OrderedDict()
        self._cache_size = cache_size
        self._lock = Lock()

    def workflow(self, store: Store, version: str) -> Workflow:
        """The parsed workflow of a stored version."""
        with self._lock:
            cached = self._cache.get(version)
            if cached is not None:
                self._cache.move_to_end(version)
                return cached
        text = store.workflow_definition_text(version)
        if text is None:
            raise UnknownWorkflow(f"no workflow version {version}")
        workflow = load_workflow(loads(text))
        with self._lock:
            self._cache[version] = workflow
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return workflow

    def current(self, store: Store, path: str) -> tuple[str, Workflow]:
        """(version, workflow) deployed last at `path`, or UnknownWorkflow."""
        version = store.current_workflow_version(path)
        if version is None:
            raise UnknownWorkflow(f"no workflow is deployed at {path!r}")
        return version, self.workflow(store, version)

    def deploy(
        self,
        conn: psycopg.Connection[tuple[object, ...]],
        path: str,
        definition: JsonValue,
        *,
        deployed_by: str | None = None,
        deployed_by_token: str | None = None,
        allow_stranding: bool = False,
        migration_map: Mapping[str, str] | None = None,
    ) -> Deployment:
        """Validate and deploy `definition` at `path` (InvalidWorkflow lists every problem);
        `allow_stranding` and `migration_map` are recorded with the new revision."""
        workflow = parse_definition(path, definition)
        text = canonical_definition(definition).decode("utf-8")
        version = version_hash(definition)
        with translated(), conn.transaction():
            conn.execute(
                query("insert_definition"), {"version": version, "definition": text, "now": None}
            )
            try:
                with conn.transaction():
                    row = conn.execute(
                        query("insert_deployment"),
                        {
                            "path": path,
                            "version": version,
                            "deployed_by": deployed_by,
                            "deployed_by_token": deployed_by_token,
                            "now": None,
                            "allow_stranding": allow_stranding,
                            "migration_map": None
                            if migration_map is None
                            else json.dumps(dict(migration_map)),
                        },
                    ).fetchone()
            except psycopg.errors.UniqueViolation:
                raise Duplicate(
                    f"another deployment of {path!r} happened at the same time; deploy again"
                ) from None
            unchanged = row is None
            if unchanged:  # the same definition again: the current revision stands
                row = conn.execute(query("current_deployment"), {"path": path}).fetchone()
                assert row is not None
                deployed_by = cast(str | None, row[2])
                deployed_by_token = cast(str | None, row[3])
                allow_stranding = bool(row[4])
                migration_map = _state_map(row[5])
        assert row is not None
        with self._lock:
            self._cache[version] = workflow
        return Deployment(
            path,
            int(cast(int, row[0])),
            version,
            cast(datetime, row[1]),
            deployed_by,
            tuple(workflow_warnings(workflow)),
            unchanged=unchanged,
            deployed_by_token=deployed_by_token,
            allow_stranding=allow_stranding,
            migration_map=migration_map,
        )

    def is_current(self, store: Store, path: str, definition: JsonValue) -> bool:
        """Whether `definition` is the version deployed last at `path` already."""
        return store.current_workflow_version(path) == version_hash(definition)


def list_deployments(conn: psycopg.Connection[tuple[object, ...]]) -> list[Deployment]:
    with translated():
        rows = conn.execute(query("list_workflows")).fetchall()
    return [_deployment(r) for r in rows]


def revisions(conn: psycopg.Connection[tuple[object, ...]], path: str) -> list[Deployment]:
    with translated():
        rows = conn.execute(query("workflow_revisions"), {"path": path}).fetchall()
    if not rows:
        raise UnknownWorkflow(f"no workflow is deployed at {path!r}")
    return [_deployment(r) for r in rows]


def state_counts(
    conn: psycopg.Connection[tuple[object, ...]], path: str
) -> list[shapes.StateCount]:
    """How many processes at `path` are in each state, by the revision of their last
    event: newest revision first, then by state (UnknownWorkflow: nothing deployed)."""
    with translated():
        rows = conn.execute(query("workflow_state_counts"), {"path": path}).fetchall()
        # No process there yet, or no workflow either: only the registry tells them apart.
        deployed = bool(rows) or bool(
            conn.execute(query("current_deployment"), {"path": path}).fetchone()
        )
    if not deployed:
        raise UnknownWorkflow(f"no workflow is deployed at {path!r}")
    return [shapes.StateCount(int(cast(int, r[0])), str(r[1]), int(cast(int, r[2]))) for r in rows]


def _deployment(row: tuple[object, ...]) -> Deployment:
    return Deployment(
        str(row[0]),
        int(cast(int, row[1])),
        str(row[2]),
        cast(datetime, row[3]),
        cast("str | None", row[4]),
        deployed_by_token=cast("str | None", row[5]),
        allow_stranding=bool(row[6]),
        migration_map=_state_map(row[7]),
    )


def _state_map(text: object) -> dict[str, str] | None:
    if text is None:
        return None
    found = loads(str(text))
    assert isinstance(found, dict)
    return {str(old): str(new) for old, new in found.items()}


def parse_definition(path: str, definition: JsonValue) -> Workflow:
    """The workflow `definition` defines, to be deployed at `path`: Malformed for a bad
    path or value, InvalidWorkflow with every problem of the definition."""
    _check_path(path)
    check_value(definition)
    return load_workflow(definition)


def _check_path(path: object) -> None:
    if not isinstance(path, str) or not WORKFLOW_PATH_PATTERN.fullmatch(path):
        raise Malformed(f"workflow path must be '/'-separated names: {path!r}")
    if len(path) > MAX_PATH_LENGTH:
        raise Malformed(f"workflow path is longer than {MAX_PATH_LENGTH} characters")
    if path.endswith("/states"):
        # `GET /v1/workflows/{path}/states` counts a path's processes: a workflow there
        # could not be read.
        raise Malformed(f"a workflow path cannot end in '/states': {path!r}")
