"""Cascading replicas with the master's GTIDs, and a master restored from a copy refused by
the replicas that had gone further (epochs, CouchDB's "Ruh Roh")."""

from __future__ import annotations

import os
import shutil

import pytest

import wlc
import wlr
from wlcore import batch as batchfmt
from wlcore.logstore import LogStore
from wlcore.storage import Storage
from wlr.errors import DivergedError, ReplicaStateError

from .helpers import master_rows, rows, sql

pytestmark = pytest.mark.spark


def _insert(spark, path: str, *ids: int) -> int:
    for i in ids:
        sql(spark, f"INSERT INTO delta.`{path}` VALUES ({i}, 'v{i}')")
    return wlc.tick()


def _versions(rep, name: str) -> int:
    """The replica table's Delta version count (a new copy would start it again)."""
    return len(rep.spark.sql(f"DESCRIBE HISTORY delta.`{rep.path_of(name)}`").collect())


def test_two_level_cascade_switching_source_without_a_new_copy(spark, master, dbfarm):
    t = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{t}` (k INT, v STRING) USING delta")
    _insert(spark, t, 1, 2)
    r1 = wlr.replicate("m", replica="r1", relay=True, follow=False)
    relay_logs = os.path.join(r1.path, "wlr_relay", "wlc_logs")
    shipped = [b.path for b in LogStore(Storage.of(relay_logs), os.path.dirname(relay_logs), relay_logs, "m").batches()]
    assert len(shipped) == 3
    gtids = [rec.gtid for p in shipped for rec in batchfmt.read_manifest(Storage.of(p), p).txns]
    assert gtids == [f"{master.config.dbid}:{i}" for i in range(3)]  # the master's own GTIDs
    r2 = wlr.replicate(source="r1", replica="r2", follow=False)
    assert r2.master == "m" and r2.tick() == 2 and r2.state.source_kind == "relay"
    assert rows(r2.table("s.t")) == master_rows(spark, t)
    # the master moves on; the relay has not applied it: r2 reading the relay sees nothing new
    last = _insert(spark, t, 3, 4)
    r2 = wlr.replicate(source="r1", replica="r2", follow=False)
    assert r2.tick() == 2
    history = _versions(r2, "s.t")
    # switch to the master: the same replica goes on from transaction 3, no new copy
    r2 = wlr.replicate(source="m", replica="r2", follow=False)
    assert r2.tick() == last and r2.state.source_kind == "master"
    assert rows(r2.table("s.t")) == master_rows(spark, t)
    assert _versions(r2, "s.t") > history  # appended to, not copied again
    # and back to the relay once it caught up and beyond
    last = _insert(spark, t, 5)
    wlr.replicate("m", replica="r1", follow=False)
    r2 = wlr.replicate(source="r1", replica="r2", follow=False)
    assert r2.tick() == last == r1.tick()
    assert rows(r2.table("s.t")) == master_rows(spark, t)
    started = [line for line in open(os.path.join(r2.path, "wlr.log")) if "started" in line]
    assert len(started) == 1  # made once, whatever it read from
    # a replica that does not relay cannot be a source
    with pytest.raises(ReplicaStateError, match="relays nothing yet"):
        wlr.replicate(source="r2", replica="r3", follow=False)


@pytest.mark.filterwarnings("ignore:database .m. is already in master mode")
def test_a_master_restored_from_a_copy_is_refused_by_replicas_that_went_further(spark, dbfarm, tmp_path):
    m = wlc.master("m", dbfarm=dbfarm)
    wlc.beat(0)
    t = m.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{t}` (k INT, v STRING) USING delta")
    _insert(spark, t, 1, 2)  # transactions 0..2
    m.close()
    backup = str(tmp_path / "backup")
    shutil.copytree(m.path, backup)  # a copy of the master at transaction 2
    m = wlc.master("m", dbfarm=dbfarm)  # a restart: a new epoch, the same history
    wlc.beat(0)
    behind = wlr.replicate("m", until=2, replica="behind", follow=False)
    _insert(spark, t, 3, 4)  # transactions 3..4
    ahead = wlr.replicate("m", replica="ahead", follow=False)
    assert ahead.tick() == 4
    dest = str(tmp_path / "shipped")
    wlc.ship(dest)
    before = rows(ahead.table("s.t"))
    m.close()
    shutil.rmtree(m.path)
    shutil.copytree(backup, m.path)  # restored: it stands at transaction 2 again
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # this JVM saw the newer table: forget it
    m = wlc.master("m", dbfarm=dbfarm)
    wlc.beat(0)
    with pytest.raises(wlc.ShipError, match="restored from an older copy"):
        wlc.ship(dest)  # the copy holds transactions the restored master no longer has
    _insert(spark, t, 30, 40, 50)  # other transactions 3..5
    with pytest.raises(DivergedError, match="another history from transaction 3") as err:
        wlr.replicate("m", replica="ahead", follow=False)
    assert err.value.txn == 3
    assert rows(wlr.Replica("m", replica="ahead").table("s.t")) == before  # nothing applied
    # a source whose wlc.config still tells the old history, with a batch of the new one
    # (the config is read before the batches): the batch's own epochs stop replay
    stale = str(tmp_path / "stale")
    wlc.ship(stale)
    with open(os.path.join(stale, "wlc.config")) as fh:
        cfg = dict(line.split("=", 1) for line in fh.read().splitlines())
    with open(os.path.join(dest, "wlc.config")) as fh:
        old = dict(line.split("=", 1) for line in fh.read().splitlines())
    cfg.update({k: old[k] for k in ("epochs", "epoch", "tick", "batches", "watermark")})
    with open(os.path.join(stale, "wlc.config"), "w") as fh:
        fh.write("".join(f"{k}={v}\n" for k, v in cfg.items()))
    with pytest.raises(DivergedError, match="from transaction 3"):
        wlr.replicate("m", replica="ahead", logs=stale, follow=False)
    assert rows(wlr.Replica("m", replica="ahead").table("s.t")) == before
    # a replica that stood at the restore point follows the new history
    behind = wlr.replicate("m", replica="behind", follow=False)
    assert rows(behind.table("s.t")) == master_rows(spark, t)
    # the shipped copy of the old history is not overwritten by the new one
    with pytest.raises(wlc.ShipError, match="another history"):
        wlc.ship(dest)
    m.close()
