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
LOG_AFTER_TILES = "log.after_tiles"  # tiles written, checkpoint not yet
LOG_AFTER_WITNESSES = "log.after_witnesses"  # quorum cosigned, checkpoint not yet written
LOG_AFTER_CHECKPOINT = "log.after_checkpoint"  # checkpoint renamed, head index not updated
LOG_BEFORE_DB_COMMIT = "log.before_db_commit"  # files done, database not yet told


def crash_point(name: str) -> None:
    """Die here, as if killed -9, when the environment names this point."""
    if os.environ.get(ENVIRONMENT_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)
