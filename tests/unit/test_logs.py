"""Log lines: text with timestamp, level and logger; JSON with those plus the context
(request, process, action, work, run); context that never outlives its block."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from charter.logs import QUIET_LIBRARIES, configure_logging, current, log_context, mark_logged

TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<rest>.*)$"
)


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    out = io.StringIO()
    yield out
    root.handlers[:] = saved[1]
    root.setLevel(saved[0])
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.NOTSET)
    logging.getLogger("uvicorn.access").disabled = False


def test_text_lines_carry_timestamp_level_logger_and_context(stream: io.StringIO) -> None:
    configure_logging("info", "text", stream)
    logging.getLogger("charter.test").info("plain %s", "line")
    with log_context(request_id="r-1", process_id="p-9", action="approve"):
        logging.getLogger("charter.test").warning("in context")
    first, second = stream.getvalue().splitlines()
    match = TEXT_LINE.match(first)
    assert match
    assert match["level"] == "INFO"
    assert match["logger"] == "charter.test"
    assert match["rest"] == "plain line"
    match = TEXT_LINE.match(second)
    assert match
    assert match["level"] == "WARNING"
    assert match["rest"] == "in context [request_id=r-1 process_id=p-9 action=approve]"


def test_json_lines_carry_the_context_and_the_traceback(stream: io.StringIO) -> None:
    configure_logging("debug", "json", stream)
    with log_context(request_id="r-2", work_id="w-1", run_id=None):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("charter.worker").exception("fire failed")
    logging.getLogger("charter.worker").debug("after", extra={"route": "/v1/x"})
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["level"] == "ERROR"
    assert first["logger"] == "charter.worker"
    assert first["message"] == "fire failed"
    assert first["request_id"] == "r-2"
    assert first["work_id"] == "w-1"
    assert "run_id" not in first  # None leaves a field unset
    assert "RuntimeError: boom" in first["exc_info"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert second["message"] == "after"
    assert second["route"] == "/v1/x"
    assert "request_id" not in second  # the block ended


def test_the_level_filters_and_libraries_stay_quiet_at_info(stream: io.StringIO) -> None:
    configure_logging("warning", "text", stream)
    logging.getLogger("charter.test").info("hidden")
    logging.getLogger("charter.test").error("shown")
    assert [line.split(" ", 1)[1] for line in stream.getvalue().splitlines()] == [
        "ERROR charter.test: shown"
    ]
    configure_logging("info", "text", stream)  # reconfiguring replaces, never adds
    logging.getLogger("httpx").info("HTTP Request: GET ...")
    logging.getLogger("uvicorn.access").warning("127.0.0.1 GET / 200")
    logging.getLogger("charter.test").info("once")
    assert stream.getvalue().count("once") == 1
    assert "HTTP Request" not in stream.getvalue()
    assert "127.0.0.1" not in stream.getvalue()


def test_an_exception_already_logged_is_not_logged_again_by_the_server(
    stream: io.StringIO,
) -> None:
    configure_logging("info", "text", stream)
    logged, other = RuntimeError("first"), RuntimeError("second")
    mark_logged(logged)
    server = logging.getLogger("uvicorn.error")
    server.error("Exception in ASGI application", exc_info=logged)
    server.error("Exception in ASGI application", exc_info=other)
    assert "RuntimeError: first" not in stream.getvalue()
    assert "RuntimeError: second" in stream.getvalue()


def test_context_is_restored_after_nested_blocks() -> None:
    assert current("process_id") is None
    with log_context(process_id="outer"):
        with log_context(process_id="inner", action="a"):
            assert (current("process_id"), current("action")) == ("inner", "a")
        assert (current("process_id"), current("action")) == ("outer", None)
    assert current("process_id") is None


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging("loud")
