"""An S3-compatible server for tests and benchmarks: moto's server mode on 127.0.0.1, started
as a child process and stopped by its process id."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request

from tests.waiting import wait_until


def start() -> tuple[subprocess.Popen, str]:
    """Start the server on a free port of 127.0.0.1; returns ``(process, endpoint URL)`` once
    it answers (polled with a 60 s deadline).

    Raises:
        RuntimeError: it did not answer in time (the process is killed).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(proc, endpoint), 60, f"the moto server to answer on {endpoint}")
    except (AssertionError, ChildProcessError):
        proc.kill()
        raise RuntimeError(f"moto server did not start on {endpoint}") from None
    return proc, endpoint


def _answers(proc: subprocess.Popen, endpoint: str) -> bool:
    """True once the server answers; raises ChildProcessError when its process has ended."""
    try:
        urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).read()
        return True
    except OSError:
        if proc.poll() is not None:
            raise ChildProcessError(f"moto server ended with status {proc.returncode}") from None
        return False


def stop(proc: subprocess.Popen) -> None:
    """Stop the server started by :func:`start` (SIGTERM, then SIGKILL after 10 s)."""
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
