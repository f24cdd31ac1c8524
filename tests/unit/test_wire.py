"""The wire objects: written by `to_json`, read back by `parse` strictly, and described to
/openapi.json by models made from the same fields."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from charter import wire
from charter.api.wire_models import model, page_model
from charter.core.jsontypes import JsonObject
from charter.wire.automations import (
    Automation,
    AutomationDetail,
    Claim,
    Lease,
    Machine,
    Plan,
    PlanStep,
    RunStep,
    StepAnswer,
    Webhook,
)
from charter.wire.engine import Deployed, Process, Stats
from charter.wire.pages import Page, page_of

AT = datetime(2026, 6, 18, 10, 0, 0, 123000, tzinfo=UTC)  # what milliseconds keep
ID = "12345678-1234-5678-1234-567812345678"


class Refused(Exception):
    pass


def _automation() -> Automation:
    return Automation(
        id=ID,
        principal="ann",
        name="nightly",
        target="billing",
        enabled=True,
        created_at=AT,
        updated_at=AT,
    )


def test_to_json_writes_fields_in_order_with_rfc3339_times() -> None:
    assert wire.to_json(_automation()) == {
        "id": ID,
        "principal": "ann",
        "name": "nightly",
        "target": "billing",
        "enabled": True,
        "created_at": "2026-06-18T10:00:00.123Z",
        "updated_at": "2026-06-18T10:00:00.123Z",
    }
    assert list(wire.to_json(_automation())) == [
        "id",
        "principal",
        "name",
        "target",
        "enabled",
        "created_at",
        "updated_at",
    ]


def test_parse_reads_back_what_to_json_wrote_and_keeps_the_body() -> None:
    body = wire.to_json(_automation())
    parsed = wire.parse(Automation, body, Refused)
    assert parsed == _automation()
    assert parsed.raw is body


def test_a_record_is_written_as_a_shape_with_uuids_as_strings() -> None:
    class Row:
        id = uuid.UUID(ID)
        principal = "ann"
        name = "nightly"
        target = "billing"
        enabled = False
        created_at = AT.astimezone(timezone(timedelta(hours=2)))
        updated_at = AT
        extra = "not on the wire"

    written = wire.to_json(Row(), Automation)
    assert written["id"] == ID
    assert written["created_at"] == "2026-06-18T10:00:00.123Z"
    assert "extra" not in written


@pytest.mark.parametrize(
    ("key", "value"),
    [("enabled", "yes"), ("created_at", "2026-06-18 10:00"), ("created_at", None), ("id", 1)],
)
def test_a_mistyped_field_is_refused(key: str, value: object) -> None:
    body: JsonObject = {**wire.to_json(_automation()), key: value}  # type: ignore[dict-item]
    with pytest.raises(Refused, match=key):
        wire.parse(Automation, body, Refused)


def test_a_missing_field_is_refused_even_when_it_may_be_null() -> None:
    step = RunStep(
        step_id="a",
        position=0,
        status="running",
        idempotency_key="ab" * 32,
        output=None,
        error=None,
        attempts=1,
        started_at=AT,
        finished_at=None,
    )
    body = wire.to_json(step)
    assert wire.parse(RunStep, body, Refused) == step
    del body["finished_at"]
    with pytest.raises(Refused, match="the run step in the response has no 'finished_at'"):
        wire.parse(RunStep, body, Refused)


def test_times_are_aware() -> None:
    body = {**wire.to_json(_automation()), "created_at": "2026-06-18T12:00:00+02:00"}
    parsed = wire.parse(Automation, body, Refused)
    assert parsed.created_at == datetime(2026, 6, 18, 10, tzinfo=UTC)
    assert parsed.created_at.tzinfo is not None


def test_a_flattened_object_shares_its_keys_with_the_detail() -> None:
    detail = AutomationDetail(automation=_automation(), schedules=(), webhooks=(), plan=None)
    body = wire.to_json(detail)
    assert body == {**wire.to_json(_automation()), "schedules": [], "webhooks": [], "plan": None}
    assert wire.parse(AutomationDetail, body, Refused) == detail


def test_keys_of_their_own_and_optional_keys() -> None:
    step: JsonObject = {"id": "a", "actionId": "http.request", "input": {"url": "x"}}
    plan = wire.parse(
        Plan,
        {
            "automation_id": ID,
            "version": 1,
            "steps": [step],
            "allowlist": None,
            "limits": None,
            "updated_at": "2026-06-18T10:00:00.000Z",
        },
        Refused,
    )
    assert plan.steps == (PlanStep(id="a", action_id="http.request", input={"url": "x"}),)
    assert plan.steps[0].retry_on == ()
    assert wire.to_json(plan.steps[0]) == {**step, "retry": None}


def test_a_key_only_the_creating_answer_has_is_left_out_when_unknown() -> None:
    hook = Webhook(
        id=ID,
        automation_id=ID,
        source="github",
        event=None,
        enabled=True,
        has_secret=True,
        created_at=AT,
        updated_at=AT,
    )
    assert "secret" not in wire.to_json(hook)
    assert wire.to_json(hook)["has_secret"] is True
    created = wire.parse(Webhook, {**wire.to_json(hook), "secret": "whsec_AAAA"}, Refused)
    assert created.secret == "whsec_AAAA"
    assert "whsec" not in repr(created)


def test_a_machine_lists_its_own_keys_only_when_given() -> None:
    row = {
        "id": "m-1",
        "target": "billing",
        "principal": "ann",
        "thumbprint": "t",
        "public_jwk": {"kty": "OKP"},
        "created_at": AT,
        "disabled_at": None,
    }
    assert "last_seen_at" not in wire.to_json(row, Machine)
    listed = wire.to_json({**row, "last_seen_at": None, "runs_in_progress": 0}, Machine)
    assert (listed["last_seen_at"], listed["runs_in_progress"]) == (None, 0)


def test_the_models_of_the_document_follow_the_fields_and_their_meta() -> None:
    schema = model(Webhook).model_json_schema()
    assert "secret" not in schema["properties"]
    assert schema["properties"]["has_secret"]["const"] is True
    assert schema["properties"]["id"]["pattern"].startswith("^[0-9a-fA-F]{8}")
    created = model(Webhook, creating=True).model_json_schema()
    assert "secret" in created["required"]
    assert model(RunStep).__name__ == "Step"
    assert model(PlanStep).model_json_schema()["required"] == ["id", "actionId", "input"]


def test_a_detail_key_is_only_in_the_detail_model_and_defaults_when_absent() -> None:
    process: JsonObject = {
        "id": "p-1",
        "workflow": "a/b",
        "state": "open",
        "data": {},
        "head": None,
        "seq": 0,
        "parent": None,
        "created_at": None,
        "updated_at": None,
    }
    assert wire.parse(Process, process, Refused).children == ()
    assert wire.parse(Process, {**process, "children": ["c"]}, Refused).children == ("c",)
    assert "children" not in model(Process).model_json_schema()["properties"]
    assert "children" in model(Process, detail=True).model_json_schema()["required"]


def test_required_keys_and_items_the_document_describes_as_a_wire_object() -> None:
    schema = model(Deployed).model_json_schema()
    assert {"warnings", "unchanged"} <= set(schema["required"])
    assert schema["properties"]["warnings"]["items"] == {"$ref": "#/$defs/Warning"}
    body: JsonObject = {
        "path": "a",
        "revision": 1,
        "version": "v",
        "deployed_at": "2026-06-18T10:00:00.000Z",
        "deployed_by": None,
    }
    deployed = wire.parse(Deployed, body, Refused)
    assert (deployed.warnings, deployed.unchanged) == ((), False)
    warned = wire.parse(Deployed, {**body, "warnings": [{"pointer": "/x"}]}, Refused)
    assert warned.warnings == ({"pointer": "/x"},)


def test_a_map_of_counts_is_read_strictly() -> None:
    body: JsonObject = {
        "processes": [{"workflow": "a", "state": "open", "count": 2}],
        "timers_due_next_hour": 0,
        "queue": {"pending": 1},
        "failed_work": 0,
        "as_of": "2026-06-18T10:00:00.000Z",
        "runs": {},
        "machines_seen_recently": None,
    }
    stats = wire.parse(Stats, body, Refused)
    assert stats.processes == {("a", "open"): 2}
    assert wire.to_json(stats) == body
    with pytest.raises(Refused, match="queue"):
        wire.parse(Stats, {**body, "queue": {"pending": True}}, Refused)


def test_a_machine_answer_leaves_out_the_keys_its_server_mapping_has_not() -> None:
    step = RunStep(
        step_id="a",
        position=0,
        status="running",
        idempotency_key="ab" * 32,
        output=None,
        error=None,
        attempts=1,
        started_at=AT,
        finished_at=None,
    )
    lease = SimpleNamespace(run_id=uuid.UUID(ID), token=uuid.UUID(ID), expires_at=AT)
    assert list(wire.to_json({"step": step}, StepAnswer)) == ["step"]
    renewed = wire.to_json({"step": step, "next": step, "lease": lease}, StepAnswer)
    assert renewed["lease"] == {"token": ID, "expires_at": "2026-06-18T10:00:00.123Z"}
    parsed = wire.parse(StepAnswer, {"step": wire.to_json(step)}, Refused)
    assert (parsed.step, parsed.next, parsed.lease) == (step, None, None)
    assert wire.parse(Lease, renewed["lease"], Refused).expires_at == AT


def test_a_claim_always_has_started_and_traceparent_in_the_document() -> None:
    schema = model(Claim).model_json_schema()
    assert schema["required"] == ["run", "lease", "journal", "started", "traceparent"]


def test_a_page_of_a_wire_object_reads_its_items_strictly() -> None:
    body: JsonObject = {"items": [wire.to_json(_automation())], "next_cursor": "c"}
    page = wire.parse(page_of(Automation), body, Refused)
    assert (page.items, page.next_cursor, page.raw) == ((_automation(),), "c", body)
    assert wire.to_json(page, Page[Automation]) == body
    assert wire.parse(Page[Automation], {"items": []}, Refused).next_cursor is None
    with pytest.raises(Refused, match="the automation in the response has no 'principal'"):
        wire.parse(Page[Automation], {"items": [{"id": ID}], "next_cursor": None}, Refused)
    with pytest.raises(Refused, match="the page in the response has no list 'items'"):
        wire.parse(Page[Automation], {"items": {}, "next_cursor": None}, Refused)


def test_a_list_model_is_the_page_with_its_old_key_deprecated() -> None:
    schema = page_model(model(Machine), "Machines", paged=False, old_key="machines")
    document = schema.model_json_schema()
    assert document["required"] == ["items", "next_cursor"]
    assert document["properties"]["machines"]["deprecated"] is True
    assert document["properties"]["next_cursor"]["description"].startswith("Always null")
