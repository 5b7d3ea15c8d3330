"""A dbfarm in an S3-compatible object store (moto's server, started by the test run on
127.0.0.1 and stopped by its process id), as an operator runs it with the commands: the
master's tables written by Spark (s3a) and by delta-rs in the bucket, ``wlc capture`` and a
``wlr replicate --follow`` follower with its replica in the bucket, a table dropped by mistake
brought back from a replica at a point in time, and the follower promoted."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake

import wlr
from wlcore.logstore import LogStore
from wlcore.storage import Storage, deltars_options

from ..fault.helpers import master_state, run_module
from ..waiting import wait_until
from .helpers import Service, master_rows, rows

pytestmark = pytest.mark.spark


def _tick(farm: str, db: str, service: Service) -> int:
    """Master ``db``'s published tick (-1: none yet), checking that its capture ``service`` runs."""
    if service.proc.poll() is not None:
        raise AssertionError(f"capture of {db} ended: {service.stop()[-3000:]}")
    cfg = master_state(farm, db)
    return cfg.tick if cfg is not None else -1


def _published_past(farm: str, db: str, service: Service, instant: datetime) -> bool:
    """True once capture's watermark passed ``instant``: every commit before it is published."""
    _tick(farm, db, service)
    cfg = master_state(farm, db)
    return cfg is not None and cfg.watermark_time is not None and cfg.watermark_time > instant


def _replica_tick(farm: str, replica: str) -> int:
    from wlcore.state import read_replica_state

    cfg = read_replica_state(Storage.of(farm), Storage.join(farm, replica))
    return -1 if cfg is None else cfg.tick


