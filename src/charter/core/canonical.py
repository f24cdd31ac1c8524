"""RFC 8785 (JCS) canonical bytes and the SHA-256 hashes taken over them.

The common case (no floats, BMP keys) is written by the C JSON encoder (canonical_fast);
everything else, and every error, comes from the `rfc8785` package.
"""

from __future__ import annotations

import hashlib

import rfc8785

from charter.core.canonical_fast import fast_canonical_bytes
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonValue


def canonical_bytes(value: JsonValue) -> bytes:
    """The JCS canonical UTF-8 bytes of `value`; a value JCS cannot encode is `Malformed`."""
    fast = fast_canonical_bytes(value)
    if fast is not None:
        return fast
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise Malformed(f"cannot canonicalize: {exc}") from None
    except UnicodeEncodeError:
        # rfc8785 sorts keys by their UTF-16 bytes, which a lone surrogate does not have.
        raise Malformed(
            "cannot canonicalize: an object key contains non-UTF-8 codepoints"
        ) from None
    except RecursionError:
        raise Malformed("cannot canonicalize: nesting too deep") from None


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: JsonValue) -> str:
    """Lowercase hex SHA-256 of the canonical bytes of `value` (an event or definition hash)."""
    return sha256_hex(canonical_bytes(value))
