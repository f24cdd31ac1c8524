"""Prometheus metrics of verification through the API (served at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter

from charter.audit.evidence import VerificationReport
from charter.core.metrics import REGISTRY

VERIFICATIONS = Counter(
    "charter_verifications",
    "Processes verified through the API, by result (ok, problems).",
    ["result"],
    registry=REGISTRY,
)
VERIFICATION_PROBLEMS = Counter(
    "charter_verification_problems",
    "Problems those verifications found, by code (bad_signature, provenance_..., ...).",
    ["code"],
    registry=REGISTRY,
)


def count_verification(report: VerificationReport) -> None:
    VERIFICATIONS.labels(result="ok" if report.ok else "problems").inc()
    for problem in report.problems:
        VERIFICATION_PROBLEMS.labels(code=problem.code).inc()
