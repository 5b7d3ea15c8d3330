"""The log's life cycle on real Delta tables: snapshots taken while capturing, compacted
levels, retention. A replica from a newer snapshot, or through compacted batches, equals
one replayed from the first snapshot through level 0, at every target."""

import os
from datetime import timedelta

import pytest

import wlc
import wlr
from wlc.lifecycle import Lifecycle
from wlcore import batch as batchfmt
from wlcore.logstore import LogStore
from wlcore.settings import Every
from wlr.errors import ReplicaStateError, TargetError

from ..waiting import wait_until
from .helpers import master_rows, rows, sql
from .test_grouped import keyed_and_unkeyed, random_mix

pytestmark = pytest.mark.spark

TABLES = ("s.k", "s.u")


def make_history(spark, master):
    """Keyed s.k and unkeyed s.u, three stretches of random DML (a batch per one to a few
    transactions) with a snapshot after the first two and an ALTER in the middle."""
    k, u = keyed_and_unkeyed(spark, master)
    random_mix(spark, k, u, 12, seed=1)
    first = wlc.snapshot()
    random_mix(spark, k, u, 10, seed=2)
    sql(spark, f"ALTER TABLE delta.`{k}` ADD CONSTRAINT v_small CHECK (v < 100000)")
    random_mix(spark, k, u, 6, seed=3)
    second = wlc.snapshot()
    random_mix(spark, k, u, 8, seed=4)
    return first, second


def same(a, b, until):
    for table in TABLES:
        assert rows(a.table(table)) == rows(b.table(table)), (until, table)
    assert a.tick() == b.tick(), until


def test_a_snapshot_is_named_in_wlc_log_once_whoever_takes_it(spark, master):
    """A snapshot taken beside capture (``wlc snapshot`` in another process, the background
    thread) is named in ``wlc.log`` and ``wlc.config`` by whichever of its taker and the next
    publication sees it first, and only once."""
    k, _u = keyed_and_unkeyed(spark, master)
    own = wlc.snapshot()
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (7, 7, 'g')")
    master.flush()
    beside = Lifecycle(master.storage, master.path, "m").snapshot(spark)  # as another process takes it
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (8, 8, 'h')")
    master.flush()  # this publication adopts it
    master.note_snapshot(beside)  # the taker, late: nothing more to say
    text = open(os.path.join(master.path, "wlc.log")).read()
    assert own.txn < beside.txn
    assert text.count(f"snapshot at transaction {own.txn}: {own.path}") == 1, text
    assert text.count(f"snapshot at transaction {beside.txn}: {beside.path}") == 1, text
    assert master.config.snapshot == beside.path


def test_snapshots_and_compacted_levels_replay_like_level_zero(spark, master, dbfarm):
    first, second = make_history(spark, master)
    end = wlc.tick()
    assert 0 <= first.txn < second.txn < end
    names = sorted(os.listdir(os.path.join(dbfarm, "m", "wlc_snapshot")))
    assert names == sorted([str(first.txn), str(second.txn)])
    assert master.config.snapshot == second.path
    assert [s.txn for s in wlc.snapshots()] == [-1, first.txn, second.txn]
    made = wlc.compact(level1="3 batches", level2="2 batches")
    assert {s.level for s in made} == {1, 2}
    assert all(not n.startswith(".compact") for n in os.listdir(master.logs))
    again = wlc.compact(level1="3 batches", level2="2 batches")
    assert again == []  # nothing due twice
    for until in (first.txn + 2, second.txn, end):
        ref = wlr.replicate("m", until=until, replica=f"ref{until}", dbfarm=dbfarm, snapshot=-1, compacted=False)
        new = wlr.replicate("m", until=until, replica=f"new{until}", dbfarm=dbfarm)
        same(ref, new, until)
        log_text = open(os.path.join(dbfarm, f"new{until}", "wlr.log")).read()
        expected = second.txn if until >= second.txn else first.txn
        assert f"at transaction {expected} " in log_text, log_text
    final = wlr.Replica("m", f"new{end}", dbfarm)
    assert rows(final.table("s.k")) == master_rows(spark, master.table_path("s.k"))
    # a replica that exists is never reset by a newer snapshot; it follows through the levels
    old = wlr.Replica("m", f"ref{first.txn + 2}", dbfarm).replicate(follow=False)
    same(old, final, "continued")
    # through level 1 and 2 only, from the empty start
    levels = wlr.replicate("m", replica="levels", dbfarm=dbfarm, snapshot=-1)
    same(levels, final, "levels from the start")
    log_text = open(os.path.join(dbfarm, "levels", "wlr.log")).read()
    assert "replaying through compacted m_L2_000000000000_" in log_text, log_text
    with pytest.raises(TargetError, match="no snapshot at transaction 5"):
        wlr.replicate("m", replica="nope", dbfarm=dbfarm, snapshot=5)
    assert not os.path.exists(os.path.join(dbfarm, "nope"))


