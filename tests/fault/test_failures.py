"""Failure, accept, foreign writes, stop, restart of capture, a second Spark application."""

import glob
import os
import subprocess
import sys

import pytest

import wlc
import wlr
from wlcore.errors import ConfigError, MasterStateError
from wlcore.logstore import LogStore

from ..integration.helpers import master_rows, rows, sql
from ..waiting import wait_until
from .helpers import run_python as _run_python

pytestmark = pytest.mark.spark
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code: str, env_extra: dict) -> subprocess.CompletedProcess:
    return _run_python(code, **env_extra)


def test_failure_is_kept_until_accept(spark, master, dbfarm):
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # 0
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")  # 1
    bad = sql(spark, f"INSERT INTO delta.`{p}` VALUES (2)")  # 2: its rows get damaged
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (3)")  # 3
    part = glob.glob(os.path.join(master.logs, "m_*", "rows", "s.t", "wlc_version=2", "*.parquet"))[0]
    with open(part, "r+b") as fh:
        fh.truncate(10)

    with pytest.raises(wlr.ReplicationError) as err:
        wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert (err.value.txn, err.value.table) == (bad, "s.t") and "checksum" in err.value.cause
    rep = wlr.current()
    assert rep.tick() == bad - 1 and rows(rep.table("s.t")) == [(1,)]  # nothing of txn 2 visible
    assert "FAILED" in open(os.path.join(dbfarm, "r", "wlr.log")).read()

    # a new process sees the same failure (no Spark needed to report it)
    proc = run_python(
        """
        import wlr
        try:
            wlr.replicate("m", replica="r", follow=False)
        except wlr.ReplicationError as e:
            print("TXN", e.txn, e.batch, e.table)
    """,
        {"WLC_DBFARM": dbfarm},
    )
    assert f"TXN {bad}" in proc.stdout, proc.stderr[-2000:]

    assert wlr.accept() == bad
    assert wlr.tick() == bad  # the skipped transaction counts as handled
    wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert wlr.tick() == 3 and rows(rep.table("s.t")) == [(1,), (3,)]
    assert wlr.status()["skipped"] == [bad]
    with pytest.raises(wlr.ReplicaStateError, match="no failed transaction"):
        wlr.accept()


def test_write_outside_replay_is_detected(spark, master, dbfarm):
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    spark.sql(f"INSERT INTO delta.`{rep.path_of('s.t')}` VALUES (42)")  # someone writes the replica
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (2)")
    with pytest.raises(wlr.ReplicationError, match="written outside replay"):
        rep.replicate(follow=False)
    with pytest.raises(wlr.ReplicationError):  # kept until fixed or accepted
        rep.replicate(follow=False)


def test_stop_and_restart_rules(spark, master, dbfarm):
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    with pytest.raises(ConfigError):
        wlc.beat(-1)
    assert master.beat_seconds == 0  # nothing changed
    last = sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")
    wlc.stop()
    spark.sql(f"INSERT INTO delta.`{p}` VALUES (2)")
    cfg = open(os.path.join(dbfarm, "m", "wlc.config")).read()
    assert "state=2" in cfg
    with pytest.raises(MasterStateError, match="snapshot"):
        wlc.master("m", dbfarm=dbfarm)
    with pytest.raises(MasterStateError):
        wlc.flush()
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rep.tick() == last and rows(rep.table("s.t")) == [(1,)]
    with pytest.raises(wlr.ReplicationTimeout, match="never"):
        rep.replicate(until=last + 5)


