"""A master table that cannot be read (a corrupt data file, a damaged commit) is held back
and read again with backoff; capture of every other table goes on, ids stay gap-free and
in one order, and replay by instant stays a consistent cut or is refused."""

import glob
import json
import os
import shutil
import time
from datetime import datetime, timezone

import pytest

import wlr
from tests.integration.helpers import master_rows, rows
from tests.waiting import wait_until
from wlc.master import Master

pytestmark = pytest.mark.spark


def _config(path: str) -> dict:
    return dict(
        line.split("=", 1) for line in open(os.path.join(path, "wlc.config")).read().splitlines() if "=" in line
    )


def _flush_until(m, pred, seconds: float = 30.0):
    """Flush until ``pred()`` holds (a held table is read again after its backoff)."""

    def flushed() -> bool:
        m.flush()
        return pred()

    wait_until(flushed, seconds, "capture to read the held table again", interval=0.2)


def _two_tables(spark, dbfarm):
    """Master ``m`` (a batch per transaction) with tables ``s.a`` and ``s.b``, captured."""
    m = Master("m", dbfarm=dbfarm, capture=False).start()
    m.beat(0)
    a, b = os.path.join(dbfarm, "m", "s", "a"), os.path.join(dbfarm, "m", "s", "b")
    spark.sql(f"CREATE TABLE delta.`{a}` (k INT) USING delta")
    spark.sql(f"CREATE TABLE delta.`{b}` (k INT) USING delta")
    assert m.flush() == 1
    return m, a, b


def test_a_table_whose_rows_cannot_be_read_is_held_and_the_others_go_on(spark, dbfarm):
    m, a, b = _two_tables(spark, dbfarm)
    before = set(glob.glob(f"{a}/*.parquet"))
    spark.sql(f"INSERT INTO delta.`{a}` VALUES (1)")  # a's rows: about to be damaged
    committed_a = datetime.now(timezone.utc)
    time.sleep(0.05)
    spark.sql(f"INSERT INTO delta.`{b}` VALUES (10)")
    part = (set(glob.glob(f"{a}/*.parquet")) - before).pop()
    spark.sql(f"INSERT INTO delta.`{a}` VALUES (2)")  # readable, but after a's unreadable one
    shutil.copy(part, part + ".bak")
    with open(part, "r+b") as fh:
        fh.truncate(20)
    assert m.flush() == 2  # b's insert is published, as 2; a's wait
    cfg = _config(m.path)
    held = json.loads(cfg["held"])
    assert list(held) == ["s.a"] and "its rows cannot be read" in held["s.a"]
    assert "HELD s.a: its rows cannot be read" in open(os.path.join(m.path, "wlc.log")).read()
    assert datetime.fromisoformat(cfg["watermark"].replace("Z", "+00:00")) < committed_a
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rep.tick() == 2 and rows(rep.table("s.b")) == [(10,)] and rows(rep.table("s.a")) == []
    with pytest.raises(wlr.ReplicationTimeout):  # a's commit is not published yet
        wlr.replicate("m", replica="r_cut", dbfarm=dbfarm, until=datetime.now(timezone.utc), timeout=0.5)

    shutil.move(part + ".bak", part)  # the cause is fixed
    _flush_until(m, lambda: not _config(m.path).get("held"))
    assert m.tick() == 4  # a's inserts, late: the next ids
    rep.replicate(follow=False)
    assert rows(rep.table("s.a")) == master_rows(spark, a) == [(1,), (2,)]
    log = open(os.path.join(m.path, "wlc.log")).read()
    assert "RELEASED s.a" in log
    # the instant just after a's commit: b's insert is after it, a's came late: no exact state
    with pytest.raises(wlr.TargetError, match="captured late"):
        wlr.replicate("m", replica="r_late", dbfarm=dbfarm, until=committed_a, follow=False)
    m.close()


def test_a_table_whose_log_cannot_be_read_is_held(spark, dbfarm):
    m, a, b = _two_tables(spark, dbfarm)
    spark.sql(f"INSERT INTO delta.`{a}` VALUES (1)")
    commit = sorted(glob.glob(f"{a}/_delta_log/*.json"))[-1]
    good = open(commit).read()
    with open(commit, "w") as fh:  # a damaged commit file
        fh.write(good[:30])
    spark.sql(f"INSERT INTO delta.`{b}` VALUES (10)")
    assert m.flush() == 2
    assert "its log cannot be read" in json.loads(_config(m.path)["held"])["s.a"]
    with open(commit, "w") as fh:  # restored
        fh.write(good)
    _flush_until(m, lambda: not _config(m.path).get("held"))
    assert m.tick() == 3
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rows(rep.table("s.a")) == [(1,)] and rows(rep.table("s.b")) == [(10,)]
    m.close()