def test_prune_keeps_what_is_promised_and_refuses_what_is_not(spark, master, dbfarm):
    first, second = make_history(spark, master)
    end = wlc.tick()
    second_batch = second.batch
    wlc.compact(level1="3 batches", level2="2 batches")
    wlr.replicate("m", until=first.txn - 1, replica="behind", dbfarm=dbfarm, snapshot=-1)
    cycle = Lifecycle(master.storage, master.path, "m")
    later = master.clock() + timedelta(days=2)
    day = Every(86400)
    # everything older than a day goes, but for the newest snapshot (the base) and what
    # replay needs from it
    keep = {"level0": day, "level1": day, "level2": day, "snapshots": day}
    dry = cycle.prune(dry_run=True, now=later, keep=keep)
    listing = sorted(os.listdir(master.logs))
    assert dry.deleted and sorted(os.listdir(master.logs)) == listing  # a dry run deletes nothing
    report = cycle.prune(now=later, keep=keep)
    assert report.deleted == dry.deleted
    text = "\n".join(report.lines())
    assert f"earliest reachable point: transaction {second.txn}" in text
    # the newest snapshot is the base; the snapshots before it are gone
    assert [s.txn for s in wlc.snapshots()] == [second.txn]
    # capture resumes from the newest level-0 batch: it stays
    assert any(not n.split("_")[1].startswith("L") for n in os.listdir(master.logs) if n.startswith("m_"))
    # what is promised still replays exactly: from the kept snapshot to the end
    full = wlr.replicate("m", replica="full", dbfarm=dbfarm)
    assert rows(full.table("s.k")) == master_rows(spark, master.table_path("s.k"))
    assert rows(full.table("s.u")) == master_rows(spark, master.table_path("s.u"))
    # too far behind: a clear error naming the earliest point, nothing changes
    before = open(os.path.join(dbfarm, "behind", "wlr.config")).read()
    with pytest.raises(ReplicaStateError, match=f"earliest reachable point is transaction {second.txn}"):
        wlr.replicate("m", replica="behind", dbfarm=dbfarm)
    assert open(os.path.join(dbfarm, "behind", "wlr.config")).read() == before
    # a target older than the earliest reachable point
    with pytest.raises(TargetError, match=f"older than the earliest reachable point.*transaction {second.txn}"):
        wlr.replicate("m", until=first.txn, replica="old", dbfarm=dbfarm)
    assert not os.path.exists(os.path.join(dbfarm, "old"))
    # a target inside a compacted batch whose level-0 batches were pruned: not reachable exactly
    inside = [
        (b.first, b.last)
        for b in LogStore(master.storage, master.path, master.logs, "m").compacted()
        if b.level == 1
        and b.first > second_batch
        and not os.path.exists(os.path.join(master.logs, batchfmt.batch_name("m", b.first)))
    ]
    assert inside, os.listdir(master.logs)
    first_txn = batchfmt.read_manifest(
        master.storage, os.path.join(master.logs, batchfmt.compacted_name("m", 1, *inside[0]))
    ).first_txn
    with pytest.raises(TargetError, match="not reachable exactly"):
        wlr.replicate("m", until=first_txn, replica="inside", dbfarm=dbfarm)
    assert not os.path.exists(os.path.join(dbfarm, "inside"))
    assert end == wlc.tick()


