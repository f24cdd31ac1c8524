"""stop_on_signals: a signal that lands while the main thread holds the stop event's own
lock still stops the command (a handler calling `event.set()` there waits for ever)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HELD = textwrap.dedent(
    """
    import os, signal, threading, time
    from charter.cli.stopping import stop_on_signals

    stop = threading.Event()
    stop_on_signals(stop)
    # Hold the lock Event.wait holds while the signal's handler runs.
    with stop._cond:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
    print("stopped" if stop.wait(5) else "not stopped", flush=True)
    """
)


def test_a_signal_landing_inside_the_stop_events_lock_still_stops() -> None:
    done = subprocess.run([sys.executable, "-c", HELD], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"


def test_sigint_stops_too_and_the_event_is_not_set_before() -> None:
    script = textwrap.dedent(
        """
        import os, signal, threading
        from charter.cli.stopping import stop_on_signals

        stop = threading.Event()
        stop_on_signals(stop)
        assert not stop.wait(0.2)
        os.kill(os.getpid(), signal.SIGINT)
        print("stopped" if stop.wait(5) else "not stopped", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"
