"""The canonical form of a workflow definition and its version hash (docs/dsl.md).

A stored event records the `workflow_version` it was validated against: the SHA-256 of
the definition's RFC 8785 (JCS) bytes, so key order and whitespace never make a new
version, while any change of meaning does.
"""

from __future__ import annotations

from charter.core.canonical import canonical_bytes, sha256_hex
from charter.core.jsontypes import JsonValue


def canonical_definition(doc: JsonValue) -> bytes:
    """The JCS canonical UTF-8 bytes of a workflow definition."""
    return canonical_bytes(doc)


def version_hash(doc: JsonValue) -> str:
    """The lowercase hex SHA-256 of `canonical_definition(doc)`."""
    return sha256_hex(canonical_definition(doc))
