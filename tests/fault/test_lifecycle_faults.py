"""The log's life cycle killed half-way: a snapshot or a compacted batch killed before its
rename leaves only a staging folder, which the next run removes; nothing half is ever read."""

import os

import pytest

import wlc
import wlr
from tests.integration.helpers import master_rows, rows, sql

from .helpers import killed_by_sigkill, run_module

pytestmark = pytest.mark.spark


def test_snapshot_and_compaction_killed_before_publishing(spark, master, dbfarm):
    k = master.table_path("s.k")
    sql(spark, f"CREATE TABLE delta.`{k}` (id BIGINT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    for i in range(4):
        sql(spark, f"INSERT INTO delta.`{k}` VALUES ({i}, {i})")
        sql(spark, f"UPDATE delta.`{k}` SET v = v + 1")
    logs_before = sorted(os.listdir(master.logs))
    # this process captures, so the command snapshots the last published batch
    proc = run_module("wlc", "snapshot", dbfarm, "m", WLC_CRASH_AT="snapshot.copied")
    assert killed_by_sigkill(proc), proc.stderr[-2000:]
    snaps = os.listdir(os.path.join(master.path, "wlc_snapshot"))
    assert [n for n in snaps if not n.startswith(".open-")] == [] and len(snaps) == 1
    assert [s.txn for s in wlc.snapshots()] == [-1]  # the half-copied snapshot is not one
    proc = run_module("wlc", "compact", dbfarm, "m", "--level1", "2 batches", WLC_CRASH_AT="compact.staged")
    assert killed_by_sigkill(proc), proc.stderr[-2000:]
    after = sorted(os.listdir(master.logs))
    assert [n for n in after if n not in logs_before and not n.startswith(".compact-m-")] == []
    # the next runs clear what the killed ones left and publish whole
    start = wlc.snapshot()
    assert start.txn == wlc.tick()
    assert os.listdir(os.path.join(master.path, "wlc_snapshot")) == [str(start.txn)]
    made = wlc.compact(level1="2 batches", level2="off")
    assert made and not [n for n in os.listdir(master.logs) if n.startswith(".compact")]
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False, snapshot=-1)
    assert rows(rep.table("s.k")) == master_rows(spark, k)
