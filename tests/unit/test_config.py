from __future__ import annotations

from pathlib import Path

import pytest

from charter.core.config import Settings
from charter.core.errors import ConfigurationError


def test_defaults_without_environment() -> None:
    settings = Settings.from_env({"HOME": "/home/ada"})
    assert settings.database_url is None
    assert settings.api_url == "http://127.0.0.1:8420"
    assert settings.clock_skew_seconds == 300.0
    assert settings.max_body_bytes == 2 * 1024 * 1024


def test_environment_is_read() -> None:
    settings = Settings.from_env(
        {
            "CHARTER_DATABASE_URL": "postgresql://db/charter",
            "CHARTER_HOME": "/srv/charter",
            "AUTOMATION_ACTOR_SK": "ab" * 32,
            "CHARTER_API_URL": "http://api:9000",
            "CHARTER_TOKEN": "secret",
            "CHARTER_CLOCK_SKEW_SECONDS": "60",
        }
    )
    assert settings.database_url == "postgresql://db/charter"
    assert settings.pgdata == Path("/srv/charter/pgdata")
    assert settings.automation_secret_key == "ab" * 32
    assert settings.api_url == "http://api:9000"
    assert settings.token == "secret"
    assert settings.clock_skew_seconds == 60.0


@pytest.mark.parametrize("raw", ["soon", "nan", "-1", "inf"])
def test_bad_numbers_are_configuration_errors(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="CHARTER_CLOCK_SKEW_SECONDS"):
        Settings.from_env({"CHARTER_CLOCK_SKEW_SECONDS": raw})
