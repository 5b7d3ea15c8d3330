"""A Hive metastore database for tests: Derby's network server on 127.0.0.1, started as a child
process and stopped by its process id (:func:`stop`). Its jars (``derbynet`` and what it needs,
the version of the Derby jars pyspark ships) are resolved from Maven Central by Ivy, the resolver
Spark itself uses (:func:`wlcore.session.ivy_retrieve`), once."""

from __future__ import annotations

import os
import socket
import subprocess

from tests.servers import free_port, stop, wait_for

__all__ = ["derby_jars", "start", "stop"]


def derby_jars() -> list[str]:
    """The jars of Derby's network server (the version of the Derby jars pyspark ships)."""
    from wlcore.session import ivy_retrieve, pyspark_jar_version

    return ivy_retrieve(f"org.apache.derby:derbynet:{pyspark_jar_version('derby')}")


def start(home: str) -> tuple[subprocess.Popen, str]:
    """Start Derby's network server on a free port of 127.0.0.1 with its databases in ``home``;
    returns ``(process, JDBC URL of database metastore)`` once it accepts connections (60 s).

    Raises:
        RuntimeError: it did not answer in time (the process is killed).
    """
    port = free_port()
    proc = subprocess.Popen(
        ["java", f"-Dderby.system.home={home}", "-cp", os.pathsep.join(derby_jars()),
         "org.apache.derby.drda.NetworkServerControl", "start", "-h", "127.0.0.1", "-p", str(port),
         "-noSecurityManager"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(proc, lambda: _answers(proc, port), f"Derby's network server on port {port}")
    return proc, f"jdbc:derby://127.0.0.1:{port}/metastore"


def _answers(proc: subprocess.Popen, port: int) -> bool:
    """True once the server accepts a connection; raises ChildProcessError when its process has ended."""
    if proc.poll() is not None:
        raise ChildProcessError(f"Derby's network server ended with status {proc.returncode}")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False
