"""Delta Lake 4's own table features and a second writer engine on a master: capture never
stops, who can write the master never changes, and the replica equals the master."""

import os

import pytest

import wlc
import wlr

from .helpers import master_rows, rows, sql, table_definition

pytestmark = pytest.mark.spark


def restart(dbfarm: str, name: str = "m"):
    """Capture comes back after downtime (the statements before were written while it was away)."""
    with pytest.warns(UserWarning, match="already in master mode"):
        m = wlc.master(name, dbfarm=dbfarm)
    wlc.beat(0)
    return m


def test_type_widening_and_replaced_tables_written_while_capture_was_away(spark, master, dbfarm):
    """Versions before a non-additive schema change are read with their own schema: one
    table's type widening or replacement never stops capture of the database."""
    w, r = master.table_path("s.widened"), master.table_path("s.replaced")
    sql(
        spark,
        f"CREATE TABLE delta.`{w}` (k INT, v INT) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
    )
    sql(spark, f"CREATE TABLE delta.`{r}` (k INT, v STRING) USING delta")
    master.close()
    spark.sql(f"INSERT INTO delta.`{w}` VALUES (1, 1)")
    spark.sql(f"ALTER TABLE delta.`{w}` ALTER COLUMN v TYPE BIGINT")
    spark.sql(f"INSERT INTO delta.`{w}` VALUES (2, 3000000000)")
    spark.sql(f"UPDATE delta.`{w}` SET v = v + 1 WHERE k = 1")
    spark.sql(f"INSERT INTO delta.`{r}` VALUES (1, 'a')")
    spark.sql(f"REPLACE TABLE delta.`{r}` (k BIGINT, w DOUBLE, note STRING) USING delta")
    spark.sql(f"INSERT INTO delta.`{r}` VALUES (2, 2.5, 'b')")
    spark.createDataFrame([(3, "c")], "k int, other string").write.format("delta").mode("overwrite").option(
        "overwriteSchema", "true"
    ).save(r)
    spark.sql(f"INSERT INTO delta.`{r}` VALUES (4, 'd')")
    restart(dbfarm)
    late = master.table_path("s.late")  # made after: published with the rest
    spark.sql(f"CREATE TABLE delta.`{late}` (i INT) USING delta")
    spark.sql(f"INSERT INTO delta.`{late}` VALUES (7)")
    last = wlc.flush()
    assert last >= 10
    rep = wlr.replicate("m", replica="copy", dbfarm=dbfarm, follow=False)
    for name, path in (("s.widened", w), ("s.replaced", r), ("s.late", late)):
        assert rows(rep.table(name)) == master_rows(spark, path), name
        assert table_definition(rep.path_of(name)) == table_definition(path), name
    assert dict(rep.table("s.widened").dtypes)["v"] == "bigint"


def test_full_rows_of_every_type_are_matched(spark, master, dbfarm):
    """Unkeyed tables with MAP, nested maps, VARIANT, NaN, -0.0, NULL and duplicate rows:
    UPDATE and DELETE replay exactly (Spark has no equality on MAP or VARIANT)."""
    t = master.table_path("s.maps")
    sql(
        spark,
        f"CREATE TABLE delta.`{t}` (i INT, mp MAP<STRING, INT>, st STRUCT<a: ARRAY<MAP<STRING, DOUBLE>>>, "
        "v VARIANT, d DOUBLE) USING delta",
    )
    sql(
        spark,
        f"""INSERT INTO delta.`{t}` VALUES
        (1, map('a', 1, 'b', 2), named_struct('a', array(map('x', 1.0D))), parse_json('{{"k": [1, 2]}}'), 0.0D),
        (1, map('a', 1, 'b', 2), named_struct('a', array(map('x', 1.0D))), parse_json('{{"k": [1, 2]}}'), 0.0D),
        (2, map('b', 2, 'a', 1), null, parse_json('1'), -0.0D),
        (3, null, named_struct('a', null), null, double('NaN')),
        (4, map(), named_struct('a', array()), parse_json('null'), null)""",
    )
    sql(spark, f"UPDATE delta.`{t}` SET i = i * 10 WHERE i IN (2, 3)")
    sql(spark, f"DELETE FROM delta.`{t}` WHERE i = 20")
    spark.sql(f"INSERT INTO delta.`{t}` SELECT * FROM delta.`{t}` WHERE i = 1")
    sql(spark, f"UPDATE delta.`{t}` SET d = 1.5 WHERE i = 30")
    for collapse in (True, False):
        rep = wlr.replicate("m", replica=f"typed_{collapse}", dbfarm=dbfarm, follow=False, collapse=collapse)
        got = spark.read.format("delta").load(rep.path_of("s.maps"))
        want = spark.read.format("delta").load(t)

        def canon(df):
            return sorted(
                r[0]
                for r in df.selectExpr(
                    "to_json(struct(i, map_entries(mp) AS mp, to_json(st) AS st, to_json(v) AS v, cast(d AS string) AS d))"
                ).collect()
            )

        assert canon(got) == canon(want)
        assert got.count() == 6  # duplicates stay duplicates


