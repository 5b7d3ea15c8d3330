"""Scenarios: every kind of write Spark makes to a Delta table."""

from __future__ import annotations

from .harness import Scenario


def insert_update_delete(ctx):
    ctx.sql("CREATE TABLE {t} (k INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'k')")
    ctx.sql("INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    ctx.sql("UPDATE {t} SET v = 'B' WHERE k = 2")
    ctx.sql("DELETE FROM {t} WHERE k = 1")
    ctx.sql("INSERT INTO {t} VALUES (1, 'again')")
    ctx.sql("UPDATE {t} SET v = concat(v, '+')")


def merge_not_matched_by_source(ctx):
    ctx.sql("CREATE TABLE {t} (k INT, v STRING, n INT) USING delta")
    ctx.sql("INSERT INTO {t} VALUES (1, 'a', 0), (2, 'b', 0), (3, 'c', 0), (3, 'c', 0)")
    ctx.sql(
        "MERGE INTO {t} AS t USING (SELECT * FROM VALUES (2, 'B'), (4, 'D') AS s(k, v)) AS s ON t.k = s.k "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, v, n) VALUES (s.k, s.v, 1) "
        "WHEN NOT MATCHED BY SOURCE AND t.k = 1 THEN DELETE "
        "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET n = t.n + 1"
    )


def merge_with_schema_evolution(ctx):
    ctx.sql("CREATE TABLE {t} (k INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'k')")
    ctx.sql("INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    ctx.sql(
        "MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING (SELECT * FROM VALUES (2, 'B', 2.5D), (3, 'C', 3.5D) "
        "AS s(k, v, extra)) AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    ctx.sql("UPDATE {t} SET extra = -1 WHERE k = 1")


def merge_schema_nested_append(ctx):
    """``mergeSchema`` appends that add nested fields (inside a struct and an array of structs)."""
    spark = ctx.spark
    spark.createDataFrame(
        [(1, (1, "a"), [(1,)])], "k int, st struct<a: int, b: string>, l array<struct<x: int>>"
    ).write.format("delta").save(ctx.path)
    ctx.step()
    spark.createDataFrame(
        [(2, (2, "b", 2.5), [(2, "y")])],
        "k int, st struct<a: int, b: string, c: double>, l array<struct<x: int, y: string>>",
    ).write.format("delta").mode("append").option("mergeSchema", "true").save(ctx.path)
    ctx.step()
    ctx.sql("UPDATE {t} SET st.c = 9.5 WHERE k = 1")
    ctx.sql("DELETE FROM {t} WHERE k = 2")


def replace_where(ctx):
    spark = ctx.spark
    ctx.sql("CREATE TABLE {t} (d DATE, v INT) USING delta PARTITIONED BY (d)")
    ctx.sql("INSERT INTO {t} VALUES (DATE'2026-01-01', 1), (DATE'2026-01-02', 2), (DATE'2026-01-03', 3)")
    spark.sql("SELECT DATE'2026-01-02' AS d, 20 AS v UNION ALL SELECT DATE'2026-01-02', 21").write.format("delta").mode(
        "overwrite"
    ).option("replaceWhere", "d = DATE'2026-01-02'").save(ctx.path)
    ctx.step()
    ctx.sql("INSERT INTO {t} REPLACE WHERE v >= 3 SELECT DATE'2026-01-03' AS d, 30 AS v")


def dynamic_partition_overwrite(ctx):
    spark = ctx.spark
    ctx.sql("CREATE TABLE {t} (p STRING, v INT) USING delta PARTITIONED BY (p)")
    ctx.sql("INSERT INTO {t} VALUES ('a', 1), ('b', 2), ('c', 3)")
    spark.createDataFrame([("b", 20), ("b", 21), ("d", 4)], "p string, v int").write.format("delta").mode(
        "overwrite"
    ).option("partitionOverwriteMode", "dynamic").save(ctx.path)
    ctx.step()


def rows_moving_between_partitions(ctx):
    ctx.sql("CREATE TABLE {t} (k INT, p STRING, v INT) USING delta PARTITIONED BY (p) TBLPROPERTIES ('wlc.key' = 'k')")
    ctx.sql("INSERT INTO {t} VALUES (1, 'x', 1), (2, 'x', 2), (3, 'y', 3)")
    ctx.sql("UPDATE {t} SET p = 'y' WHERE k = 1")
    ctx.sql("UPDATE {t} SET p = CASE p WHEN 'x' THEN 'z' ELSE 'x' END")


def overwrite_schema(ctx):
    spark = ctx.spark
    ctx.sql("CREATE TABLE {t} (k INT, v STRING) USING delta")
    ctx.sql("INSERT INTO {t} VALUES (1, 'a')")
    spark.createDataFrame([(1.5, "x", True)], "w double, v string, flag boolean").write.format("delta").mode(
        "overwrite"
    ).option("overwriteSchema", "true").save(ctx.path)
    ctx.step()
    ctx.sql("INSERT INTO {t} VALUES (2.5, 'y', false)")


def create_or_replace_same_schema(ctx):
    ctx.sql("CREATE TABLE {n} (k INT, v STRING) USING delta")
    ctx.sql("INSERT INTO {n} VALUES (1, 'a')")
    ctx.sql("CREATE OR REPLACE TABLE {n} (k INT, v STRING) USING delta")
    ctx.sql("INSERT INTO {n} VALUES (2, 'b')")


def create_or_replace_other_schema(ctx):
    """Another schema and another partitioning, by name; then as a select."""
    ctx.sql("CREATE TABLE {n} (k INT, v STRING) USING delta TBLPROPERTIES ('team' = 'a')")
    ctx.sql("INSERT INTO {n} VALUES (1, 'a'), (2, 'b')")
    ctx.sql("CREATE OR REPLACE TABLE {n} (w BIGINT COMMENT 'weight', p STRING) USING delta PARTITIONED BY (p)")
    ctx.sql("INSERT INTO {n} VALUES (10, 'x')")
    ctx.sql("CREATE OR REPLACE TABLE {n} USING delta AS SELECT w, p, 'new' AS tag FROM {n}")


def ctas(ctx):
    ctx.sql(
        "CREATE TABLE {t} USING delta PARTITIONED BY (p) AS "
        "SELECT id, CAST(id % 3 AS STRING) AS p, id * 1.5D AS x FROM range(10)"
    )
    ctx.sql("DELETE FROM {t} WHERE p = '1'")


def delete_everything(ctx):
    ctx.sql("CREATE TABLE {t} (k INT, v STRING) USING delta")
    ctx.sql("INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    ctx.sql("DELETE FROM {t}")
    ctx.sql("INSERT INTO {t} VALUES (3, 'c')")
    ctx.sql("DELETE FROM {t} WHERE true")


SCENARIOS = [
    Scenario("write_iud", insert_update_delete),
    Scenario("write_merge_by_source", merge_not_matched_by_source),
    Scenario("write_merge_evolution", merge_with_schema_evolution),
    Scenario("write_merge_schema_nested", merge_schema_nested_append),
    Scenario("write_replace_where", replace_where),
    Scenario("write_dynamic_overwrite", dynamic_partition_overwrite),
    Scenario("write_partition_moves", rows_moving_between_partitions),
    Scenario("write_overwrite_schema", overwrite_schema),
    Scenario("write_replace_same", create_or_replace_same_schema),
    Scenario("write_replace_other", create_or_replace_other_schema),
    Scenario("write_ctas", ctas),
    Scenario("write_delete_all", delete_everything),
]
