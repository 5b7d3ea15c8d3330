"""Operator journeys: features run together end to end, as an operator runs them, and the replica
checked against the master at every transaction, not only at the end."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from datetime import datetime, timezone

import pytest

import wlc
import wlr
from wlc.master import Master
from wlcore.deltalog import list_versions, read_commit
from wlcore.storage import Storage

from ..fault.helpers import master_state, published, run_module, start_module, stop
from ..waiting import wait_until

pytestmark = pytest.mark.spark


def _published_past(farm: str, db: str, proc: subprocess.Popen, instant: datetime) -> bool:
    """True once capture's watermark passed ``instant``: every commit before it is published."""
    cfg = master_state(farm, db, proc)
    return cfg is not None and cfg.watermark_time is not None and cfg.watermark_time > instant


def _records(farm: str, db: str) -> list:
    return published(os.path.join(farm, db, "wlc_logs"), db)


def _rows(df) -> Counter:
    return Counter(tuple(r) for r in df.collect())


def _master_at(spark, path: str, instant: str) -> Counter:
    """The rows of the master table at ``path`` as of ``instant`` (Delta time travel; an instant
    after its latest commit reads the latest version, which Delta asks to name so)."""
    from pyspark.errors import AnalysisException

    try:
        return _rows(spark.read.format("delta").option("timestampAsOf", instant).load(path))
    except AnalysisException as exc:
        if "DELTA_TIMESTAMP_GREATER_THAN_COMMIT" not in str(exc):
            raise
        return _rows(spark.read.format("delta").load(path))


def test_restore_replace_under_running_capture_then_a_restart_then_every_point_in_time(spark, dbfarm):
    """A table put back with ``wlr restore --replace`` while ``wlc capture`` runs in its own
    process, then capture stopped and started again: capture publishes each Delta version of the
    master's tables once, with its commit time, a restart publishes nothing new, and a
    point-in-time replica at every published transaction equals the master's tables at that
    instant (Delta time travel)."""
    Master("shop", dbfarm=dbfarm, capture=False).create(beat=0)
    cap = start_module("wlc", "capture", dbfarm, "shop")
    try:
        m = wlc.attach("shop", dbfarm=dbfarm)  # written by name; capture runs in the other process
        m.create_schema("sales")
        spark.sql("CREATE TABLE sales.orders (id INT, total DOUBLE) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
        spark.sql("INSERT INTO sales.orders VALUES (1, 9.5), (2, 20.0), (3, 7.0)")
        spark.sql("UPDATE sales.orders SET total = total * 2 WHERE id = 2")
        spark.sql("CREATE TABLE sales.events (k BIGINT, v STRING) USING delta")
        spark.sql("INSERT INTO sales.events SELECT id, CAST(id AS STRING) FROM range(500)")
        spark.sql("DELETE FROM sales.orders WHERE id = 1")
        now = datetime.now(timezone.utc)
        wait_until(lambda: _published_past(dbfarm, "shop", cap, now), 180, "capture to publish the first writes")
        before = max(r.txn for r in _records(dbfarm, "shop") if r.table == "sales.orders" and r.operation == "UPDATE")
        wlr.replicate("shop", until=before, replica="before", dbfarm=dbfarm, follow=False)
        spark.sql("DELETE FROM sales.events")  # the events table empty for a while
        spark.sql("INSERT INTO sales.orders VALUES (4, 1.0)")
        done = run_module("wlr", "restore", dbfarm, "before", "sales.orders", "--into", "shop", "--replace")
        assert done.returncode == 0, done.stdout + done.stderr
        spark.sql("INSERT INTO sales.orders VALUES (5, 5.0)")
        spark.sql("INSERT INTO sales.events VALUES (1, 'again')")
        now = datetime.now(timezone.utc)
        wait_until(lambda: _published_past(dbfarm, "shop", cap, now), 180, "capture to publish the restore")
    finally:
        out = stop(cap)
    records = _records(dbfarm, "shop")
    tick = records[-1].txn

    # each Delta version once, with the commit time Delta's time travel gives it; no invented drop
    assert [r.txn for r in records] == list(range(tick + 1))
    assert not [r for r in records if r.ddl == "drop"], [(r.txn, r.table, r.operation) for r in records]
    for table in ("sales.orders", "sales.events"):
        path = os.path.join(dbfarm, "shop", *table.split("."))
        storage = Storage.of(path)
        mine = [r for r in records if r.table == table]
        assert [r.version for r in mine] == sorted({r.version for r in mine}), f"{table} published twice: {mine}"
        changed = [v for v in list_versions(storage, path) if read_commit(storage, path, v).data_change]
        assert set(changed) <= {r.version for r in mine}, f"{table}: versions not published"
    assert [r.operation for r in records if r.table == "sales.orders"][-3:] == ["REPLACE TABLE", "WRITE", "WRITE"]
    times = [r.time for r in records]
    assert times == sorted(times)

    # a restart on the untouched master publishes nothing new
    again = start_module("wlc", "capture", dbfarm, "shop")
    try:
        now = datetime.now(timezone.utc)
        wait_until(lambda: _published_past(dbfarm, "shop", again, now), 180, "the restarted capture to scan")
    finally:
        out += stop(again)
    assert _records(dbfarm, "shop")[-1].txn == tick, out[-3000:]

    # a point-in-time replica at every published transaction equals the master at that instant
    rep = wlr.Replica("shop", replica="pit", dbfarm=dbfarm)
    for rec in records:
        rep.replicate(until=rec.txn, follow=False, collapse=False)
        instant = rec.time.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        for table in ("sales.orders", "sales.events"):
            path = os.path.join(dbfarm, "shop", *table.split("."))
            born = read_commit(Storage.of(path), path, 0, file_time=True).timestamp
            on_replica = os.path.isdir(os.path.join(rep.path, *table.split("."), "_delta_log"))
            if born > rec.time:
                assert not on_replica, f"{table} on the replica at transaction {rec.txn}, before the master made it"
                continue
            want = _master_at(spark, path, instant)
            got = _rows(rep.table(table)) if on_replica else None
            assert got == want, (
                f"transaction {rec.txn} ({rec.table} {rec.operation}, {instant}): {table} has "
                f"{sum(want.values())} rows on the master, {got and sum(got.values())} on the replica"
            )
