"""The objects that cross the HTTP API, each defined once: the server writes them with
`to_json`, the SDK reads them with `parse`, and the API derives its OpenAPI schemas from
the same dataclasses and their `Meta`.

Stdlib and `charter.core` only: `import charter.sdk` loads this package.
"""

from charter.wire.codec import Meta, Wire, parse, to_json

__all__ = ["Meta", "Wire", "parse", "to_json"]
