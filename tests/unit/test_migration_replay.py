"""Replay of `charter:migrate` events from a bundle, with no database: accepted under the
`migration` block of the workflow version the event recorded, rejected under a version
without one or without the target state (`workflow_version` is not signed, so only replay
can tell)."""

from __future__ import annotations

import copy
import json
from typing import Any

from charter.audit.bundle import bundle_json
from charter.audit.verify_stored import verify_bundle
from charter.core import ijson
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonObject
from charter.dsl.canonical import version_hash
from tests.unit.chains import MIGRATED, MIGRATED_PATH, Chain, Signer

KEY = SecretKey(bytes(range(32)))
OPS = Signer(SecretKey(bytes(range(2, 34))), "olga", ("ops",))


def _migrated_bundle() -> Any:
    """open → ship → charter:migrate to `delivered` (seq 3), as an auditor receives it."""
    chain = Chain(KEY, "order-1", MIGRATED_PATH)
    chain.submit("open")
    chain.submit("ship")
    chain.submit("charter:migrate", {"state": "delivered", "reason": "OPS-42"}, signer=OPS)
    assert chain.row is not None
    assert chain.row.state == "delivered"
    return ijson.loads(json.dumps(bundle_json(chain.evidence())))


def _recorded_under(bundle: Any, definition: JsonObject) -> None:
    """Say the migration (seq 3) was decided under `definition`, which the bundle carries."""
    version = version_hash(definition)
    bundle["workflows"][version] = definition
    bundle["events"][2]["workflow_version"] = version


def test_a_migration_replays_under_its_recorded_version() -> None:
    bundle = _migrated_bundle()
    report = verify_bundle(bundle, replay=True)
    assert report.ok, report.problems
    assert report.events == 3


def test_a_migration_under_a_version_without_a_migration_block_is_rejected() -> None:
    bundle = _migrated_bundle()
    without = copy.deepcopy(MIGRATED)
    del without["migration"]
    _recorded_under(bundle, without)
    assert verify_bundle(bundle).ok  # the chain itself is intact
    report = verify_bundle(bundle, replay=True)
    assert [(p.seq, p.code) for p in report.problems] == [(3, "replay_rejected")]
    assert "unknown_action" in report.problems[0].message
    assert "no `migration` block" in report.problems[0].message


def test_a_migration_to_a_state_its_version_lacks_is_rejected() -> None:
    bundle = _migrated_bundle()
    other = copy.deepcopy(MIGRATED)
    other["states"] = ["open", "shipped", "done"]
    other["actions"]["deliver"]["to"] = "done"  # type: ignore[index, call-overload]
    _recorded_under(bundle, other)
    report = verify_bundle(bundle, replay=True)
    assert [(p.seq, p.code) for p in report.problems] == [(3, "replay_rejected")]
    assert "invalid_input" in report.problems[0].message
    assert "'delivered' is not one of" in report.problems[0].message


def test_a_migration_recorded_for_an_actor_without_the_role_is_rejected() -> None:
    bundle = _migrated_bundle()
    bundle["events"][2]["actor_roles"] = ["clerk"]
    report = verify_bundle(bundle, replay=True)
    assert [(p.seq, p.code) for p in report.problems] == [(3, "replay_rejected")]
    assert "forbidden_role" in report.problems[0].message


def test_a_migration_recorded_as_the_automation_actor_s_is_rejected() -> None:
    """Even with a migration role recorded, the automation actor never migrates."""
    bundle = _migrated_bundle()
    bundle["events"][2]["actor_id"] = "automation"
    report = verify_bundle(bundle, replay=True)
    assert (3, "replay_rejected") in {(p.seq, p.code) for p in report.problems}
    assert any("never signs 'charter:migrate'" in p.message for p in report.problems)
