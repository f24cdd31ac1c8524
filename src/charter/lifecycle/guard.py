"""The deploy guard: a definition that would strand processes or orphan their work is
not deployed, unless a migration covers what it would, or the deploy says it may
(`allow_stranding`, recorded with the revision)."""

from __future__ import annotations

from collections.abc import Mapping

from charter.core.errors import InvalidInput
from charter.core.errors.workflows import StrandsProcesses
from charter.core.jsontypes import JsonValue
from charter.db.database import Conn
from charter.dsl.model import Workflow
from charter.engine.registry import Deployment, Registry, parse_definition
from charter.engine.store import Store
from charter.lifecycle.plan import Planner, covered

FIRST_IDS = 10  # entries per list in a refusal's body


def deploy_guarded(
    conn: Conn,
    registry: Registry,
    path: str,
    definition: JsonValue,
    *,
    deployed_by: str | None,
    deployed_by_token: str | None,
    allow_stranding: bool = False,
    migration_map: Mapping[str, str] | None = None,
) -> Deployment:
    """Deploy `definition` at `path` as `Registry.deploy` does, after its plan: 409
    StrandsProcesses (with the plan's counts and first entries) when it strands what
    neither `migration_map` covers nor `allow_stranding` permits."""
    workflow = parse_definition(path, definition)
    if migration_map is not None:
        check_migration_map(workflow, migration_map)
    if not registry.is_current(Store(conn), path, definition):
        planner = Planner(conn, registry, path, definition, workflow)
        groups = planner.groups()
        left = groups if migration_map is None else covered(groups, migration_map)
        if (left.stranded or left.orphaned) and not allow_stranding:
            plan = planner.plan(limit=FIRST_IDS, replay=False, groups=groups)
            counts = plan.counts()
            said = ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items())
            raise StrandsProcesses(
                f"deploying this definition at {path!r} would leave {said}"
                + (" that the migration does not cover" if migration_map else "")
                + ": migrate them (a `migration` map), or deploy with allow_stranding",
                plan=plan.to_json(),
                uncovered={
                    "stranded": left.stranded_count(),
                    "orphaned_work": left.orphaned_count(),
                },
            )
    return registry.deploy(
        conn, path, definition,
        deployed_by=deployed_by, deployed_by_token=deployed_by_token,
        allow_stranding=allow_stranding, migration_map=migration_map,
    )  # fmt: skip


def check_migration_map(workflow: Workflow, state_map: Mapping[str, str]) -> None:
    """InvalidInput unless the new definition can carry out `state_map`: it grants
    `charter:migrate`, and every target is one of its states."""
    if workflow.migration is None:
        raise InvalidInput(
            "a deploy with a migration needs a definition with a `migration` block "
            '(`"migration": {"role": [...]}`): it names who may sign the moves'
        )
    unknown = sorted(set(state_map.values()) - set(workflow.states))
    if unknown:
        raise InvalidInput(
            f"the migration maps to {', '.join(map(repr, unknown))}, not a state of the "
            "new definition",
            problems=[{"pointer": f"/migration/map/{old}", "message": "not a state"}
                      for old, new in sorted(state_map.items()) if new in unknown],
        )  # fmt: skip
