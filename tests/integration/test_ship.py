"""Logs shipped to another folder and to an S3-compatible server (moto, started by the test
on 127.0.0.1): each batch once, resumable after a crash mid-copy, replicas reading the copy
(Spark through s3a) without touching the master's folder."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import wlc
import wlr
from wlcore import batch as batchfmt
from wlcore.logstore import LogStore
from wlcore.ship import ShipError
from wlcore.storage import MARKER, Storage

from .helpers import master_rows, rows, sql

pytestmark = pytest.mark.spark


def _write(spark, master, n0: int, n: int) -> str:
    """``n`` inserts then an update of ``sales.orders`` (created first when ``n0`` is 0)."""
    t = master.table_path("sales.orders")
    if n0 == 0:
        sql(spark, f"CREATE TABLE delta.`{t}` (id INT, region STRING, amount INT) USING delta")
    for i in range(n0, n0 + n):
        sql(spark, f"INSERT INTO delta.`{t}` VALUES ({i}, '{'EU' if i % 2 else 'US'}', {i * 10})")
    sql(spark, f"UPDATE delta.`{t}` SET amount = amount + 1 WHERE id = {n0}")
    return t


def _published(dest: str) -> list[str]:
    st = Storage.of(dest)
    return [n for n in st.published(Storage.join(dest, "wlc_logs"))]


def _hidden(path: str):
    """The master's folder moved aside while a replica reads the shipped copy alone."""

    class Hide:
        def __enter__(self):
            os.rename(path, path + ".away")

        def __exit__(self, *exc):
            os.rename(path + ".away", path)

    return Hide()


def test_ship_to_a_folder_each_batch_once_and_replicate_from_it(spark, master, dbfarm, tmp_path):
    t = _write(spark, master, 0, 3)
    dest = str(tmp_path / "far" / "m")
    first = wlc.ship(dest)
    logs = master.logs
    level0 = [b.name for b in LogStore(Storage.of(logs), master.path, logs, "m").batches()]
    assert first.batches == level0 and first.bytes > 0
    assert _published(dest) == level0
    again = wlc.ship(dest)
    assert again.batches == [] and again.bytes == 0  # never copied twice
    _write(spark, master, 3, 2)
    more = wlc.ship(dest)
    assert len(more.batches) == 3 and set(more.batches).isdisjoint(first.batches)
    cfg = dict(line.split("=", 1) for line in open(os.path.join(dest, "wlc.config")).read().splitlines())
    assert cfg["database"] == "m" and cfg["logs"] == "wlc_logs" and cfg["tick"] == str(master.tick())
    expected = master_rows(spark, t)
    log = [r["gtid"] for r in wlr.transactions("m")]
    other = str(tmp_path / "elsewhere")
    os.makedirs(other)
    master.close()
    with _hidden(master.path):  # the replica reads the shipped copy alone
        assert [r["gtid"] for r in wlr.transactions("m", logs=dest)] == log
        rep = wlr.replicate("m", replica="far", dbfarm=other, logs=dest, follow=False)
        assert rows(rep.table("sales.orders")) == expected
        assert rep.state.source == dest and rep.state.source_kind == "shipped"
        assert rep.status()["source"] == f"shipped copy {dest}"
        # a later call without logs= reads where it read last
        again = wlr.Replica("m", replica="far", dbfarm=other)
        assert again.source.root == dest
        # the copy moved (another mount point, a replicated bucket): read where it is now
        moved = dest + "_moved"
        os.rename(dest, moved)
        rep2 = wlr.replicate("m", replica="far2", dbfarm=other, logs=moved, follow=False)
        assert rows(rep2.table("sales.orders")) == expected
        os.rename(moved, dest)
    # a destination holding another database's copy is refused before anything is copied
    with pytest.raises(ShipError, match="not of 'x'"):
        from wlcore.ship import ship

        ship(Storage.of(dbfarm), master.path, "x", dest)


@pytest.mark.parametrize("crash_at", ["ship.file", "ship.verified"])
def test_a_crash_in_the_middle_of_shipping_to_a_folder_resumes(spark, master, dbfarm, tmp_path, crash_at):
    _crash_then_resume(spark, master, dbfarm, str(tmp_path / "far"), crash_at)


