"""An S3-compatible server for tests and benchmarks: moto's server mode on 127.0.0.1, started
as a child process and stopped by its process id (:func:`stop`)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

from tests.servers import free_port, stop, wait_for

__all__ = ["start", "stop"]


def start() -> tuple[subprocess.Popen, str]:
    """Start the server on a free port of 127.0.0.1; returns ``(process, endpoint URL)`` once
    it answers (polled with a 60 s deadline).

    Raises:
        RuntimeError: it did not answer in time (the process is killed).
    """
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    wait_for(proc, lambda: _answers(proc, endpoint), f"the moto server on {endpoint}")
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
