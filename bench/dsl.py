"""Workflow DSL throughput: validate a 200-action workflow, evaluate a parsed condition
1,000,000 times, render a template, apply an action. Run: python bench/dsl.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from charter.core.jsontypes import JsonObject
from charter.dsl.expressions import Scope, parse_condition
from charter.dsl.mutate import apply_action
from charter.dsl.templates import compile_template
from charter.dsl.validate import load_workflow, validate_workflow
from common import Timing, measure, peak_rss_mib, print_results

SECONDS = 2.0
EVALUATIONS = 1_000_000
VALIDATIONS = 20
STATES = 50


def generated_workflow(actions: int = 200) -> dict[str, Any]:
    """A workflow with `actions` actions using every feature: a chain of states, roles,
    conditions, input schemas, templates in every operator, schedules, cancels, auto."""
    states = [f"s{i}" for i in range(STATES)]
    body: dict[str, Any] = {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "s0",
            "input": {"type": "object", "required": ["name"]},
            "mutate": {"$set": {"name": "{{ input.name }}"}},
        }
    }
    for i in range(1, actions - 1):
        source, target = states[i % STATES - 1], states[i % STATES]
        action: dict[str, Any] = {
            "role": ["clerk", "AUTOMATION"] if i % 3 else ["manager", "AUTOMATION"],
            "from": [source, target] if i % 4 else "*",
            "to": target,
            "when": f"amount >= {i} AND (input.kind IN ('a', 'b') OR tier IS NULL)",
            "input": {
                "type": "object",
                "properties": {"note": {"type": "string", "maxLength": 200}},
            },
            "mutate": {
                "$set": {f"step{i}.by": "{{ event.actor }}", f"step{i}.at": "{{ now }}"},
                "$inc": {f"counts.c{i}": 1},
                "$push": {f"log{i}": {"text": "{{ input.note }} at {{ process.id }}"}},
            },
            "schedule": [
                {"id": f"t{i}", "action": "ping", "in": f"{i}h", "data": {"n": i}},
                {"id": f"r{i}", "action": "ping", "every": "1d", "count": 3, "data": {}},
            ],
            "cancel": [f"t{i - 1}"] if i > 1 else [],
        }
        if i % 10 == 0:
            action["auto"] = {"data": {"reason": "bench", "cause": "{{ event.hash }}"}}
        body[f"a{i}"] = action
    body["ping"] = {"type": "update", "role": "AUTOMATION", "from": "*"}
    return {
        "dsl": 2,
        "states": states,
        "roles": ["clerk", "manager", "AUTOMATION"],
        "actions": body,
    }


def scope(document: JsonObject) -> Scope:
    return Scope(
        document=document,
        now=datetime(2026, 6, 18, 10, tzinfo=UTC),
        input={"kind": "b", "note": "checked the passport", "amount": 1200},
        actor={"id": "clerk-7", "roles": ["clerk"]},
        event={"hash": "ab" * 32, "actor": "cd" * 32, "at": "2026-06-18T10:00:00.000Z"},
        process={"id": "customer-123", "workflow": "customer/retail"},
    )


def timed(operation: Callable[[], object], runs: int) -> Timing:
    """`runs` timed calls after one warm-up (for operations too slow for `measure`)."""
    operation()
    latencies: list[float] = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        operation()
        latencies.append((time.perf_counter_ns() - started) / 1000)
    return Timing(runs, sum(latencies) / 1e6, latencies)


def evaluate_million(document: JsonObject) -> Timing:
    condition = parse_condition(
        "state IN ('s1', 's2') AND amount > 1000 AND input.kind = 'b' AND tier IS NULL"
    )
    context = scope(document)
    holds = condition.holds
    assert holds(context)
    started = time.perf_counter()
    for _ in range(EVALUATIONS):
        holds(context)
    elapsed = time.perf_counter() - started
    return Timing(EVALUATIONS, elapsed, [elapsed / EVALUATIONS * 1e6])


def main() -> None:
    doc = generated_workflow()
    assert validate_workflow(doc) == []
    workflow = load_workflow(doc)
    document: JsonObject = {"state": "s1", "amount": 1500, "name": "Ada", "counts": {"c2": 4}}
    context = scope(document)
    template = compile_template(
        {"who": "{{ event.actor }}", "text": "{{ input.note }} for {{ name }} ({{ amount }})"}
    )
    action = workflow.action("a2")

    results: dict[str, Timing] = {
        f"validate a {len(doc['actions'])}-action workflow": timed(
            lambda: validate_workflow(doc), VALIDATIONS
        ),
        "render a template (3 placeholders)": measure(
            lambda: template.render(context), seconds=SECONDS
        ),
        "apply_action (3 operators, 2 schedules)": measure(
            lambda: apply_action(workflow, action, document, context), seconds=SECONDS
        ),
    }
    million = evaluate_million(document)

    rows: list[dict[str, object]] = [
        {
            "operation": name,
            "ops/s": timing.per_second,
            "ms/op p50": timing.latency(50) / 1000,
            "ms/op p99": timing.latency(99) / 1000,
        }
        for name, timing in results.items()
    ]
    rows.append(
        {
            "operation": f"evaluate a 4-term condition, {EVALUATIONS:,} times",
            "ops/s": million.per_second,
            "ms/op p50": million.seconds / EVALUATIONS * 1000,
            "ms/op p99": "",
        }
    )
    print_results("Workflow DSL", rows)
    print(f"{EVALUATIONS:,} evaluations took {million.seconds:.2f} s")
    print(f"peak RSS: {peak_rss_mib():.1f} MiB")


if __name__ == "__main__":
    main()
