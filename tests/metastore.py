"""A Hive metastore database for tests: Derby's network server on 127.0.0.1, started as a child
process and stopped by its process id. Its jars (``derbynet`` and what it needs, the version of
the Derby jars pyspark ships) are resolved from Maven Central by Ivy, the resolver Spark itself
uses (:func:`wlcore.session.ivy_retrieve`), once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

from tests.waiting import wait_until


def derby_jars() -> list[str]:
    """The jars of Derby's network server (the version of the Derby jars pyspark ships)."""
    from wlcore.session import _pyspark_jar_version, ivy_retrieve

    return ivy_retrieve(f"org.apache.derby:derbynet:{_pyspark_jar_version('derby')}")


def start(home: str) -> tuple[subprocess.Popen, str]:
    """Start Derby's network server on a free port of 127.0.0.1 with its databases in ``home``;
    returns ``(process, JDBC URL of database metastore)`` once it accepts connections (60 s).

    Raises:
        RuntimeError: it did not answer in time (the process is killed).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["java", f"-Dderby.system.home={home}", "-cp", os.pathsep.join(derby_jars()),
         "org.apache.derby.drda.NetworkServerControl", "start", "-h", "127.0.0.1", "-p", str(port),
         "-noSecurityManager"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: _answers(proc, port), 60, f"Derby's network server to answer on port {port}")
    except (AssertionError, ChildProcessError):
        proc.kill()
        raise RuntimeError(f"Derby's network server did not start on port {port}") from None
    return proc, f"jdbc:derby://127.0.0.1:{port}/metastore"


def _answers(proc: subprocess.Popen, port: int) -> bool:
    if proc.poll() is not None:
        raise ChildProcessError(f"Derby's network server ended with status {proc.returncode}")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def stop(proc: subprocess.Popen) -> None:
    """Stop the server started by :func:`start` (SIGTERM, then SIGKILL after 10 s)."""
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
