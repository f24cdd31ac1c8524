"""Named crash points (DBOS's debug triggers): windows where a crash must lose nothing.

A test starts a real process with CHARTER_CRASH_POINT=<name>; when that process
reaches the named window it kills itself with SIGKILL, exactly like `kill -9` there.
Unset (always, outside such tests), a crash point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

ENVIRONMENT_VARIABLE = "CHARTER_CRASH_POINT"

# The windows tests aim at, named where they are.
FIRED_BEFORE_BOOKKEEPING = "automation.fired_before_bookkeeping"
STEP_RETURNED_BEFORE_JOURNAL = "machine.step_returned_before_journal"


def crash_point(name: str) -> None:
    """Die here, as if killed -9, when the environment names this point."""
    if os.environ.get(ENVIRONMENT_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)
