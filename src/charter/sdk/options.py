"""What both clients are configured with: where the API is, the token, the deadline of
each call, the retry policy."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from charter.core.config import Settings
from charter.sdk.protocol import DEFAULT_TIMEOUT, RetryPolicy


@dataclass(frozen=True)
class Options:
    base_url: str
    token: str | None
    # The deadline of every call, in seconds: connect, send, wait, read, and retries.
    timeout: float = DEFAULT_TIMEOUT
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        base_url: str | None,
        token: str | None,
        timeout: float,
        retry: RetryPolicy | None,
        settings: Settings | None,
    ) -> Options:
        """Options from the arguments given, CHARTER_API_URL and CHARTER_TOKEN for the
        rest."""
        if not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")
        if base_url is None or token is None:
            settings = settings or Settings.from_env()
            base_url = base_url if base_url is not None else settings.api_url
            token = token if token is not None else settings.token
        return cls(base_url.rstrip("/"), token, timeout, retry or RetryPolicy())

    def seconds(self, timeout: float | None) -> float:
        """The deadline of one call: its own, or the client's."""
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")
        return self.timeout if timeout is None else timeout