def _crash_then_resume(spark, master, dbfarm: str, dest: str, crash_at: str) -> None:
    """Ship the CREATE, write three batches with rows, kill a ``wlc ship`` at ``crash_at`` in
    the first of them, then ship again: exactly the missing bytes are copied."""
    t = master.table_path("sales.orders")
    sql(spark, f"CREATE TABLE delta.`{t}` (id INT, region STRING, amount INT) USING delta")
    assert len(wlc.ship(dest).batches) == 1
    _write(spark, master, 1, 2)
    env = dict(os.environ, WLC_CRASH_AT=crash_at)
    proc = subprocess.run(
        [sys.executable, "-m", "wlc", "ship", dbfarm, "m", dest], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -9, proc.stderr[-2000:]  # killed by the crash point, in the middle of a batch
    src = Storage.of(master.logs)
    batches = [(b.number, b.path) for b in LogStore(src, master.path, master.logs, "m").batches()][1:]
    assert len(_published(dest)) == 1  # nothing half-copied is visible
    st = Storage.of(dest)
    assert [
        n for n in st.listdir(Storage.join(dest, "wlc_logs")) if not n.endswith(MARKER) and n not in _published(dest)
    ], "the crash left no partial batch"
    manifests = [batchfmt.read_manifest(src, p) for _n, p in batches]
    full = sum(
        sum(f.size for f in m.files.values()) + os.path.getsize(os.path.join(p, batchfmt.MANIFEST))
        for m, (_n, p) in zip(manifests, batches)
    )
    first = manifests[0].files
    kept = (
        first[sorted(first)[0]].size
        if crash_at == "ship.file"  # the one file copied before the kill
        else sum(f.size for f in first.values())
    )  # every file, verified
    report = wlc.ship(dest)
    assert report.batches == [os.path.basename(p) for _n, p in batches]
    assert report.bytes == full - kept  # what was there intact was not copied again
    for _m, (_n, p) in zip(manifests, batches):  # published only verified, complete batches
        there = Storage.join(dest, "wlc_logs", os.path.basename(p))
        assert batchfmt.verify_files(st, there, batchfmt.read_manifest(st, there)) == {}
    assert len(_published(dest)) == 1 + len(batches)
    assert not [n for n in st.listdir(Storage.join(dest, "wlc_logs")) if n.startswith(".ship-")]
    rep = wlr.replicate("m", replica="after_crash", logs=dest, follow=False)
    assert rows(rep.table("sales.orders")) == master_rows(spark, t)


def test_ship_to_s3_and_replicate_through_s3a(spark, dbfarm, s3, tmp_path):
    # a master that began with a table: its snapshot is shipped too, and the replica starts from it
    pre = os.path.join(dbfarm, "m", "sales", "orders")
    spark.sql(f"CREATE TABLE delta.`{pre}` (id INT, region STRING, amount INT) USING delta")
    spark.sql(f"INSERT INTO delta.`{pre}` VALUES (100, 'EU', 1), (101, 'US', 2)")
    m = wlc.master("m", dbfarm=dbfarm)
    wlc.beat(0)
    try:
        sql(spark, f"INSERT INTO delta.`{pre}` VALUES (102, 'EU', 3)")
        sql(spark, f"UPDATE delta.`{pre}` SET amount = 20 WHERE id = 101")
        dest = f"{s3}/shipped/m"
        report = wlc.ship(dest)
        assert report.snapshots == ["initial"] and len(report.batches) == 2
        st = Storage.of(dest)
        assert st.exists(f"{dest}/wlc_logs/{report.batches[0]}{MARKER}")
        expected = master_rows(spark, pre)
        (tmp_path / "far").mkdir()
        rep = wlr.replicate("m", replica="r_s3", dbfarm=str(tmp_path / "far"), logs=dest, follow=False)
        assert rows(rep.table("sales.orders")) == expected
        assert rep.state.source == dest
        # the replica's own tables may live in the object store too
        on_s3 = wlr.replicate("m", replica="r_on_s3", dbfarm=f"{s3}/replicas", logs=dest, follow=False)
        assert rows(on_s3.table("sales.orders")) == expected
        assert Storage.of(s3).exists(f"{s3}/replicas/r_on_s3/sales/orders/_delta_log")
        # following a shipper: new batches reach the replica through the object store
        shipper = m.ship(dest, follow=True)
        sql(spark, f"DELETE FROM delta.`{pre}` WHERE id = 100")
        rep.replicate(until=m.tick(), follow=False, timeout=60)
        assert rows(rep.table("sales.orders")) == master_rows(spark, pre)
        shipper.stop()
        assert shipper.error is None
    finally:
        m.close()


def test_a_crash_in_the_middle_of_shipping_to_s3_resumes(spark, master, dbfarm, s3):
    _crash_then_resume(spark, master, dbfarm, f"{s3}/m", "ship.file")
