"""What the servers tests start have in common: a free port of 127.0.0.1, waiting for the
server to answer, and stopping it by its process id."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable

from tests.waiting import wait_until


def free_port() -> int:
    """A port of 127.0.0.1 free now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(proc: subprocess.Popen, answers: Callable[[], bool], what: str) -> None:
    """Wait (60 s at most) until ``answers()`` is true; ``answers`` raises ChildProcessError
    when ``proc`` has ended.

    Raises:
        RuntimeError: ``what`` did not answer in time, or its process ended (it is killed).
    """
    try:
        wait_until(answers, 60, f"{what} to answer")
    except (AssertionError, ChildProcessError):
        proc.kill()
        raise RuntimeError(f"{what} did not start") from None


def stop(proc: subprocess.Popen) -> None:
    """Stop a server this test run started (SIGTERM, then SIGKILL after 10 s)."""
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
