"""Change rows copied by delta-rs (:func:`wlc.capture.deltars_copy`): the same rows Spark's change feed
reads, in files Spark and replay read alike, and Spark's copy wherever delta-rs may not read a
table as Spark does."""

import glob
import os

import pyarrow.parquet as pq
import pytest

import wlc
import wlr

from .helpers import local, master_rows, rows, sql

pytestmark = pytest.mark.spark


def batch_files(master, table: str) -> list[str]:
    """The change-row files of ``table`` in the master's batches."""
    return glob.glob(os.path.join(master.logs, "m_*", "rows", table, "*", "*.parquet"))


def writers(master, table: str) -> set[str]:
    """Which library wrote the table's change-row files: ``arrow`` (delta-rs's copy) or ``spark``."""
    made = {pq.ParquetFile(f).metadata.created_by for f in batch_files(master, table)}
    return {"arrow" if "parquet-cpp-arrow" in m else "spark" if "parquet-mr" in m else m for m in made}


def feed_equals_batches(spark, master, table: str, path: str) -> None:
    """The table's change rows in the batches are, as a multiset, Spark's change feed of the same
    versions (every column, the change type and the version)."""
    folders = sorted({os.path.dirname(f) for f in batch_files(master, table)})
    versions = [int(f.rsplit("=", 1)[1]) for f in folders]
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [spark.read.parquet(f).withColumn("__version", F.lit(v).cast("long")) for f, v in zip(folders, versions)]
    got = reduce(lambda a, b: a.unionByName(b), parts)  # the version from the folder names, as replay takes it
    feed = spark.sql(f"SELECT * FROM table_changes_by_path('{path}', {min(versions)}, {max(versions)})")
    want = feed.select(*[c for c in got.columns if c != "__version"], feed["_commit_version"].alias("__version"))
    types = [(f.name, f.dataType) for f in got.schema]
    assert types == [(f.name, f.dataType) for f in want.schema], (got.schema, want.schema)
    extra, lacking = got.exceptAll(want).collect(), want.exceptAll(got).collect()
    assert not extra and not lacking, (extra, lacking)
    assert got.count() == want.count() > 0


def test_change_rows_are_copied_by_delta_rs_as_spark_reads_them(spark, master, dbfarm):
    """Inserts, updates, deletes (of some rows, and of whole files: no change-data files), MERGEs
    and an overwrite, on tables of flat types (TIMESTAMP_NTZ of the year 1500, decimals, dates,
    binary, NaN, -0.0), copied by delta-rs: the same rows, versions and types as Spark's change
    feed, and a replica equal to the master."""
    k, u = master.table_path("s.k"), master.table_path("s.u")
    sql(
        spark,
        f"CREATE TABLE delta.`{k}` (id BIGINT, b TINYINT, v INT, note STRING, local TIMESTAMP_NTZ, "
        "d DECIMAL(12, 3), day DATE, raw BINARY, x DOUBLE, ok BOOLEAN) USING delta TBLPROPERTIES ('wlc.key' = 'id')",
    )
    sql(spark, f"CREATE TABLE delta.`{u}` (a INT, s STRING) USING delta")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    sql(
        spark,
        f"INSERT INTO delta.`{k}` VALUES (1, 1, 0, 'a', timestamp_ntz'1500-01-01 10:00:00.123456', 1.5, "
        "date'1500-01-01', X'00FF', double('NaN'), true), (2, -1, 0, NULL, NULL, NULL, NULL, NULL, -0.0, NULL), "
        "(3, 0, 0, 'c', timestamp_ntz'2024-02-29 23:59:59.999999', 12345678.901, date'2024-02-29', X'', 1e300, false)",
    )
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (1, 'x'), (1, 'x'), (2, 'y')")
    sql(spark, f"UPDATE delta.`{k}` SET v = v + 1, note = 'upd' WHERE id = 1")
    sql(spark, f"DELETE FROM delta.`{k}` WHERE id = 2")
    sql(
        spark,
        f"MERGE INTO delta.`{k}` t USING (SELECT 3 AS id, 7 AS v UNION ALL SELECT 4, 8) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)",
    )
    sql(spark, f"DELETE FROM delta.`{u}`")  # whole files removed: the feed reads their rows as deletes
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (3, 'z'), (3, 'z')")
    sql(spark, f"INSERT OVERWRITE delta.`{u}` VALUES (4, 'w')")
    wlc.flush()
    for name, path in (("s.k", k), ("s.u", u)):
        assert writers(master, name) == {"arrow"}, name
        feed_equals_batches(spark, master, name, path)
    rep.replicate(follow=False)
    assert repr(rows(rep.table("s.k"))) == repr(master_rows(spark, k))  # NaN equal to NaN
    assert rows(rep.table("s.u")) == master_rows(spark, u)


