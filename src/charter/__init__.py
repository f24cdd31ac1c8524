"""Charter: a governed workflow and automation engine on PostgreSQL.

The Python SDK is `charter.Client` and `charter.AsyncClient` (docs/python.md); they are
imported on first use, so the engine's own modules do not load HTTP clients."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from charter.sdk import AsyncClient as AsyncClient
    from charter.sdk import Client as Client

__version__ = "0.1.0"
__all__ = ["AsyncClient", "Client", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("Client", "AsyncClient"):
        import charter.sdk

        return getattr(charter.sdk, name)
    raise AttributeError(f"module 'charter' has no attribute {name!r}")
