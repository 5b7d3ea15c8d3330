"""Replay semantics on real Delta tables: consistent cut by instant, keys, duplicates,
schema changes, MERGE, snapshot, the tmp schema, follow mode."""

import os
import time
from datetime import datetime, timezone

import pytest

import wlc
import wlr

from ..waiting import wait_until
from .helpers import master_rows, rows, sql

pytestmark = pytest.mark.spark


def test_point_in_time_is_a_consistent_cut_across_tables(spark, master, dbfarm):
    a, b = master.table_path("s.a"), master.table_path("s.b")
    sql(spark, f"CREATE TABLE delta.`{a}` (k INT, v STRING) USING delta")
    sql(spark, f"CREATE TABLE delta.`{b}` (k INT, v STRING) USING delta")
    sql(spark, f"INSERT INTO delta.`{a}` VALUES (1, 'a1')")
    sql(spark, f"INSERT INTO delta.`{b}` VALUES (1, 'b1')")
    cut = datetime.now(timezone.utc)
    time.sleep(0.05)  # commit times are milliseconds: keep the next commit strictly after the cut
    sql(spark, f"INSERT INTO delta.`{a}` VALUES (2, 'a2')")
    sql(spark, f"UPDATE delta.`{b}` SET v = 'b1x'")
    rep = wlr.replicate("m", until=cut, replica="pit", dbfarm=dbfarm)
    assert rows(rep.table("s.a")) == [(1, "a1")]
    assert rows(rep.table("s.b")) == [(1, "b1")]
    assert rep.tick() == 3 and rep.clock() <= cut
    # the same cut as an ISO-8601 string on a fresh replica
    rep2 = wlr.replicate("m", until=cut.isoformat(), replica="pit2", dbfarm=dbfarm)
    assert rep2.tick() == 3
    rep.replicate(follow=False)
    assert rows(rep.table("s.a")) == master_rows(spark, a)
    assert rows(rep.table("s.b")) == [(1, "b1x")]
    sql(spark, f"DELETE FROM delta.`{a}`")  # without a predicate
    rep.replicate(follow=False)
    assert rows(rep.table("s.a")) == [] and rows(rep.table("s.b")) == [(1, "b1x")]


