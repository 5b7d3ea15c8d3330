"""Scenarios: tables this project did not write, whose history another engine (delta-rs) or an
older protocol (legacy reader and writer versions, preview feature names) wrote, made aside and
brought into the master: the folder moved in whole, or its commits appearing one by one (each
captured as it comes). Their commit files keep their times (a move keeps them), so capture
meets commits older than its watermark and carries them late."""

from __future__ import annotations

from .harness import Scenario, bring_commit_by_commit, bring_whole


def _delta_rs_history(path: str) -> None:
    """delta-rs's own history: a create, an append, an update, a delete, a merge, an overwrite
    that changes a column's type, and an append."""
    import deltalake
    import pyarrow as pa

    def batch(ks, vs, kind=None):
        return pa.table({"k": pa.array(ks, kind or pa.int32()), "v": pa.array(vs, pa.string())})

    deltalake.write_deltalake(path, batch([1, 2], ["a", "b"]), configuration={"delta.enableChangeDataFeed": "true"})
    deltalake.write_deltalake(path, batch([3], ["c"]), mode="append")
    deltalake.DeltaTable(path).update(predicate="k = 1", updates={"v": "'A'"})
    deltalake.DeltaTable(path).delete("k = 2")
    (
        deltalake.DeltaTable(path)
        .merge(batch([3, 4], ["C", "d"]), "t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    table = deltalake.DeltaTable(path).to_pyarrow_table()
    wider = table.set_column(0, "k", table.column("k").cast(pa.int64()))
    deltalake.write_deltalake(path, wider, mode="overwrite", schema_mode="overwrite")
    deltalake.write_deltalake(path, batch([5000000000], ["e"], pa.int64()), mode="append")


def _legacy_history(spark, path: str) -> None:
    """A table on Delta's legacy protocol (reader 1, writer 2; its change feed set off, so capture
    writes nothing into a table whose commits are still arriving), raised to writer 4 for a change
    feed, with a generated column and a constraint, then given the preview type-widening feature
    older releases wrote, a widening, and writes between."""
    ref = f"delta.`{path}`"
    spark.sql(
        f"CREATE TABLE {ref} (k INT, v STRING, n SMALLINT, y INT GENERATED ALWAYS AS (k * 10)) USING delta "
        "TBLPROPERTIES ('delta.minReaderVersion' = '1', 'delta.minWriterVersion' = '2', "
        "'delta.enableChangeDataFeed' = 'false')"
    )
    spark.sql(f"INSERT INTO {ref} (k, v) VALUES (1, 'a'), (2, 'b')")
    spark.sql(
        f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.minWriterVersion' = '4', 'delta.enableChangeDataFeed' = 'true')"
    )
    spark.sql(f"ALTER TABLE {ref} ADD CONSTRAINT positive CHECK (k > 0)")
    spark.sql(f"UPDATE {ref} SET v = 'B' WHERE k = 2")
    spark.sql(
        f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.feature.typeWidening-preview' = 'supported', "
        "'delta.enableTypeWidening' = 'true')"
    )
    spark.sql(f"ALTER TABLE {ref} ALTER COLUMN n TYPE INT")
    spark.sql(f"INSERT INTO {ref} (k, v, n) VALUES (3, 'c', 100000)")
    spark.sql(f"DELETE FROM {ref} WHERE k = 1")


def delta_rs_whole(ctx):
    source = ctx.aside("rs")
    _delta_rs_history(source)
    bring_whole(ctx, source)
    ctx.sql("INSERT INTO {t} VALUES (6, 'spark')")  # and Spark writes it in the master


def delta_rs_commit_by_commit(ctx):
    source = ctx.aside("rs")
    _delta_rs_history(source)
    bring_commit_by_commit(ctx, source)
    ctx.sql("INSERT INTO {t} VALUES (6, 'spark')")


def legacy_whole(ctx):
    from wlcore.tabledef import exact_session

    source = ctx.aside("legacy")
    _legacy_history(exact_session(ctx.spark.newSession()), source)
    bring_whole(ctx, source)
    ctx.sql("INSERT INTO {t} (k, v) VALUES (7, 'spark')")


def legacy_commit_by_commit(ctx):
    from wlcore.tabledef import exact_session

    source = ctx.aside("legacy")
    _legacy_history(exact_session(ctx.spark.newSession()), source)
    bring_commit_by_commit(ctx, source)
    ctx.sql("INSERT INTO {t} (k, v) VALUES (7, 'spark')")


SCENARIOS = [
    Scenario("foreign_delta_rs_whole", delta_rs_whole),
    Scenario("foreign_delta_rs_commits", delta_rs_commit_by_commit),
    Scenario("foreign_legacy_whole", legacy_whole, rs_reads=False, doc="the preview type-widening feature"),
    Scenario("foreign_legacy_commits", legacy_commit_by_commit, rs_reads=False, doc="as foreign_legacy_whole"),
]
