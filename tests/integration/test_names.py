"""Replica tables by name in Spark SQL: views of the session catalog at the last consistent tick."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

import wlc
import wlr

from ..waiting import wait_until
from .helpers import rows, sql

pytestmark = pytest.mark.spark


def _views(spark, schema: str) -> set[str]:
    if not spark.catalog.databaseExists(schema):
        return set()
    return {r.tableName for r in spark.sql(f"SHOW TABLES IN `{schema}`").collect() if not r.isTemporary}


def test_a_following_replica_is_read_by_name_at_its_tick(spark, master, dbfarm):
    master.create_schema("s")
    spark.sql("CREATE TABLE s.t (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, "INSERT INTO s.t VALUES (1, 'a'), (2, 'b')")
    rep = wlr.replicate("m", dbfarm=dbfarm, follow=True)  # follows in this process, in the background
    assert rep.following()
    name = rep.catalog.sql_name("s.t")
    assert name == "m_replica__s.t"
    assert rows(spark.sql(f"SELECT id, v FROM {name}")) == [(1, "a"), (2, "b")]

    last = sql(spark, "UPDATE s.t SET v = 'B' WHERE id = 2")
    spark.sql("CREATE TABLE s.u (k INT) USING delta")  # a new table: a new name
    wait_until(
        lambda: (
            rows(spark.sql(f"SELECT id, v FROM {name}")) == [(1, "a"), (2, "B")]
            and "u" in _views(spark, "m_replica__s")
        ),
        60,
        f"the name {name} to show transaction {last} and m_replica__s.u to appear",
    )
    assert rep.view_tick() >= last
    record = wlr.catalog_tick("m_replica", spark)  # the tick record, beside the views
    assert (record.tick, record.settled, record.versions) == (rep.view_tick(), True, rep.versions())
    assert rows(record.table("s.t")) == [(1, "a"), (2, "B")] and record.still_current()

    versions = rep.versions()
    for write in (
        f"INSERT INTO {name} VALUES (3, 'c')",
        f"UPDATE {name} SET v = 'x'",
        f"DELETE FROM {name} WHERE id = 1",
        f"MERGE INTO {name} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE",
        f"TRUNCATE TABLE {name}",
        "ALTER TABLE `spark_catalog`.m_replica__s.`t` ADD COLUMNS (z INT)",
    ):
        # one line of ours, not Spark's "is a view" or Delta's "historical scan"
        with pytest.raises(wlr.ReadOnlyError) as refused:
            spark.sql(write)
        assert str(refused.value) == (
            f"replica m_replica is read-only: {name} reads its table s.t; "
            "write s.t on its master m, and replay brings the change here"
        )
        assert isinstance(refused.value.spark_error, AnalysisException) and refused.value.table == "s.t"
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN"):  # a read's error stays Spark's
        spark.sql(f"SELECT nope FROM {name}")
    with pytest.raises(AnalysisException, match="PARSE_SYNTAX_ERROR"):  # as does a statement that does not parse
        spark.sql(f"INSERT INTO {name} VALUES (")
    assert rep.versions() == versions  # nothing reached the replica's tables
    view_sql = spark.sql(f"SHOW CREATE TABLE {name}").first()[0]
    assert f"VERSION AS OF {versions['s.t']}" in view_sql  # the version of the last consistent tick
    assert rows(rep.table("s.t")) == [(1, "a"), (2, "B")]

    sql(spark, "DROP TABLE s.u")  # replayed: its name goes
    wait_until(lambda: "u" not in _views(spark, "m_replica__s"), 60, "the name m_replica__s.u to go")
    assert _views(spark, "m_replica__s") == {"t"}
    spark.sql(f"DROP VIEW {name}")  # the name only: the table stays, and register() puts it back
    assert wlr.register() == {"s.t": name}
    assert rows(spark.sql(f"SELECT id, v FROM {name}")) == [(1, "a"), (2, "B")]


def test_names_of_a_selective_replica_registered_by_another_reader(spark, master, dbfarm):
    master.create_schema("s")
    spark.sql("CREATE TABLE s.t (id INT) USING delta")
    spark.sql("CREATE TABLE s.x (id INT) USING delta")
    spark.range(2).write.format("delta").save(master.table_path("s.q-1"))  # not a name Spark's catalog takes
    last = sql(spark, "INSERT INTO s.t VALUES (7)")
    rep = wlr.Replica("m", "sel", dbfarm).replicate(until=last, tables=["s.t", "s.q-1"])
    spark.sql("DROP SCHEMA sel__s CASCADE")  # as in another process: its catalog has no names yet
    with pytest.warns(UserWarning, match=r"table s\.q-1 has no SQL name: 'q-1' is not a name"):
        names = wlr.register("sel", dbfarm=dbfarm)
    assert names == {"s.t": "sel__s.t"}  # s.x is not carried, s.q-1 has no name
    assert rows(spark.sql("SELECT * FROM sel__s.t")) == [(7,)]
    assert _views(spark, "sel__s") == {"t"}
    assert rows(rep.table("s.q-1")) == [(0,), (1,)]  # read by Python instead
    with pytest.raises(wlr.ReplicaStateError, match=r"replica.table\('s.q-1'\)"):
        rep.catalog.sql_name("s.q-1")
    with pytest.raises(wlr.ReplicaStateError, match=r"table s\.x is not on replica sel at transaction"):
        rep.catalog.sql_name("s.x")
    rep.close()


def test_a_schema_of_that_name_not_the_replicas_is_refused(spark, master, dbfarm):
    master.create_schema("s")
    spark.sql("CREATE TABLE s.t (id INT) USING delta")
    last = sql(spark, "INSERT INTO s.t VALUES (1)")
    spark.sql("CREATE SCHEMA other__s")  # someone else's schema where the names would go
    spark.sql("CREATE VIEW other__s.t AS SELECT 42 AS id")
    spark.sql("CREATE SCHEMA other")  # and where its tick record would go
    spark.sql("CREATE VIEW other.tick AS SELECT 7 AS tick")
    with pytest.warns(UserWarning) as said:
        wlr.replicate("m", until=last, replica="other", dbfarm=dbfarm)
    text = [str(w.message) for w in said]
    assert any("schema other__s of this Spark session's catalog is not replica other's" in t for t in text), text
    assert any(t.startswith("replica other: no tick record (other.tick) is kept: schema other ") for t in text), text
    assert rows(spark.sql("SELECT * FROM other__s.t")) == [(42,)]  # left as it was
    assert rows(spark.sql("SELECT * FROM other.tick")) == [(7,)]


def test_master_tables_the_catalog_cannot_name_are_left_out_not_fatal(spark, dbfarm):
    db = f"{dbfarm}/cat"
    spark.range(1).write.format("delta").save(f"{db}/s/n-1")  # no catalog name: said, read by path
    spark.range(3).write.format("delta").save(f"{db}/s/n")
    m = wlc.master("cat", dbfarm=dbfarm)  # failed on the name before
    assert rows(spark.sql("SELECT id FROM s.n")) == [(0,), (1,), (2,)]
    spark.range(2).write.format("delta").save(m.table_path("s.later"))  # as another writer would
    assert m.register_catalog() == {
        "s.n-1": "'n-1' is not a name Spark's session catalog takes (letters, digits and '_' only); "
        "read and write the table by path (Master.table_path)"
    }
    assert rows(spark.sql("SELECT id FROM s.later")) == [(0,), (1,)]
    m.close()