def test_automatic_snapshots_and_compaction_and_the_command_line(spark, dbfarm, tmp_path, monkeypatch, capsys):
    import time

    import yaml

    from wlc import cli

    base = yaml.safe_load(open(os.environ["WLC_CONFIG"]))
    base.setdefault("master", {}).update(
        {"snapshot_interval": "4 transactions", "compact": {"auto": True, "level1": "2 batches", "level2": "2 batches"}}
    )
    cfg = tmp_path / "auto.yaml"
    cfg.write_text(yaml.safe_dump(base))
    monkeypatch.setenv("WLC_CONFIG", str(cfg))
    m = wlc.master("auto", dbfarm=dbfarm)
    wlc.beat(0)
    try:
        k = m.table_path("s.k")
        sql(spark, f"CREATE TABLE delta.`{k}` (id BIGINT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")

        def write(i):
            sql(spark, f"INSERT INTO delta.`{k}` VALUES ({i}, {i})" if i % 3 else f"UPDATE delta.`{k}` SET v = v + 1")

        for i in range(9):
            write(i)
        wlc_log = os.path.join(m.path, "wlc.log")
        # the background runs every second (5 poll intervals) and notes what it made once it is made
        noted = lambda: all(w in open(wlc_log).read() for w in ("snapshot at transaction", "compacted level-2 batch"))  # noqa: E731
        seen, since = wlc.tick(), time.monotonic()

        def made() -> bool:
            nonlocal i, seen, since
            logs = os.listdir(m.logs)
            if any("_L2_" in n for n in logs) and len(wlc.snapshots()) >= 3 and noted():
                return True
            # a snapshot is due 4 transactions after the newest: where the background took one
            # late (a slow machine), capture is idle for 3 s and one more transaction makes the next due
            tick = wlc.tick()
            if tick != seen:
                seen, since = tick, time.monotonic()
            elif time.monotonic() - since > 3:
                i += 1
                write(i)
                since = time.monotonic()
            return False

        wait_until(made, 120, "a level-2 batch and three snapshots, noted in wlc.log", interval=0.2)
        assert any("_L2_" in n for n in os.listdir(m.logs)), os.listdir(m.logs)
        taken = [s.txn for s in wlc.snapshots()]
        assert len(taken) >= 3, wlc.snapshots()
        assert all(b - a >= 4 for a, b in zip(taken, taken[1:])), taken  # 4 transactions apart at least
        assert noted(), open(wlc_log).read()
        # the command line when no process captures (the background runs stop with capture):
        # the snapshot command captures what was committed first
        tick = wlc.tick()
        m.close()
        spark.sql(f"INSERT INTO delta.`{k}` VALUES (100, 100)")
        assert cli.main(["snapshot", dbfarm, "auto"]) == 0
        out = capsys.readouterr().out
        assert f"snapshot at transaction {tick + 1} " in out, out
        assert cli.main(["compact", dbfarm, "auto", "--level1", "1 batches"]) == 0
        assert "compacted" in capsys.readouterr().out
        assert cli.main(["compact", dbfarm, "auto", "--level1", "1h"]) == 0
        out = capsys.readouterr().out  # says when the next batch is due instead of a bare "nothing"
        assert out.startswith("nothing to compact yet: level 1: ") and "due" in out, out
        assert cli.main(["prune", dbfarm, "auto", "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert "would delete 0 folders" in out and "earliest reachable point: transaction -1" in out, out
        rep = wlr.replicate("auto", replica="r", dbfarm=dbfarm, follow=False)
        assert rows(rep.table("s.k")) == master_rows(spark, k)
    finally:
        m.close()


def test_a_dbfarm_moved_elsewhere_is_captured_and_replicated_there(spark, dbfarm, tmp_path):
    """The whole dbfarm (a master with a snapshot and published batches, and its replica) moved to
    another path: capture resumes there into the moved logs, the replica follows there, status
    reads there, and nothing is written to (or read from) where the dbfarm was."""
    import shutil

    from wlcore.health import status

    from ..fault.helpers import tree

    spark.range(2).write.format("delta").save(os.path.join(dbfarm, "mv", "s", "t"))  # the snapshot's
    m = wlc.master("mv", dbfarm=dbfarm)
    wlc.beat(0)
    spark.range(2, 4).write.format("delta").mode("append").save(m.table_path("s.t"))
    first = wlc.flush()
    assert wlr.replicate("mv", replica="r", dbfarm=dbfarm, follow=False).tick() == first
    m.close()
    wlc._current = None
    moved = str(tmp_path / "moved")
    shutil.copytree(dbfarm, moved)
    aside = str(tmp_path / "aside")
    os.rename(dbfarm, aside)  # where the dbfarm was is gone: a path kept to it would fail
    before = tree(aside)
    try:
        with pytest.warns(UserWarning, match="already in master mode"):
            m = wlc.master("mv", dbfarm=moved)
        assert m.logs == os.path.join(moved, "mv", "wlc_logs")
        spark.range(4, 6).write.format("delta").mode("append").save(m.table_path("s.t"))
        last = wlc.flush()
        assert last > first and status("mv", moved)["tick"] == last
        rep = wlr.replicate("mv", replica="r", dbfarm=moved, follow=False)
        assert rep.tick() == last and rows(rep.table("s.t")) == [(i,) for i in range(6)]
        fresh = wlr.replicate("mv", replica="r2", dbfarm=moved, follow=False)  # from the moved snapshot
        assert rows(fresh.table("s.t")) == [(i,) for i in range(6)]
        m.close()
        assert tree(aside) == before
    finally:
        os.rename(aside, dbfarm)
