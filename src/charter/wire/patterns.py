"""The patterns of identifiers on the wire, as JSON Schema wants them (whole strings)."""

from __future__ import annotations

from charter.core import identifiers

# As the database CHECKs and the parsers allow them.
NAME = identifiers.anchored(identifiers.NAME)
PRINCIPAL = identifiers.anchored(identifiers.PRINCIPAL)
WORKFLOW_PATH = identifiers.anchored(identifiers.WORKFLOW_PATH)
HEX64 = r"^[0-9a-f]{64}$"
UUID = r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
TIME = "RFC 3339 UTC with milliseconds, e.g. 2026-06-18T10:00:00.000Z"
