"""Scenarios: every writer of a master table: Spark SQL by path and by name, the DataFrame
writer, the ``DeltaTable`` Python API, and delta-rs (the ``deltalake`` package)."""

from __future__ import annotations

from .harness import Scenario


def sql_by_name(ctx):
    ctx.sql("CREATE TABLE {n} (k INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'k')")
    ctx.sql("INSERT INTO {n} VALUES (1, 'a'), (2, 'b')")
    ctx.sql("UPDATE {n} SET v = 'A' WHERE k = 1")
    ctx.sql(
        "MERGE INTO {n} AS t USING (SELECT 2 AS k, 'B' AS v UNION ALL SELECT 3, 'C') AS s ON t.k = s.k "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    ctx.sql("DELETE FROM {n} WHERE k = 1")


def dataframe_writer(ctx):
    spark = ctx.spark
    df = spark.createDataFrame([(1, "a", 1.0), (2, "b", None)], "k long, v string, x double")
    df.write.format("delta").partitionBy("v").save(ctx.path)
    ctx.step()
    df.write.format("delta").mode("append").save(ctx.path)
    ctx.step()
    spark.createDataFrame([(9, "z", 9.0)], "k long, v string, x double").write.format("delta").mode("overwrite").save(
        ctx.path
    )
    ctx.step()
    ctx.master.register_catalog()  # the table made by path gets its name
    spark.createDataFrame([(10, "z", 10.0)], "k long, v string, x double").writeTo(ctx.name).append()
    ctx.step()


def deltatable_api(ctx):
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    spark = ctx.spark
    DeltaTable.create(spark).location(ctx.path).addColumn("k", "INT").addColumn("v", "STRING").addColumn(
        "n", "INT", comment="a counter"
    ).property("wlc.key", "k").execute()
    ctx.step()
    spark.createDataFrame([(1, "a", 0), (2, "b", 0)], "k int, v string, n int").write.format("delta").mode(
        "append"
    ).save(ctx.path)
    ctx.step()
    table = DeltaTable.forPath(spark, ctx.path)
    table.update(F.col("k") == 1, {"v": F.lit("A")})
    ctx.step()
    table.delete("k = 2")
    ctx.step()
    src = spark.createDataFrame([(1, "x", 5), (3, "c", 1)], "k int, v string, n int")
    table.alias("t").merge(src.alias("s"), "t.k = s.k").whenMatchedUpdate(
        set={"n": "t.n + s.n"}
    ).whenNotMatchedInsertAll().execute()
    ctx.step()


def delta_rs(ctx):
    """delta-rs writes a master table while capture runs: create, append, overwrite, update,
    delete, merge (it writes the change feed's files for its updates, deletes and merges)."""
    import deltalake
    import pyarrow as pa

    def batch(ks, vs):
        return pa.table({"k": pa.array(ks, pa.int64()), "v": pa.array(vs, pa.string())})

    deltalake.write_deltalake(ctx.path, batch([1, 2], ["a", "b"]), configuration={"delta.enableChangeDataFeed": "true"})
    ctx.step()
    deltalake.write_deltalake(ctx.path, batch([3], ["c"]), mode="append")
    ctx.step()
    deltalake.DeltaTable(ctx.path).update(predicate="k = 1", updates={"v": "'A'"})
    ctx.step()
    deltalake.DeltaTable(ctx.path).delete("k = 2")
    ctx.step()
    (
        deltalake.DeltaTable(ctx.path)
        .merge(batch([3, 4], ["C", "d"]), "t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    ctx.step()
    deltalake.write_deltalake(ctx.path, batch([7, 8, 8], ["x", "y", "y"]), mode="overwrite")
    ctx.step()
    ctx.sql("UPDATE {t} SET v = 'spark' WHERE k = 7")  # and Spark again on the same table
    deltalake.write_deltalake(ctx.path, batch([9], ["rs"]), mode="append")
    ctx.step()


def delta_rs_without_change_feed(ctx):
    """A table delta-rs made without the change feed: capture switches it on (delta-rs
    writes on), and what came before is carried by the table's image."""
    import deltalake
    import pyarrow as pa

    deltalake.write_deltalake(ctx.path, pa.table({"k": pa.array([1, 2], pa.int32())}))
    deltalake.write_deltalake(ctx.path, pa.table({"k": pa.array([3], pa.int32())}), mode="append")
    ctx.step()
    deltalake.DeltaTable(ctx.path).delete("k = 1")
    ctx.step()
    deltalake.write_deltalake(ctx.path, pa.table({"k": pa.array([4], pa.int32())}), mode="append")
    ctx.step()


SCENARIOS = [
    Scenario("writer_sql_by_name", sql_by_name),
    Scenario("writer_dataframe", dataframe_writer),
    Scenario("writer_deltatable_api", deltatable_api),
    Scenario("writer_delta_rs", delta_rs),
    Scenario("writer_delta_rs_no_feed", delta_rs_without_change_feed),
]
