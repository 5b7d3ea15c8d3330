"""`wlr replicate --follow` as a service: a line per applied segment, a clean stop on SIGTERM."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

import wlr

from ..waiting import wait_until
from .helpers import rows, sql

pytestmark = pytest.mark.spark
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _lines(proc) -> tuple["queue.Queue[str]", threading.Thread]:
    """The process's output lines as they come (a thread reads them: nothing else may)."""
    out: queue.Queue[str] = queue.Queue()

    def pump():
        for line in proc.stdout:
            out.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return out, reader


def _wait_for(lines: "queue.Queue[str]", text: str, seen: list[str], seconds: float = 180) -> None:
    def arrived() -> bool:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            return False
        seen.append(line)
        return text in line

    wait_until(arrived, seconds, lambda: f"a line with {text!r}; output:\n{''.join(seen)[-3000:]}", interval=0)


def test_follow_service_applies_and_stops_on_sigterm(spark, master, dbfarm):
    t = master.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (1)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "wlr", "replicate", dbfarm, "m", "r", "--follow"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    lines, reader = _lines(proc)
    try:
        _wait_for(lines, "following m", seen)
        _wait_for(lines, "applied s.t transaction 1", seen)
        last = sql(spark, f"INSERT INTO delta.`{t}` VALUES (2)")  # published while the service follows
        _wait_for(lines, f"applied s.t transaction {last}", seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        reader.join(timeout=30)  # the rest of the output, up to the end of the pipe
    while not lines.empty():
        seen.append(lines.get())
    out = "".join(seen)
    assert proc.returncode == 0, out[-3000:]
    assert f"r: stopped at transaction {last}" in out
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm)
    assert rep.status()["state"] == "idle" and rows(rep.table("s.t")) == [(1,), (2,)]
