"""The data the console is tested against: processes with a chain worth showing
(automated events with their causes, a pending timer, a spawn-free history), a process
whose data is hostile markup, a workflow, a run with a step journal, and tokens."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from charter.core.clock import FakeClock
from charter.core.ed25519 import SecretKey
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, Role, connect
from charter.engine import actors
from charter.firing.batch import Firer
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.outcomes import Outcome
from tests.integration.apikit import Harness, bearer
from tests.integration.machinekit import Machine, admit, create_automation, register
from tests.integration.test_verification import HASH_CHECK
from tests.integration.world import ONBOARDING, onboarding_definition

NOTES = "tests/notes"
# Markup that would run if the console ever put data into the page as HTML. Each payload
# sets a flag on window; the XSS test asserts no flag is set and the text shows verbatim.
IMG = "<img src=x onerror=\"window.__xss='img'\">"
SCRIPT = "</script><script>window.__xss='script'</script>"
SVG = "<svg onload=\"window.__xss='svg'\"></svg>"
HOSTILE = IMG + " " + SCRIPT + " " + SVG

NOTES_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "closed"],
    "roles": ["clerk"],
    "actions": {
        "create": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "mutate": {"$set": {"title": "{{ input.title }}"}},
        },
        "note": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "mutate": {"$push": {"notes": "{{ input.text }}"}},
        },
        "close": {"role": "clerk", "from": "open", "to": "closed"},
        "split": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "spawn": [
                {
                    "workflow": "tests/notes",
                    "process": "{{ process.id }}-child",
                    "action": "create",
                    "data": {"title": "child of {{ process.id }}"},
                }
            ],
        },
    },
}

LOOP = "tests/loop"
# A cycle (review sends work back) and an action two roles may take.
LOOP_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["draft", "review", "done"],
    "roles": ["clerk", "boss"],
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "draft"},
        "submit": {"role": "clerk", "from": "draft", "to": "review"},
        "reject": {"role": "boss", "from": "review", "to": "draft"},
        "accept": {"role": ["boss", "clerk"], "from": "review", "to": "done"},
    },
}


@dataclass(frozen=True)
class Seeded:
    """What the tests look for."""

    onboarding: str  # automated events (queued, then scheduled), a pending yearly timer
    hostile: str  # data, inputs and a note full of markup
    tampered: str  # an event rewritten under the engine's feet
    parent: str  # a process that spawned `{parent}-child`
    plain: list[str]  # a few errands processes for the list
    run_id: str  # a run with one step completed and one running
    admin: str  # a `*` token
    runs_only: str  # a token that may read runs and nothing else


def seed(h: Harness) -> Seeded:
    clock = h.clock
    assert isinstance(clock, FakeClock)
    h.deploy(ONBOARDING, onboarding_definition())
    h.deploy(NOTES, NOTES_DEFINITION)
    h.deploy(LOOP, LOOP_DEFINITION)
    h.actor("ada", "customer")
    automation = SecretKey.generate()
    with h.database.connection(Role.ENGINE) as conn, conn.transaction():
        actors.add_actor(conn, "automation", automation.public_key_hex, ["AUTOMATION"])

    plain = [h.open_process(amount)[0] for amount in (5, 50, 500)]
    approved, head = h.open_process(7)
    boss = h.keys["boss"]
    h.accept(sign(h.envelope(boss, approved, "approve", prev=head), boss))
    plain.append(approved)

    onboarding = _onboarding(h, automation, clock)
    hostile = _hostile(h)
    tampered = _tampered(h)
    return Seeded(
        onboarding=onboarding,
        hostile=hostile,
        tampered=tampered,
        parent=_parent(h),
        plain=plain,
        run_id=_run(h),
        admin=h.admin,
        runs_only=h.token("runs:read", principal="admin"),
    )


def _submit(h: Harness, who: str, process: str, action: str, input_: JsonObject, *,
            workflow: str, prev: str | None) -> str:  # fmt: skip
    key = h.keys[who]
    envelope = h.envelope(key, process, action, input_, prev=prev, workflow=workflow)
    return str(h.accept(sign(envelope, key))["hash"])


def _onboarding(h: Harness, automation: SecretKey, clock: FakeClock) -> str:
    """open → submit → start_screening (automatic) → escalate_review (48h timer)."""
    process = "onboarding-ada"
    head = _submit(h, "ada", process, "open", {"name": "Ada"}, workflow=ONBOARDING, prev=None)
    _submit(h, "ada", process, "submit_onboarding", {}, workflow=ONBOARDING, prev=head)
    firer = Firer(h.database, h.engine, automation, "console-test", clock)
    with h.database.connection(Role.WORKER) as conn, conn.transaction():
        [(work_id,)] = conn.execute(
            "SELECT id FROM charter.automation_queue WHERE process_id = %s", (process,)
        ).fetchall()
        queued = Bookkeeping(conn, "console-test", now=clock.now()).claim_queue_one(
            str(work_id), lease_seconds=60
        )
    assert queued is not None
    assert firer.fire(queued).outcome is Outcome.ACCEPTED
    clock.advance(timedelta(hours=48, minutes=1).total_seconds())
    with h.database.connection(Role.WORKER) as conn, conn.transaction():
        [(work_id,)] = conn.execute(
            "SELECT id FROM charter.scheduled_actions WHERE process_id = %s"
            " AND schedule_id = 'screening-deadline'",
            (process,),
        ).fetchall()
        timer = Bookkeeping(conn, "console-test", now=clock.now()).claim_scheduled_one(
            str(work_id), lease_seconds=60
        )
    assert timer is not None
    assert firer.fire(timer).outcome is Outcome.ACCEPTED
    return process


def _hostile(h: Harness) -> str:
    process = "hostile-1"
    head = _submit(h, "clerk", process, "create", {"title": HOSTILE}, workflow=NOTES, prev=None)
    _submit(h, "clerk", process, "note", {"text": HOSTILE, HOSTILE: 1}, workflow=NOTES, prev=head)
    return process


def _parent(h: Harness) -> str:
    process = "parent-1"
    head = _submit(h, "clerk", process, "create", {"title": "parent"}, workflow=NOTES, prev=None)
    _submit(h, "clerk", process, "split", {}, workflow=NOTES, prev=head)
    return process


def _tampered(h: Harness) -> str:
    """A process whose second event's input is rewritten behind the engine's back (as a
    superuser with triggers off could): its hash no longer recomputes."""
    process = "tampered-1"
    head = _submit(h, "clerk", process, "create", {"title": "honest"}, workflow=NOTES, prev=None)
    _submit(h, "clerk", process, "note", {"text": "paid 100"}, workflow=NOTES, prev=head)
    _rewrite(h.database, process, 2, "paid 100", "paid 1000")
    return process


def _rewrite(database: Database, process: str, seq: int, old: str, new: str) -> None:
    """Edit a stored envelope's text with triggers and the hash CHECK out of the way (the
    CHECK comes back NOT VALID, as in tests/integration/test_verification.py)."""
    with connect(database.url) as conn:
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute("ALTER TABLE charter.events DROP CONSTRAINT hash_is_envelope_hash")
        conn.execute(
            "UPDATE charter.events SET envelope = replace(envelope::text, %s, %s)::json"
            " WHERE process_id = %s AND seq = %s",
            (old, new, process, seq),
        )
        conn.execute(
            f"ALTER TABLE charter.events ADD CONSTRAINT hash_is_envelope_hash {HASH_CHECK}"
        )
        conn.commit()


def _run(h: Harness) -> str:
    """A manual run of a three-step plan: step one completed, step two running."""
    target = "console-target"
    machine = register(h, target, principal="admin")
    automation_id = create_automation(h.database, target=target, principal="admin")
    run = admit(h.database, automation_id, h, input={"order": "A-1"})
    claimed = machine.claimed()
    token = claimed["lease"]["token"]
    run_id = str(run.id)
    assert machine.step(run_id, "one", "start", token=token).status_code == 200
    done = machine.step(run_id, "one", "complete", token=token, output={"echo": 1})
    assert done.status_code == 200, done.text
    assert machine.step(run_id, "two", "start", token=token).status_code == 200
    _hostile_automation(h, automation_id, machine)
    return run_id


def _hostile_automation(h: Harness, automation_id: uuid.UUID, machine: Machine) -> None:
    """Markup in an automation's name, a webhook's fields and a failed run's error."""
    auth = bearer(h.admin)
    named = h.http.patch(f"/v1/automations/{automation_id}", json={"name": HOSTILE}, headers=auth)
    assert named.status_code == 200, named.text
    hook = {"source": HOSTILE, "event": HOSTILE}
    added = h.http.post(f"/v1/automations/{automation_id}/webhooks", json=hook, headers=auth)
    assert added.status_code == 201, added.text
    failing = admit(h.database, automation_id, h, input={"note": HOSTILE})
    claimed = machine.claimed()
    assert claimed["run"]["id"] == str(failing.id)
    failed = machine.run(str(failing.id), "fail", token=claimed["lease"]["token"], error=HOSTILE)
    assert failed.status_code == 200, failed.text