def test_a_table_delta_rs_may_not_read_as_spark_is_copied_by_spark(spark, master, dbfarm):
    """A partitioned table, a table with column mapping and one with a TIMESTAMP column (Spark
    writes INT96, which delta-rs reads through nanoseconds: the year 1500 would wrap) keep Spark's
    copy, whose rows replay as before."""
    p, c, t = master.table_path("s.p"), master.table_path("s.c"), master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{t}` (id INT, ts TIMESTAMP) USING delta")
    sql(spark, f"CREATE TABLE delta.`{p}` (id INT, part STRING) USING delta PARTITIONED BY (part)")
    sql(
        spark,
        f"CREATE TABLE delta.`{c}` (id INT, v INT) USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
    )
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1, 'a'), (2, 'b')")
    sql(spark, f"INSERT INTO delta.`{c}` VALUES (1, 1), (2, 2)")
    sql(spark, f"UPDATE delta.`{c}` SET v = 5 WHERE id = 1")
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (1, timestamp'1500-03-01 12:00:00.123456'), (2, NULL)")
    wlc.flush()
    assert writers(master, "s.p") == writers(master, "s.c") == writers(master, "s.t") == {"spark"}
    feed_equals_batches(spark, master, "s.t", t)
    rep.replicate(follow=False)
    assert rows(rep.table("s.p")) == master_rows(spark, p)
    assert rows(rep.table("s.c")) == master_rows(spark, c)
    assert rows(rep.table("s.t")) == master_rows(spark, t)


def test_a_table_made_again_in_its_folder_is_one_drop_then_the_new_table(spark, master, dbfarm):
    """A table deleted and made again by delta-rs between two scans: capture records one DROP
    TABLE, timed before the new table's first version, then its versions; a replica holds the
    new table's rows. (The drop was planned again at each scan while the new table's first
    version was still within capture.settle, one transaction each.)"""
    import shutil

    import pyarrow as pa
    from deltalake import write_deltalake

    from wlcore.logstore import LogStore
    from wlcore.storage import Storage

    t = master.table_path("s.t")
    write_deltalake(t, pa.table({"id": [0]}))
    write_deltalake(t, pa.table({"id": [1]}), mode="append")
    master.flush()
    shutil.rmtree(local(t))
    write_deltalake(t, pa.table({"id": [100]}))
    for i in range(1, 4):
        write_deltalake(t, pa.table({"id": [100 + i]}), mode="append")
    tick = master.flush()
    store = LogStore(Storage.of(master.logs), master.path, master.logs, "m")
    txns = [tx for b in store.batches() for tx in store.manifest(b).txns if tx.table == "s.t"]
    ops = [tx.operation for tx in txns]
    assert ops.count("DROP TABLE") == 1, ops
    drop = ops.index("DROP TABLE")
    assert [tx.version for tx in txns[drop + 1 : drop + 5]] == [0, 1, 2, 3], ops
    assert txns[drop].time < txns[drop + 1].time
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    rep.replicate(until=tick, follow=False)
    assert rows(rep.table("s.t")) == [(100,), (101,), (102,), (103,)]
    rep.close()


def test_a_table_made_again_while_capture_is_down_is_told_from_the_log_it_read(spark, master, dbfarm):
    """A restarted capture lists a table's log from its cursor only where the commit file at the
    cursor holds the text it read: a table made again in its folder while nobody captured, as
    long again and longer (other text at the cursor's version), is one DROP TABLE and the new
    table's versions; a table written on meanwhile is read on from its cursor."""
    import shutil

    import pyarrow as pa
    from deltalake import write_deltalake

    from wlcore.logstore import LogStore
    from wlcore.storage import Storage

    t, u = master.table_path("s.t"), master.table_path("s.u")
    for i in range(3):
        write_deltalake(t, pa.table({"id": [i]}), mode="append")
        write_deltalake(u, pa.table({"id": [i]}), mode="append")
    master.flush()
    master.close()  # the capturing process goes away
    shutil.rmtree(local(t))
    for i in range(5):
        write_deltalake(t, pa.table({"id": [100 + i]}), mode="append")
    write_deltalake(u, pa.table({"id": [3]}), mode="append")
    with pytest.warns(UserWarning, match="already in master mode"):
        again = wlc.master("m", dbfarm=dbfarm)
    try:
        tick = again.flush()
        store = LogStore(Storage.of(again.logs), again.path, again.logs, "m")
        txns = [tx for b in store.batches() for tx in store.manifest(b).txns]
        ops = [(tx.operation, tx.version) for tx in txns if tx.table == "s.t"]
        assert [op for op, _ in ops].count("DROP TABLE") == 1, ops
        drop = [op for op, _ in ops].index("DROP TABLE")
        # the new table's writes (capture switches its change feed on: one more version)
        assert [v for op, v in ops[drop + 1 :] if op == "WRITE"] == [0, 1, 2, 3, 4], ops
        read_on = [tx.version for tx in txns if tx.table == "s.u"]
        assert read_on == list(range(len(read_on))), read_on  # no version twice, none left out
        rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
        rep.replicate(until=tick, follow=False)
        assert rows(rep.table("s.t")) == [(100,), (101,), (102,), (103,), (104,)]
        assert rows(rep.table("s.u")) == [(0,), (1,), (2,), (3,)]
        rep.close()
    finally:
        again.close()
