"""The demo's closing hint is a command that works as printed: it names the API only
when the CLI would not find it by default."""

from __future__ import annotations

from pathlib import Path

from charter.demo import explore_command


def test_the_default_api_is_not_named() -> None:
    assert explore_command("http://127.0.0.1:8420", Path("/h/admin-token"), "demo-1") == (
        "CHARTER_TOKEN=$(cat /h/admin-token) charter history demo-1"
    )


def test_another_port_is_named() -> None:
    assert explore_command("http://127.0.0.1:8421", Path("/h/admin-token"), "demo-1") == (
        "CHARTER_API_URL=http://127.0.0.1:8421 CHARTER_TOKEN=$(cat /h/admin-token) "
        "charter history demo-1"
    )