def test_liquid_clustering_is_carried(spark, master, dbfarm):
    t = master.table_path("s.clustered")
    sql(spark, f"CREATE TABLE delta.`{t}` (k INT, v STRING) USING delta CLUSTER BY (k)")
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (1, 'a')")
    rep = wlr.replicate("m", replica="c", dbfarm=dbfarm, follow=False)
    detail = lambda p: spark.sql(f"DESCRIBE DETAIL delta.`{p}`").collect()[0]["clusteringColumns"]  # noqa: E731
    assert detail(rep.path_of("s.clustered")) == ["k"]
    sql(spark, f"ALTER TABLE delta.`{t}` CLUSTER BY (v)")
    rep.replicate(follow=False)
    assert detail(rep.path_of("s.clustered")) == ["v"] == detail(t)
    sql(spark, f"ALTER TABLE delta.`{t}` CLUSTER BY NONE")
    rep.replicate(follow=False)
    assert detail(rep.path_of("s.clustered")) == [] == detail(t)


def test_delta_rs_keeps_writing_a_captured_master(spark, master, dbfarm):
    """Master mode switches on only what delta-rs writers support (the change feed), so the
    ``deltalake`` package keeps writing master tables, and its writes are captured."""
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    t = master.table_path("s.rs")
    sql(spark, f"CREATE TABLE delta.`{t}` (k INT, v STRING) USING delta")
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (1, 'a'), (2, 'b')")
    wlc.flush()
    deltalake.write_deltalake(t, pa.table({"k": pa.array([3], pa.int32()), "v": ["c"]}), mode="append")
    deltalake.DeltaTable(t).update(predicate="k = 1", updates={"v": "'z'"})
    deltalake.DeltaTable(t).delete("k = 2")
    wlc.flush()
    props = spark.sql(f"DESCRIBE DETAIL delta.`{t}`").collect()[0]["properties"]
    assert "delta.enableInCommitTimestamps" not in props
    rep = wlr.replicate("m", replica="rs", dbfarm=dbfarm, follow=False)
    assert rows(rep.table("s.rs")) == master_rows(spark, t) == [(1, "z"), (3, "c")]
    assert sorted(deltalake.DeltaTable(rep.path_of("s.rs")).to_pyarrow_table().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "z"},
        {"k": 3, "v": "c"},
    ]


def _with_features(tmp_path, monkeypatch, features: str) -> None:
    """Run with ``capture.table_features: <features>`` over the suite's settings."""
    from wlcore.settings import reload

    cfg = tmp_path / "features.yaml"
    base = open(os.path.join(os.path.dirname(__file__), "..", "wlc-test.yaml")).read()
    cfg.write_text(base.replace("capture:\n", f"capture:\n  table_features: {features}\n", 1))
    monkeypatch.setenv("WLC_CONFIG", str(cfg))
    reload()  # the file may be one this process loaded before: settings are loaded once per process


def _records(m) -> list:
    from wlcore.logstore import LogStore

    store = LogStore(m.storage, m.path, m.logs, m.dbname)
    return [t for b in store.batches() for t in store.manifest(b).txns]


def test_capture_switches_on_only_what_table_features_allows(spark, dbfarm, tmp_path, monkeypatch):
    """``capture.table_features``: ``[]`` switches nothing on (writes to a table without the
    change feed are carried by images); ``[change_feed, in_commit_timestamps]`` switches both
    on, and commit times are then the In-Commit Timestamps."""
    import json

    import deltalake
    import pyarrow as pa

    from wlc.master import Master

    _with_features(tmp_path, monkeypatch, "[]")
    bare = Master("bare", dbfarm=dbfarm, capture=False).start()
    bare.beat(0)
    t = bare.table_path("s.t")
    deltalake.write_deltalake(t, pa.table({"k": pa.array([1, 2], pa.int32())}))  # no change feed
    bare.flush()
    deltalake.DeltaTable(t).delete("k = 1")
    deltalake.write_deltalake(t, pa.table({"k": pa.array([3], pa.int32())}), mode="append")
    bare.flush()
    props = spark.sql(f"DESCRIBE DETAIL delta.`{t}`").collect()[0]["properties"]
    assert "delta.enableChangeDataFeed" not in props and "delta.enableInCommitTimestamps" not in props
    assert [r.change for r in _records(bare)] == ["image", "image", "image"]
    rep = wlr.replicate("bare", replica="bare_r", dbfarm=dbfarm, follow=False)
    assert rows(rep.table("s.t")) == master_rows(spark, t) == [(2,), (3,)]
    bare.close()

    _with_features(tmp_path, monkeypatch, "[change_feed, in_commit_timestamps]")
    both = Master("both", dbfarm=dbfarm, capture=False).start()
    both.beat(0)
    u = both.table_path("s.u").removeprefix("file://")
    deltalake.write_deltalake(u, pa.table({"k": pa.array([1], pa.int32())}))
    both.flush()  # capture switches both on (a commit of its own)
    props = spark.sql(f"DESCRIBE DETAIL delta.`{u}`").collect()[0]["properties"]
    assert props.get("delta.enableChangeDataFeed") == "true" == props.get("delta.enableInCommitTimestamps")
    spark.sql(f"INSERT INTO delta.`{u}` VALUES (2)")
    spark.sql(f"UPDATE delta.`{u}` SET k = 20 WHERE k = 2")
    both.flush()
    last = _records(both)[-2:]
    assert [r.change for r in last] == ["cdf", "cdf"]
    for r in last:
        info = next(
            json.loads(line)["commitInfo"]
            for line in open(os.path.join(u, "_delta_log", f"{r.version:020d}.json"))
            if "commitInfo" in line
        )
        assert int(r.time.timestamp() * 1000) == info["inCommitTimestamp"]
    rep = wlr.replicate("both", replica="both_r", dbfarm=dbfarm, follow=False)
    assert rows(rep.table("s.u")) == master_rows(spark, u) == [(1,), (20,)]
    both.close()