def test_keys_duplicates_merge_schema_change(spark, master, dbfarm):
    k, d = master.table_path("s.keyed"), master.table_path("s.dup")
    sql(
        spark,
        f"CREATE TABLE delta.`{k}` (id BIGINT NOT NULL, part STRING, amount DECIMAL(10,2)) USING delta "
        "PARTITIONED BY (part) TBLPROPERTIES ('wlc.key' = 'id', 'team' = 'etl')",
    )
    sql(spark, f"ALTER TABLE delta.`{k}` ADD CONSTRAINT positive CHECK (amount >= 0)")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 'x', 1.50), (2, 'x', 2.00), (3, 'y', 3.25)")
    sql(spark, f"UPDATE delta.`{k}` SET amount = amount + 1 WHERE id = 2")
    sql(spark, f"UPDATE delta.`{k}` SET id = 30 WHERE id = 3")  # a key change: delete + insert by key
    from delta.tables import DeltaTable

    src = spark.createDataFrame([(1, "x", 9.0), (4, "z", 4.0)], "id bigint, part string, amount double")
    DeltaTable.forPath(spark, k).alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(
        set={"amount": "s.amount"}
    ).whenNotMatchedInsertAll().execute()
    wlc.flush()
    sql(spark, f"DELETE FROM delta.`{k}` WHERE id = 2")
    sql(spark, f"ALTER TABLE delta.`{k}` ADD COLUMNS (note STRING)")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (5, 'x', 5.00, 'new')")

    sql(spark, f"CREATE TABLE delta.`{d}` (i INT, s STRING) USING delta")
    sql(spark, f"INSERT INTO delta.`{d}` VALUES (1, 'a'), (1, 'a'), (1, 'a'), (2, 'b')")
    # an overwrite leaving one of the three identical rows: CDF says delete 3, insert 1
    spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "i int, s string").write.format("delta").mode(
        "overwrite"
    ).save(d)
    wlc.flush()
    sql(spark, f"DELETE FROM delta.`{d}` WHERE i = 2")

    rep = wlr.replicate("m", replica="copy", dbfarm=dbfarm, follow=False)
    assert rows(rep.table("s.keyed")) == master_rows(spark, k)
    assert rows(rep.table("s.dup")) == [(1, "a"), (3, "c")]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{rep.path_of('s.keyed')}`").collect()[0]
    assert detail["partitionColumns"] == ["part"]
    assert detail["properties"]["wlc.key"] == "id" and detail["properties"]["team"] == "etl"
    assert detail["properties"]["delta.constraints.positive"] == "amount >= 0"
    fields = {f.name: f for f in rep.table("s.keyed").schema.fields}
    assert list(fields) == ["id", "part", "amount", "note"] and not fields["id"].nullable
    # constraints hold on the replica too
    with pytest.raises(Exception, match="(?i)constraint|CHECK"):
        spark.sql(f"INSERT INTO delta.`{rep.path_of('s.keyed')}` VALUES (9, 'x', -1.0, null)")


def test_snapshot_vacuum_and_tmp_schema(spark, dbfarm):
    base = os.path.join(dbfarm, "snapdb")
    t, tmp = f"{base}/s/t", f"{base}/tmp/scratch"
    spark.range(5).selectExpr("id", "id * 2 AS twice").write.format("delta").save(t)
    spark.range(3).write.format("delta").save(tmp)
    spark.sql(f"DELETE FROM delta.`{t}` WHERE id = 0")
    m = wlc.master("snapdb", dbfarm=dbfarm)
    wlc.beat(0)
    # master data rewritten and vacuumed: the snapshot is a copy, it does not depend on old files
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.sql(f"UPDATE delta.`{t}` SET twice = -1")
    spark.sql(f"VACUUM delta.`{t}` RETAIN 0 HOURS")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    spark.range(10).write.format("delta").mode("append").save(tmp)
    wlc.flush()
    rep = wlr.replicate("snapdb", replica="snaprep", dbfarm=dbfarm, follow=False)
    assert rep.tick() == 0  # the UPDATE; VACUUM and the tmp schema are not transactions
    assert rows(rep.table("s.t")) == [(i, -1) for i in range(1, 5)]
    assert not os.path.exists(os.path.join(dbfarm, "snaprep", "tmp"))
    assert not os.path.exists(os.path.join(base, "wlc_snapshot", "tmp"))
    m.close()


def test_snapshot_alone(spark, dbfarm):
    base = os.path.join(dbfarm, "sdb")
    spark.range(4).write.format("delta").save(f"{base}/s/t")
    m = wlc.master("sdb", dbfarm=dbfarm)
    assert m.config.snapshot.endswith("wlc_snapshot/initial")
    rep = wlr.replicate("sdb", replica="srep", dbfarm=dbfarm, follow=False)
    assert rep.tick() == -1 and rows(rep.table("s.t")) == [(i,) for i in range(4)]
    m.close()


def test_follow_mode_picks_up_new_batches(spark, master, dbfarm):
    p = master.table_path("s.f")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    rep = wlr.replicate("m", replica="follower", dbfarm=dbfarm)  # follows in the background
    assert rep.following()
    last = sql(spark, f"INSERT INTO delta.`{p}` VALUES (1), (2)")
    wait_until(lambda: rep.tick() >= last, 60, f"the follower to apply transaction {last}")
    assert rep.tick() == last
    assert rows(rep.table("s.f")) == [(1,), (2,)]
    wlr.stop()
    assert not rep.following()
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (3)")
    assert rep.tick() == last  # stopped: nothing more applied
