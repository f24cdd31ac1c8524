"""Whole numbers from outside the API (query parameters, headers) with thousands of digits:
each is a 4xx with its route's own code, never a 500, and the error answer stays I-JSON.

Python's `int()` raises ValueError past 4,300 digits, and an int of a few hundred digits
cannot become a float; every such number is bounded by its length before it is read.
The transparency log's paths and parameters are covered in test_log_routes.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from charter.cli.main import app as cli
from charter.core import ijson
from charter.db.database import Database
from charter.operator.hub import HintHub
from tests.integration.apikit import Harness, bearer, make_harness
from tests.integration.liveserver import live_server

HUGE = "9" * 5000
LONG = "9" * 400  # int() reads it, float() of that int overflows
PAST_2_53 = "1" * 20  # an int, but not one an I-JSON answer may carry


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


def _refusal(response: httpx.Response) -> tuple[int, str]:
    body = ijson.loads(response.content)  # strict: no integer past ±(2**53 - 1)
    assert isinstance(body, dict), body
    error = body["error"]
    assert isinstance(error, dict), body
    return response.status_code, str(error["code"])


OPERATOR_PAGES = ["/v1/processes", "/v1/automation/scheduled", "/v1/automation/queue"]
CONTROL_PAGES = ["/v1/automations", "/v1/runs"]


@pytest.mark.parametrize("number", [HUGE, "-" + HUGE, LONG, PAST_2_53, "many", "0", "501"])
@pytest.mark.parametrize("path", OPERATOR_PAGES)
def test_an_operator_page_size_out_of_range_is_invalid_limit(
    h: Harness, path: str, number: str
) -> None:
    response = h.http.get(path, params={"limit": number}, headers=bearer(h.admin))
    assert _refusal(response) == (400, "invalid_limit")
    assert len(response.content) < 1000  # the number is not echoed back


@pytest.mark.parametrize("number", [HUGE, "-" + HUGE, LONG, PAST_2_53, "many", "0", "501"])
@pytest.mark.parametrize("path", CONTROL_PAGES)
def test_an_automations_page_size_out_of_range_is_malformed(
    h: Harness, path: str, number: str
) -> None:
    response = h.http.get(path, params={"limit": number}, headers=bearer(h.admin))
    assert _refusal(response) == (400, "malformed")
    assert len(response.content) < 1000


@pytest.mark.parametrize("path", OPERATOR_PAGES + CONTROL_PAGES)
def test_page_sizes_in_range_are_still_read(h: Harness, path: str) -> None:
    for number in ("1", "500"):
        response = h.http.get(path, params={"limit": number}, headers=bearer(h.admin))
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("timeout", [HUGE, LONG, "-" + HUGE])
def test_a_huge_wait_timeout_is_malformed(h: Harness, timeout: str) -> None:
    response = h.http.post("/v1/events", params={"wait": "log", "timeout": timeout}, content=b"{}")
    assert _refusal(response) == (400, "malformed")


@pytest.mark.parametrize("length", [HUGE, LONG, "0" * 5000 + "1" + "0" * 30])
@pytest.mark.parametrize("path", ["/v1/events", "/events", "/v1/automations"])
def test_a_huge_content_length_is_too_large(h: Harness, path: str, length: str) -> None:
    response = h.http.post(path, content=b"{}", headers={"content-length": length})
    assert _refusal(response) == (413, "too_large")
    assert len(response.content) < 1000


def test_a_content_length_with_leading_zeros_is_read(h: Harness) -> None:
    response = h.http.post(
        "/v1/events", content=b"{}", headers={"content-length": "0" * 5000 + "2"}
    )
    assert _refusal(response) == (400, "malformed")  # the body was read: `{}` is no event


def _delivery(timestamp: str) -> dict[str, str]:
    return {
        "X-Charter-Principal": "p-huge",
        "X-Charter-Target": "machine-1",
        "Content-Type": "application/json",
        "webhook-id": "msg_huge",
        "webhook-timestamp": timestamp,
        "webhook-signature": "v1," + "A" * 43 + "=",
    }


@pytest.mark.parametrize("timestamp", [HUGE, LONG, PAST_2_53, "0" * 5000 + "1"])
def test_a_webhook_timestamp_of_many_digits_is_bad_signature(h: Harness, timestamp: str) -> None:
    response = h.http.post("/events", content=b'{"source": "shop"}', headers=_delivery(timestamp))
    assert _refusal(response) == (401, "bad_signature")


@pytest.fixture(scope="module")
def url(h: Harness) -> Iterator[str]:
    with live_server(h.http.app) as base:
        yield base


def _first_message(base: str, token: str, last_event_id: str) -> dict[str, Any]:
    headers = bearer(token) | {"Last-Event-ID": last_event_id}
    timeout = httpx.Timeout(10.0)
    with httpx.stream("GET", f"{base}/v1/stream", headers=headers, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        fields: dict[str, Any] = {}
        for line in response.iter_lines():
            if not line:
                if "event" in fields:
                    return fields
                continue
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    raise AssertionError("the stream ended without a message")


@pytest.mark.parametrize("number", [HUGE, LONG, "-" + HUGE])
def test_a_last_event_id_of_many_digits_asks_for_a_reset(h: Harness, url: str, number: str) -> None:
    hub: HintHub = cast(FastAPI, h.http.app).state.hints
    epoch = hub.epoch
    message = _first_message(url, h.admin, f"{epoch}-{number}")
    assert message["event"] == "reset"


@pytest.mark.parametrize(
    "args",
    [
        ["processes", "list", "--limit", HUGE],
        ["automations", "list", "--limit", HUGE],
        ["runs", "list", "--limit", HUGE],
        ["timers", "--limit", HUGE],
    ],
    ids=lambda args: " ".join(args[:-2]),
)
def test_the_cli_refuses_an_option_of_thousands_of_digits_as_a_usage_error(
    args: list[str],
) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--limit'" in result.output


def test_a_limit_given_twice_is_malformed(h: Harness) -> None:
    response = h.http.get("/v1/processes?limit=5&limit=6", headers=bearer(h.admin))
    assert _refusal(response) == (400, "malformed")
