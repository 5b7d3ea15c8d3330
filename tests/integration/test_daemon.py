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
    proc = _replicate(dbfarm, "--follow")
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


def _replicate(dbfarm: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``wlr replicate <dbfarm> m r <args>`` in a process of its own, its output on a pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "wlr", "replicate", dbfarm, "m", "r", *args],
        env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _stop(proc, lines, reader, seen: list[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    reader.join(timeout=30)
    while not lines.empty():
        seen.append(lines.get())
    return "".join(seen)


def test_a_service_started_before_capture_published_anything_starts_empty_and_follows(spark, master, dbfarm):
    """Services are started together: a follower of a master that has published nothing yet
    starts empty, and follows what capture publishes afterwards."""
    proc = _replicate(dbfarm, "--follow")
    seen: list[str] = []
    lines, reader = _lines(proc)
    try:
        _wait_for(lines, "started empty from master m", seen)
        t = master.table_path("s.t")
        spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
        last = sql(spark, f"INSERT INTO delta.`{t}` VALUES (1)")
        _wait_for(lines, f"applied s.t transaction {last}", seen)
    finally:
        out = _stop(proc, lines, reader, seen)
    assert proc.returncode == 0, out[-3000:]
    assert rows(wlr.Replica("m", replica="r", dbfarm=dbfarm).table("s.t")) == [(1,)]


def test_a_service_with_no_starting_point_says_why_once_and_starts_from_the_next_snapshot(spark, master, dbfarm):
    """A follower whose master has no starting point (its first batches gone, no snapshot) keeps
    trying as a service does, saying why once; the snapshot the message asks for lets it start."""
    t = master.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (1)")
    from wlcore.batch import batch_name

    logs = os.path.join(dbfarm, "m", "wlc_logs")
    import shutil

    shutil.rmtree(os.path.join(logs, batch_name("m", 0)))  # what a prune past every snapshot would leave
    proc = _replicate(dbfarm, "--follow")
    seen: list[str] = []
    lines, reader = _lines(proc)
    try:
        _wait_for(lines, "cannot start: master 'm' has no reachable starting point; take a snapshot", seen)
        assert proc.poll() is None  # still there, trying again
        start = master.snapshot()
        _wait_for(lines, f"started from the snapshot of m at transaction {start.txn}", seen)
        last = sql(spark, f"INSERT INTO delta.`{t}` VALUES (2)")
        _wait_for(lines, f"applied s.t transaction {last}", seen)
    finally:
        out = _stop(proc, lines, reader, seen)
    assert proc.returncode == 0, out[-3000:]
    assert out.count("cannot start:") == 1, out[-3000:]
    assert rows(wlr.Replica("m", replica="r", dbfarm=dbfarm).table("s.t")) == [(1,), (2,)]


def test_a_target_asked_before_capture_published_anything_waits_for_it(spark, master, dbfarm):
    """``wlr replicate --until 1`` started with the master (nothing published yet) waits for
    transaction 1, says so at once, and ends there."""
    proc = _replicate(dbfarm, "--until", "1")
    seen: list[str] = []
    lines, reader = _lines(proc)
    _wait_for(lines, "waiting for transaction 1: the master has published no transaction yet", seen)
    t = master.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (1)")
    proc.wait(timeout=180)
    reader.join(timeout=30)
    while not lines.empty():
        seen.append(lines.get())
    out = "".join(seen)
    assert proc.returncode == 0, out[-3000:]
    assert "r: at transaction 1" in out


def _jvms(pid: int) -> list[int]:
    """The Java processes below process ``pid`` (its Spark's JVM), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        children.setdefault(parent, []).append(int(entry))
    below, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        below.append(p)
        todo += children.get(p, [])
    out = []
    for p in below:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as fh:
                if b"java" in fh.read().split(b"\0")[0]:
                    out.append(p)
        except OSError:
            continue
    return out


def test_a_service_ends_the_spark_it_started_and_starts_it_again_for_ddl(spark, master, dbfarm, tmp_path):
    """A follow service needs no JVM while its segments land in the process and it serves no
    SQL names: the Spark it started for a CREATE TABLE ends once unused ``replica.spark_idle``
    seconds (here 0.01), the next rows land without one, and the next CREATE TABLE starts it again."""
    import yaml

    from wlcore.settings import config_file

    base = config_file()
    cfg = (yaml.safe_load(base.read_text()) or {}) if base is not None else {}
    cfg.setdefault("replica", {})["spark_idle"] = 0.01  # at once (0 is off)
    path = tmp_path / "idle.yaml"
    path.write_text(yaml.safe_dump(cfg))
    t, u = master.table_path("s.t"), master.table_path("s.u")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (1, 'a')")
    proc = _replicate(dbfarm, "--follow", env={"WLC_CONFIG": str(path)})
    seen: list[str] = []
    lines, reader = _lines(proc)
    try:
        _wait_for(lines, "applied s.t transaction", seen)
        _wait_for(lines, "Spark ended: unused for 0.01 s (replica.spark_idle)", seen)
        assert _jvms(proc.pid) == [], "the JVM was said to end and did not"
        last = sql(spark, f"INSERT INTO delta.`{t}` VALUES (2, 'b')")
        _wait_for(lines, f"applied s.t transaction {last} ", seen)
        assert "through Arrow" in seen[-1], seen[-1]
        assert _jvms(proc.pid) == [], "a segment landed in the process started Spark again"
        spark.sql(f"CREATE TABLE delta.`{u}` (id INT) USING delta")
        last = sql(spark, f"INSERT INTO delta.`{u}` VALUES (7)")
        _wait_for(lines, f"applied s.u transaction {last} ", seen)
    finally:
        out = _stop(proc, lines, reader, seen)
    assert proc.returncode == 0, out[-3000:]
    assert out.count("Spark ended") >= 2, out[-3000:]  # and again after the second CREATE TABLE
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm)
    assert rows(rep.table("s.t")) == [(1, "a"), (2, "b")] and rows(rep.table("s.u")) == [(7,)]
