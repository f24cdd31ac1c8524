"""The identifier patterns, as the database's CHECK constraints allow them.

A name (process id, action, state, role, schedule, machine, target, step) is 1 to 128
characters of letters, digits and `._:-`, starting with a letter or a digit; a principal
or an actor id may also hold `@`; a workflow path is names joined by `/`. Messages quote
`.pattern`, so every refusal shows the same rule.
"""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
WORKFLOW_PATH = re.compile(rf"{NAME.pattern}(/{NAME.pattern})*")


def anchored(pattern: re.Pattern[str]) -> str:
    """The pattern as JSON Schema and OpenAPI want it: matching the whole string."""
    return f"^{pattern.pattern}$"