def test_capture_resumes_after_restart_and_sees_other_applications(spark, master, dbfarm):
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT, s STRING) USING delta")
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1, 'a')")
    master.close()  # the capturing process goes away
    spark.sql(f"INSERT INTO delta.`{p}` VALUES (2, 'b')")  # committed while nobody captures
    # a second Spark application (another process, another JVM) writes the master table
    proc = run_python(
        f"""
        import wlc
        spark = wlc.spark_session(app_name="other-writer")
        spark.sql("UPDATE delta.`{p}` SET s = 'z' WHERE i = 1")
        spark.stop()
    """,
        {},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with pytest.warns(UserWarning, match="already in master mode"):
        m2 = wlc.master("m", dbfarm=dbfarm)
    assert wlc.flush() == 3  # 2: the insert, 3: the other application's update; no gap, no repeat
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rows(rep.table("s.t")) == master_rows(spark, p) == [(1, "z"), (2, "b")]
    m2.close()


def test_table_deleted_file_by_file_is_one_drop(spark, dbfarm):
    """A scan in the middle of an rmtree sees the log shrink; that is not a re-created table."""
    from wlc.master import Master

    path = os.path.join(dbfarm, "d", "s", "t")
    spark.range(3).write.format("delta").save(path)
    m = Master("d", dbfarm=dbfarm, capture=False).start()  # no thread: scans only on flush
    m.beat(0)
    spark.range(10, 11).write.format("delta").mode("append").save(path)
    spark.range(11, 12).write.format("delta").mode("append").save(path)
    assert m.flush() == 1
    for f in sorted(glob.glob(f"{path}/_delta_log/*"), reverse=True):
        if os.path.isfile(f) and not os.path.basename(f).startswith("00000000000000000000."):
            os.remove(f)  # the state rmtree passes through
    assert m.flush() == 1  # nothing new
    import shutil

    shutil.rmtree(path)
    assert m.flush() == 2
    store = LogStore(m.storage, os.path.dirname(m.logs), m.logs, "d")
    txns = [t for b in store.batches() for t in store.manifest(b).txns]
    assert [(t.txn, t.ddl) for t in txns] == [(0, None), (1, None), (2, "drop")]
    assert [t.time for t in txns] == sorted(t.time for t in txns)


def test_table_dropped_and_made_again_between_scans(spark, dbfarm):
    from wlc.master import Master

    m = Master("d", dbfarm=dbfarm, capture=False).start()
    m.beat(0)
    a, b = m.table_path("s.a"), m.table_path("s.b")
    for p in (a, b):
        spark.sql(f"CREATE TABLE delta.`{p}` (id INT, v STRING) USING delta")
    for i in range(3):
        spark.sql(f"INSERT INTO delta.`{b}` VALUES ({i}, 'old')")
    spark.sql(f"INSERT INTO delta.`{a}` VALUES (1, 'old')")
    m.flush()
    import shutil

    # no scan in between: fewer versions (a), more versions and another schema (b)
    shutil.rmtree(a.replace("file://", ""))
    spark.sql(f"CREATE TABLE delta.`{a}` (id INT, v STRING) USING delta")
    spark.sql(f"INSERT INTO delta.`{a}` VALUES (10, 'new')")
    shutil.rmtree(b.replace("file://", ""))
    spark.sql(f"CREATE TABLE delta.`{b}` (k INT, w STRING) USING delta")
    for i in range(5):
        spark.sql(f"INSERT INTO delta.`{b}` VALUES ({i}, 'new')")
    m.flush()
    rep = wlr.Replica("d", replica="dr", dbfarm=dbfarm)
    rep.replicate(follow=False)
    assert rows(rep.table("s.a")) == [(10, "new")]
    assert rows(rep.table("s.b")) == master_rows(spark, b) and rep.table("s.b").columns == ["k", "w"]
    m.close()


def test_standalone_capturer_process(spark, dbfarm):
    """`python -m wlc capture` captures a master written by another application."""
    import signal

    from wlcore.settings import parse_kv

    env = dict(os.environ, PYTHONPATH=ROOT)
    made = subprocess.run(
        [sys.executable, "-m", "wlc", "master", dbfarm, "ext", "--beat", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # master mode is its own step
    assert made.returncode == 0 and "ext is a master now" in made.stdout, made.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "wlc", "capture", dbfarm, "ext"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        cfg_path = os.path.join(dbfarm, "ext", "wlc.config")

        def beating() -> bool:
            if "heartbeat=" in open(cfg_path).read():
                return True
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            return False

        wait_until(beating, 180, "the capture process's first heartbeat", interval=0.2)
        path = os.path.join(dbfarm, "ext", "s", "t")
        spark.sql(f"CREATE TABLE delta.`{path}` (i INT) USING delta")
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (1), (2)")
        wait_until(
            lambda: parse_kv(open(cfg_path).read()).get("tick", "-1") == "1",
            180,
            "the capture process to publish both transactions",
            interval=0.2,
        )
        tick = parse_kv(open(cfg_path).read()).get("tick", "-1")
        assert tick == "1", "capture process did not publish both transactions"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-3000:]
    assert "each transaction is published as its own batch at once" in out  # the start-up line says when
    status = subprocess.run(
        [sys.executable, "-m", "wlc", "status", dbfarm, "ext"], env=env, capture_output=True, text=True, timeout=120
    )
    assert status.returncode == 0 and "capture     stopped at 20" in status.stdout, status.stdout  # a clean stop
    rep = wlr.Replica("ext", replica="ext_r", dbfarm=dbfarm).replicate(follow=False)
    assert rows(rep.table("s.t")) == [(1,), (2,)]


def test_table_dropped_before_capture_copied_its_rows(spark, dbfarm):
    """Capture cannot copy rows that are gone: it publishes the transaction saying so (it
    does not retry forever) and replay stops there with that cause until it is accepted."""
    import shutil

    from wlc.master import Master

    m = Master("d", dbfarm=dbfarm, capture=False).start()
    m.beat(300)
    m.stage_within = 3600  # staged rows are copied only at publish
    a, u = m.table_path("s.a"), m.table_path("s.u")
    for p in (a, u):
        spark.sql(f"CREATE TABLE delta.`{p}` (id INT) USING delta")
    m.flush()
    rep = wlr.replicate("d", replica="r", dbfarm=dbfarm, follow=False)
    spark.sql(f"INSERT INTO delta.`{a}` VALUES (1)")
    spark.sql(f"INSERT INTO delta.`{u}` VALUES (2)")
    lost = rep.tick() + 1

    def staged() -> bool:  # both commits staged (they are taken once capture.settle old)
        if m.last_logged() >= lost + 1:
            return True
        m._step(take_all=False)
        return False

    wait_until(staged, 30, "capture to stage the two commits", interval=0)
    assert m.config.tick == lost - 1  # nothing published yet, no rows copied yet
    shutil.rmtree(a.replace("file://", ""))  # the table dropped before its rows were copied
    assert m.flush() == lost + 2  # published: the insert (rows lost), u's insert, the drop
    with pytest.raises(wlr.ReplicationError) as err:
        rep.replicate(follow=False)
    assert (err.value.txn, err.value.table) == (lost, "s.a")
    assert "not captured" in err.value.cause and "dropped" in err.value.cause
    assert rep.accept() == lost
    rep.replicate(follow=False)
    assert rep.tick() == lost + 2 and "s.a" not in rep.tables()
    assert rows(rep.table("s.u")) == [(2,)]
    m.close()
