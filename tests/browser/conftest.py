"""Browser tests of the console: Playwright driving Debian's Chromium against a live
server on a seeded database.

Browsers cannot be downloaded here, so Playwright launches the system Chromium
(`apt-get install chromium`, which .ci/run does when it is missing). Without it every
test here is skipped with that reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from charter.db.database import Database
from tests.browser.world import Seeded, seed
from tests.integration.apikit import Harness
from tests.integration.liveserver import live_server
from tests.integration.machinekit import machine_harness

CHROMIUM = Path(os.environ.get("CHARTER_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture(scope="module")
def stack(database: Database) -> Iterator[tuple[str, Seeded, Harness]]:
    """(base URL, what was seeded, the harness): the app on a real socket, data in place."""
    harness = machine_harness(database)
    data = seed(harness)
    with live_server(harness.http.app) as base:
        yield base, data, harness


@pytest.fixture
def seeded(stack: tuple[str, Seeded, Harness]) -> tuple[str, Seeded]:
    return stack[0], stack[1]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Module scope, not session: the sync API keeps an asyncio loop running in this
    # thread while it is started, and later tests call asyncio.run().
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install -y chromium to run these")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (empty sessionStorage) per test; uncaught page errors and
    anything the Content-Security-Policy refused fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if "Content Security Policy" in message.text or "Refused to" in message.text
            else None
        ),
    )
    try:
        yield tab
    finally:
        context.close()
    assert errors == [], f"errors in the page: {errors}"
