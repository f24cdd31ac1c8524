"""The log's HTTP routes over a sequenced log directory, in process: every tile is served
immutable, entry bundles gzip-compressed when the client accepts it; and numbers from
outside (the log routes and the witness) are bounded before they are converted, so a
path, a size line or a header with thousands of digits is a 400 with the route's code,
never a 500 (Python's int() refuses strings of more than 4,300 digits)."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.core.config import Settings
from charter.db.database import Role, connect
from charter.tlog.config import LogSettings
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import Ed25519Signer
from charter.tlog.sequencer import Sequencer
from charter.witness.server import create_witness_app
from tests.integration.world import (
    ONBOARDING,
    World,
    new_process_id,
    onboarding_definition,
    scratch_database,
)
from tests.unit.witnesskit import TestLog, make_witness

HUGE = "9" * 5000
ORIGIN = "charter.test/bounds"


EVENTS = 3  # one partial tile of width 3 at each kind
IMMUTABLE = "public, max-age=31536000, immutable"


@pytest.fixture(scope="module")
def api(
    pg_admin_url: str, template_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("routes")
    log = LogDirectory(home / "log")
    with scratch_database(pg_admin_url, template_database) as database:
        world = World(database)
        world.deploy(ONBOARDING, onboarding_definition())
        world.actor("ada", "customer")
        for _ in range(EVENTS):
            world.submit("ada", "open", new_process_id(), None, input_={"name": "Ada"})
        sequencer = Sequencer(database.url, log, Ed25519Signer.generate(ORIGIN), bytes(32))
        with connect(database.url, Role.SEQUENCER) as conn:
            sequencer.tick(conn)  # switches the queue on: the events are backfilled
            sequencer.tick(conn)
        sequencer.close()
        assert log.size() == EVENTS
        app = create_app(database, engine=world.engine, settings=Settings())
        app.state.log_settings = LogSettings(
            directory=log.root, key_file=home / "log.skey", salt_file=home / "log.salt", public=True
        )
        with TestClient(app) as client:
            yield client


@pytest.mark.parametrize("path", [f"tile/0/000.p/{EVENTS}", f"tile/entries/000.p/{EVENTS}"])
def test_partial_tiles_are_served_immutable(api: TestClient, path: str) -> None:
    answer = api.get(f"/v1/log/{path}")
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == IMMUTABLE


def test_entry_bundles_are_gzipped_for_a_client_that_accepts_it(api: TestClient) -> None:
    path = f"/v1/log/tile/entries/000.p/{EVENTS}"
    plain = api.get(path, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert len(plain.content) == EVENTS * (2 + 88)
    with api.stream("GET", path, headers={"Accept-Encoding": "gzip, br"}) as answer:
        raw = b"".join(answer.iter_raw())
        assert answer.headers["content-encoding"] == "gzip"
        assert answer.headers["vary"] == "Accept-Encoding"
    assert gzip.decompress(raw) == plain.content
    refused = api.get(path, headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers
    # Hash tiles are random bytes: never compressed.
    tile = api.get(f"/v1/log/tile/0/000.p/{EVENTS}", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in tile.headers


@pytest.mark.parametrize(
    "path",
    [
        "/v1/log/tile/0/" + "x000/" * 1500 + "000",
        "/v1/log/tile/entries/" + "x000/" * 1500 + "000",
        "/v1/log/tile/0/000.p/" + HUGE,
        "/v1/log/tile/entries/000.p/" + HUGE,
        "/v1/log/tile/" + HUGE + "/000",
    ],
)
def test_a_tile_path_with_thousands_of_digits_is_malformed(api: TestClient, path: str) -> None:
    answer = api.get(path)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "tile_path_malformed"


def test_a_tile_index_of_eight_digit_groups_is_malformed(api: TestClient) -> None:
    answer = api.get("/v1/log/tile/0/" + "x999/" * 7 + "999")
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "tile_path_malformed")


@pytest.mark.parametrize(
    ("route", "code"),
    [
        (f"/v1/log/consistency?from={HUGE}&to=1", "malformed"),
        (f"/v1/log/consistency?from=0&to={HUGE}", "malformed"),
        (f"/v1/log/proof/{'0' * 64}?size={HUGE}", "malformed"),
    ],
)
def test_huge_query_numbers_of_the_log_routes_are_refused(
    api: TestClient, route: str, code: str
) -> None:
    answer = api.get(route)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["code"] == code


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[tuple[TestClient, TestLog]]:
    log = TestLog(ORIGIN)
    with TestClient(create_witness_app(make_witness(tmp_path, log))) as client:
        yield client, log


def test_a_witness_request_with_a_huge_old_size_is_malformed(
    witness: tuple[TestClient, TestLog],
) -> None:
    client, log = witness
    body = f"old {HUGE}\n\n".encode() + log.note(1)
    answer = client.post("/add-checkpoint", content=body)
    assert answer.status_code == 400
    assert answer.text.startswith("witness_request_malformed:")


def test_a_checkpoint_with_a_huge_size_is_malformed_before_any_signature_is_checked(
    witness: tuple[TestClient, TestLog],
) -> None:
    client, _ = witness
    # Signed by nobody the witness knows: the size line is refused first, as a 400.
    body = f"old 0\n\n{ORIGIN}\n{HUGE}\n{'A' * 43}=\n\n— {ORIGIN} AAAAAAAA\n".encode()
    answer = client.post("/add-checkpoint", content=body)
    assert answer.status_code == 400
    assert answer.text.startswith("checkpoint_malformed:")


def test_a_huge_content_length_is_too_large(witness: tuple[TestClient, TestLog]) -> None:
    client, log = witness
    answer = client.post(
        "/add-checkpoint", content=log.request(0, 1), headers={"content-length": HUGE}
    )
    assert answer.status_code == 413


def test_status_reports_a_log_without_witness_as_undetectable(api: TestClient) -> None:
    status = api.get("/v1/log/status").json()
    assert status["size"] == EVENTS
    assert status["witnessing"] == {
        "mode": "none",
        "witnesses": [],
        "warning": "no witness: a rollback or fork of the log is undetectable",
    }
