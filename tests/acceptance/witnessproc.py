"""`charter witness serve` as a real process, made with the real `charter witness init`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from charter.tlog.checkpoint import CosignatureVerifier
from charter.tlog.witness_protocol import checkpoint_path
from tests.acceptance.processes import charter_env, free_port, run_charter, start_charter
from tests.unit.witnesskit import TestLog


class WitnessProcess:
    """A witness directory and the server process over it (restartable)."""

    def __init__(self, state: Path, name: str, *logs: TestLog | str) -> None:
        """`logs`: the logs it knows, as test logs or log vkeys."""
        self.state = state
        self.name = name
        self.env = charter_env()
        args = ["witness", "init", "--name", name, "--state", str(state)]
        for log in logs:
            args += ["--log", log if isinstance(log, str) else log.vkey]
        done = run_charter(*args, env=self.env)
        assert done.returncode == 0, done.stderr
        self.vkey = done.stdout.strip()
        self.verifier = CosignatureVerifier.from_vkey(self.vkey)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> WitnessProcess:
        self.process = start_charter(
            "witness", "serve", "--state", str(self.state), "--port", str(self.port),
            env=self.env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                out, err = self.process.communicate()
                raise AssertionError(f"witness exited {self.process.returncode}:\n{out}\n{err}")
            try:
                httpx.get(f"{self.url}/{'0' * 64}/checkpoint", timeout=2)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("the witness did not start listening")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, like a power cut to the process."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process.communicate()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process.communicate()

    def add(self, body: bytes) -> httpx.Response:
        return httpx.post(f"{self.url}/add-checkpoint", content=body, timeout=30)

    def latest(self, origin: str) -> httpx.Response:
        return httpx.get(f"{self.url}/{checkpoint_path(origin)}", timeout=30)