def test_a_dbfarm_in_a_bucket_captured_followed_restored_and_promoted(spark, s3, tmp_path):
    farm = f"{s3}/farm"
    made = run_module("wlc", "master", farm, "shop", "--beat", "0")
    assert made.returncode == 0, made.stderr
    capture = Service("wlc", "capture", farm, "shop")
    follower = promoted = None
    try:
        orders = Storage.of(farm).uri(f"{farm}/shop/sales/orders")
        assert orders.startswith("s3a://")
        spark.sql(f"CREATE TABLE delta.`{orders}` (id INT, region STRING, amount INT) USING delta")
        spark.sql(f"INSERT INTO delta.`{orders}` VALUES (1, 'EU', 10), (2, 'US', 20), (3, 'EU', 30)")
        spark.sql(f"UPDATE delta.`{orders}` SET amount = 21 WHERE id = 2")
        events, opts = f"{farm}/shop/s/events", deltars_options(farm)
        write_deltalake(events, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), storage_options=opts)
        write_deltalake(events, pa.table({"id": [4], "v": ["d"]}), mode="append", storage_options=opts)
        DeltaTable(events, storage_options=opts).delete("id = 2")
        wait_until(lambda: _tick(farm, "shop", capture) >= 6, 180, "capture to publish the writes")

        follower = Service("wlr", "replicate", farm, "shop", "shop_rep", "--follow")
        tick = _tick(farm, "shop", capture)
        wait_until(lambda: _replica_tick(farm, "shop_rep") >= tick, 240, "the follower to catch up")
        rep = wlr.Replica("shop", replica="shop_rep", dbfarm=farm)
        assert rows(rep.table("sales.orders")) == master_rows(spark, orders)
        assert rows(rep.table("s.events")) == master_rows(spark, Storage.of(farm).uri(events))

        # a snapshot, level-1 batches and a prune, in the bucket, while capture and the follower run
        snap = run_module("wlc", "snapshot", farm, "shop")
        assert snap.returncode == 0, snap.stdout + snap.stderr
        compact = run_module("wlc", "compact", farm, "shop", "--level1", "2 batches")
        assert compact.returncode == 0, compact.stdout + compact.stderr
        store = LogStore(Storage.of(farm), f"{farm}/shop", f"{farm}/shop/wlc_logs", "shop")
        assert [b.level for b in store.compacted()] == [1, 1, 1], compact.stdout
        short = dict(yaml.safe_load(open(os.environ["WLC_CONFIG"])))
        short["master"] = {"retention": {"level0": "1s", "level1": "1s", "level2": "1s", "snapshots": "1s"}}
        cfg = tmp_path / "retention.yaml"
        cfg.write_text(yaml.safe_dump(short))
        prune = run_module("wlc", "prune", farm, "shop", WLC_CONFIG=str(cfg))
        assert prune.returncode == 0, prune.stdout + prune.stderr
        assert "earliest reachable point: transaction 6" in prune.stdout, prune.stdout
        assert store.compacted() == [] and [b.number for b in store.batches()][:1] == [6], prune.stdout
        # dropped by mistake: brought back from a replica made up to the tick before the drop
        before_drop = tick
        Storage.of(farm).rm(f"{farm}/shop/sales/orders")
        wait_until(lambda: _tick(farm, "shop", capture) > before_drop, 180, "capture to record the drop")
        pitr = wlr.replicate("shop", replica="shop_pitr", dbfarm=farm, until=before_drop, follow=False)
        done = pitr.restore_table("sales.orders", into="shop")
        assert done.rows == 3
        assert master_rows(spark, orders) == [(1, "EU", 10), (2, "US", 21), (3, "EU", 30)]
        pitr.close()
        # capture may publish the restore before the next line runs: wait on its watermark, not a tick count
        now = datetime.now(timezone.utc)
        wait_until(lambda: _published_past(farm, "shop", capture, now), 180, "capture to record the restore")
        tick = _tick(farm, "shop", capture)
        wait_until(lambda: _replica_tick(farm, "shop_rep") >= tick, 240, "the follower to follow the restore")
        assert rows(rep.table("sales.orders")) == master_rows(spark, orders)
        rep.close()

        # the master is lost; the follower is promoted and captures the writes made to it
        capture.stop()
        follower.stop()
        done = run_module("wlr", "promote", farm, "shop_rep", "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        promoted = Service("wlc", "capture", farm, "shop_rep")  # the old folder is still there: the new one by its name
        new_events = f"{farm}/shop_rep/s/events"
        write_deltalake(new_events, pa.table({"id": [5], "v": ["e"]}), mode="append", storage_options=opts)
        wait_until(lambda: _tick(farm, "shop_rep", promoted) > tick, 180, "the promoted master to publish")
        assert sorted(DeltaTable(new_events, storage_options=opts).to_pyarrow_table()["id"].to_pylist()) == [
            1,
            3,
            4,
            5,
        ]
    finally:
        for service in (capture, follower, promoted):
            if service is not None and service.proc.poll() is None:
                service.stop()


def test_capture_lists_a_log_in_a_bucket_from_its_cursor(spark, s3):
    """A table's log is listed whole once; each scan after lists only what came after capture's
    cursor (S3's StartAfter), and a table made again in the same folder is still found to be
    another table."""
    import wlc

    farm = f"{s3}/farm"
    Storage.of(farm).write_atomic(f"{farm}/.dbfarm", b"")
    m = wlc.master("m", dbfarm=farm)
    wlc.beat(0)
    listed: list[tuple[str, int]] = []  # (the request's StartAfter, keys returned) of each _delta_log listing

    def count(parsed, **_):
        if parsed.get("Prefix", "").endswith("/s/t/_delta_log/"):
            listed.append((parsed.get("StartAfter", ""), len(parsed.get("Contents", []))))

    fs = Storage.of(farm).fs
    fs.connect()
    fs.s3.meta.events.register("after-call.s3.ListObjectsV2", count)
    try:
        t, opts = f"{farm}/m/s/t", deltars_options(farm)
        write_deltalake(t, pa.table({"id": [0]}), storage_options=opts)
        for i in range(1, 5):
            write_deltalake(t, pa.table({"id": [i]}), mode="append", storage_options=opts)
        m.flush()
        listed.clear()
        write_deltalake(t, pa.table({"id": [5]}), mode="append", storage_options=opts)
        m.flush()
        m.flush()
        # each listing of the log of 7 commits returned at most 2 keys: the new commit and its
        # checksum after the cursor, or the one key asked for to see the log is there
        assert any(after.endswith(".json") for after, _ in listed) and all(keys <= 2 for _, keys in listed), listed
        assert sorted(r[0] for r in spark.read.format("delta").load(Storage.of(farm).uri(t)).collect()) == list(
            range(6)
        )
        # a restarted capture reads on from its cursor too: the commit file there is the one it read
        m.close()
        write_deltalake(t, pa.table({"id": [6]}), mode="append", storage_options=opts)
        listed.clear()
        with pytest.warns(UserWarning, match="already in master mode"):
            m = wlc.master("m", dbfarm=farm)
        m.flush()
        assert any(after.endswith(".json") for after, _ in listed) and all(keys <= 2 for _, keys in listed), listed
        # made again: a shorter log of other commits (the cursor's commit file gone), then as long again
        Storage.of(farm).rm(t)
        write_deltalake(t, pa.table({"id": [100]}), storage_options=opts)
        for i in range(1, 9):
            write_deltalake(t, pa.table({"id": [100 + i]}), mode="append", storage_options=opts)
        tick = m.flush()
        rep = wlr.replicate("m", replica="r", dbfarm=farm, follow=False)
        rep.replicate(until=tick, follow=False)
        assert sorted(r[0] for r in rep.table("s.t").collect()) == list(range(100, 109))
        rep.close()
    finally:
        fs.s3.meta.events.unregister("after-call.s3.ListObjectsV2", count)
        m.close()
