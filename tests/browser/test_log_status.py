"""The process page's transparency-log card, in a real browser: where the process stands
in the log when the API has one, and no card at all for a token without `log:read`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from charter.core.envelope import sign
from charter.db.database import Database, Role, connect
from charter.tlog.config import LogSettings
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import Ed25519Signer
from charter.tlog.sequencer import Sequencer
from tests.browser.test_console import sign_in
from tests.integration.liveserver import live_server
from tests.integration.machinekit import machine_harness


@dataclass
class Logged:
    base: str
    admin: str
    reader: str  # processes:read only
    partly: str  # seq 1 logged, seq 2 not yet
    unlogged: str  # nothing logged yet
    size: int


@pytest.fixture(scope="module")
def logged(database: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logged]:
    home: Path = tmp_path_factory.mktemp("console-log")
    settings = LogSettings(home / "log", home / "log.skey", home / "log.salt")
    h = machine_harness(database)
    h.http.app.state.log_settings = settings  # type: ignore[attr-defined]
    partly, head = h.open_process(5)
    log = LogDirectory(settings.directory)
    sequencer = Sequencer(database.url, log, Ed25519Signer.generate("console.test/log"), bytes(32))
    with connect(database.url, Role.SEQUENCER) as conn:
        sequencer.tick(conn)
    sequencer.close()
    boss = h.keys["boss"]
    h.accept(sign(h.envelope(boss, partly, "approve", prev=head), boss))
    unlogged, _ = h.open_process(6)
    with live_server(h.http.app) as base:
        yield Logged(base, h.admin, h.token("processes:read"), partly, unlogged, log.size())


def test_the_card_says_how_far_the_process_is_logged(page: Page, logged: Logged) -> None:
    sign_in(page, logged.base, logged.admin, "/console/processes/" + logged.partly)
    card = page.locator("#log-status")
    expect(card.locator("#log-logged")).to_contain_text("Logged up to seq 1 (leaf ")
    expect(card).to_contain_text(f"in the checkpoint of size {logged.size}.")
    expect(card).to_contain_text("1 newer event(s) not logged yet.")
    expect(card).to_contain_text("console.test/log")
    # This log has no policy naming a witness: the card says what that cannot catch.
    expect(card.locator("#log-witnessing")).to_have_text(
        "Witnessing: no witness: a rollback or fork of the log is undetectable."
    )
    page.goto(logged.base + "/console/processes/" + logged.unlogged)
    expect(page.locator("#log-logged")).to_have_text("Not logged yet.")


def test_a_token_without_log_read_sees_no_card(page: Page, logged: Logged) -> None:
    sign_in(page, logged.base, logged.reader, "/console/processes/" + logged.partly)
    expect(page.locator("#events li.event")).to_have_count(2)
    expect(page.locator("#log-status")).to_have_count(0)
