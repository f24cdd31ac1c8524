"""With no tracer provider installed (the otel extra absent, or OTEL_* not asking for
traces), spans do not record and nothing carries a trace context: a run is admitted with
no `traceparent`, and the machine's requests and `http.request` send none."""

from __future__ import annotations

from charter.tracing import current_traceparent, run_carrier, span, traceparent


def test_without_a_provider_spans_do_not_record_and_carry_no_context() -> None:
    with span("charter.run.step", {"charter.step": "one"}) as current:
        assert not current.is_recording()
        assert current_traceparent() is None
        assert traceparent() == {}


def test_a_run_without_a_stored_context_gets_an_empty_carrier() -> None:
    assert run_carrier(None) == {}
    stored = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert run_carrier(stored) == {"traceparent": stored}
