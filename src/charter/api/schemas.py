"""JSON Schemas of the request bodies, for /openapi.json only.

Bodies are parsed by hand as strict I-JSON, so FastAPI cannot infer them; these
describe them to readers of the OpenAPI document. The parsers are the authority.
"""

from __future__ import annotations

from typing import Any

from charter.api.contract import NAME, PRINCIPAL, WORKFLOW_PATH

_HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
# The public key of the seed 11...11: a valid Ed25519 key for the examples.
_EXAMPLE_KEY = "d04ab232742bb4ab3a1368bd4615e4e6d0224ab71a016baf8520a332c9778737"


def request_body(schema: dict[str, Any], description: str, example: Any = None) -> dict[str, Any]:
    """An `openapi_extra` that documents a JSON request body (with an example body)."""
    media: dict[str, Any] = {"schema": schema}
    if example is not None:
        media["example"] = example
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": media},
        }
    }


SUBMISSION = request_body(
    {
        "type": "object",
        "required": ["envelope", "signature"],
        "additionalProperties": False,
        "properties": {
            "envelope": {
                "type": "object",
                "required": ["v", "process", "workflow", "action", "input", "prev", "actor", "at"],
                "additionalProperties": False,
                "properties": {
                    "v": {"enum": [1, 2]},
                    "process": {"type": "string", "pattern": NAME},
                    "workflow": {"type": "string", "pattern": WORKFLOW_PATH},
                    "action": {"type": "string", "pattern": NAME},
                    "input": {"type": "object"},
                    "prev": {"oneOf": [_HEX64, {"type": "null"}]},
                    "actor": _HEX64,
                    "at": {"type": "string", "format": "date-time"},
                    "sd": {
                        "type": "object",
                        "description": "v2 only, and required there: the digest of each "
                        "personal field's disclosure, by JSON pointer.",
                        "additionalProperties": _HEX64,
                    },
                },
            },
            "signature": {"type": "string", "pattern": "^[0-9a-f]{128}$"},
            "disclosures": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The disclosure texts `sd` commits to, one per entry (present "
                "exactly when `sd` has entries); never signed, kept beside the event.",
            },
        },
    },
    "A signed v1 or v2 envelope (docs/wire-format.md), with a v2 envelope's disclosures; "
    "strict I-JSON, at most 2 MiB.",
)

# What a deploy and a deploy plan both take.
_PATH_AND_DEFINITION: dict[str, Any] = {
    "path": {"type": "string", "pattern": WORKFLOW_PATH, "maxLength": 1024},
    "definition": {"type": "object"},
}

DEPLOY = request_body(
    {
        "type": "object",
        "required": ["path", "definition"],
        "additionalProperties": False,
        "properties": {
            **_PATH_AND_DEFINITION,
            "allow_stranding": {
                "type": "boolean",
                "description": "Deploy even if processes are stranded or work orphaned "
                "(recorded with the revision).",
            },
            "migration": {
                "type": "object",
                "required": ["map"],
                "additionalProperties": False,
                "properties": {
                    "map": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Old state to new: the processes the operator "
                        "migrates after the deploy (`charter:migrate`).",
                    }
                },
            },
        },
    },
    "A workflow definition (DSL v2) and the path to deploy it at; the deploy is refused "
    "(409 `strands_processes`) if it would strand processes, unless a migration covers them "
    "or `allow_stranding` is true.",
    {
        "path": "examples/approvals",
        "definition": {
            "dsl": 2,
            "states": ["open", "approved"],
            "roles": ["clerk"],
            "actions": {
                "create": {"type": "create", "role": "clerk", "to": "open"},
                "approve": {"role": "clerk", "from": "open", "to": "approved"},
            },
        },
    },
)

PLAN = request_body(
    {
        "type": "object",
        "required": ["path", "definition"],
        "additionalProperties": False,
        "properties": {
            **_PATH_AND_DEFINITION,
            "cursor": {"type": "string", "description": "The `next_cursor` of a plan."},
            "replay": {
                "type": "boolean",
                "default": True,
                "description": "false: leave out the diverging list and its count (no "
                "history is replayed).",
            },
        },
    },
    "A definition to plan deploying at a path; nothing is deployed.",
    {
        "path": "examples/approvals",
        "definition": {
            "dsl": 2,
            "states": ["open", "done"],
            "roles": ["clerk"],
            "actions": {
                "create": {"type": "create", "role": "clerk", "to": "open"},
                "finish": {"role": "clerk", "from": "open", "to": "done"},
            },
        },
    },
)

ACTOR = request_body(
    {
        "type": "object",
        "required": ["id", "public_key", "roles"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "pattern": PRINCIPAL},
            "public_key": _HEX64,
            "roles": {"type": "array", "items": {"type": "string", "pattern": NAME}},
        },
    },
    "A new actor: its id, its Ed25519 public key and its roles.",
    {"id": "ada", "public_key": _EXAMPLE_KEY, "roles": ["clerk"]},
)

KEY = request_body(
    {
        "type": "object",
        "required": ["public_key"],
        "additionalProperties": False,
        "properties": {"public_key": _HEX64},
    },
    "The actor's new public key; the old one is retired, never deleted.",
)

ROLES = request_body(
    {
        "type": "object",
        "required": ["roles"],
        "additionalProperties": False,
        "properties": {"roles": {"type": "array", "items": {"type": "string", "pattern": NAME}}},
    },
    "The actor's roles from now on.",
    {"roles": ["clerk", "boss"]},
)
