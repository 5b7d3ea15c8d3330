"""The methods a replica's catch-up is compared with, and the checks of their end states, shared by
the benchmarks (``bench/catchup.py``, ``bench/scale*.py``).

* :func:`floor`: one batch read of a table's change-feed range, its net change per key, one MERGE
  (unkeyed: the table rewritten from the net count of each row image);
* :func:`recipe`: Delta's change-feed recipe (Structured Streaming over ``readChangeFeed``,
  ``foreachBatch`` MERGE of the newest change per key), restarted after a schema change;
* :func:`recopy`: the whole table copied at a version;
* :func:`deltars_floor`: what a Python data engineer writes without Spark: delta-rs reads the
  change feed, pandas keeps the last change per key, one delta-rs MERGE per table;
* :func:`checksum` / :func:`equal`: row count and an order-independent checksum per table;
* :func:`bytes_written`: what a table's commits wrote, from its Delta log.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window, functions as F


def checksum(df: DataFrame, cols) -> tuple[int, int]:
    row = df.select(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*[F.col(f"`{c}`") for c in cols]).cast("decimal(38,0)")).alias("h"),
    ).first()
    return int(row["n"]), int(row["h"] or 0)


def equal(spark, expected: dict[str, tuple], folder: str, tables, cols: dict[str, list[str]]) -> str:
    """ "yes", or the tables whose content differs from the master's."""
    bad = []
    for t in tables:
        schema, name = t.split(".")
        df = spark.read.format("delta").load(os.path.join(folder, schema, name))
        if checksum(df, cols[t]) != expected[t]:
            bad.append(t)
    return "yes" if not bad else "NO: " + ", ".join(bad)


@dataclass
class Written:
    """What some commits of a table wrote (:func:`bytes_written`): bytes in all, data files
    added, deletion vectors added, and data files removed without one (rewritten whole)."""

    bytes: int = 0
    files: int = 0
    vectors: int = 0
    rewritten: int = 0

    def __add__(self, other: "Written") -> "Written":
        return Written(*(a + b for a, b in zip(vars(self).values(), vars(other).values(), strict=True)))


def bytes_written(path: str, after: int, upto: int | None = None) -> Written:
    """What the commits of the Delta table at local ``path`` after version ``after`` (up to
    ``upto``) wrote, read from its log: the data and change-data files they added (``add`` and
    ``cdc`` sizes; a file given a deletion vector again counts only its vector), their deletion
    vectors, and the log's own files (commits, checksums, checkpoints)."""
    log = os.path.join(path, "_delta_log")
    out = Written()
    for name in sorted(os.listdir(log)):
        head = name.split(".")[0]
        if not head.isdigit() or int(head) <= after or (upto is not None and int(head) > upto):
            continue
        full = os.path.join(log, name)
        out.bytes += os.path.getsize(full)
        if not name.endswith(".json"):
            continue
        with open(full) as fh:
            actions = [json.loads(line) for line in fh if line.strip()]
        removed = {a["remove"]["path"] for a in actions if "remove" in a}
        added = {a["add"]["path"] for a in actions if "add" in a}
        for a in actions:
            if "cdc" in a:
                out.bytes += int(a["cdc"].get("size", 0))
            elif "remove" in a and a["remove"]["path"] not in added:
                out.rewritten += 1  # the whole file gone (its rows written again elsewhere, or deleted)
            elif "add" in a:
                add, dv = a["add"], a["add"].get("deletionVector")
                if dv:
                    out.vectors += 1
                    out.bytes += int(dv.get("sizeInBytes", 0)) if dv.get("storageType") != "i" else 0
                if add["path"] not in removed:
                    out.files += 1
                    out.bytes += int(add.get("size", 0))
    return out


def copy_tables(src_folder: str, dst_folder: str, tables) -> None:
    for t in tables:
        schema, name = t.split(".")
        shutil.copytree(os.path.join(src_folder, schema, name), os.path.join(dst_folder, schema, name))


# ----------------------------------------------------------------------------- competing methods
def latest_per_key(cdf: DataFrame, keys: list[str]) -> DataFrame:
    """The change-feed recipe's reduction: the newest change of each key (pre-images dropped)."""
    order = [F.col("_commit_version").desc(), F.when(F.col("_change_type") == "delete", 0).otherwise(1).desc()]
    w = Window.partitionBy(*keys).orderBy(*order)
    return (
        cdf.filter(F.col("_change_type") != "update_preimage")
        .withColumn("__rn", F.row_number().over(w))
        .filter("__rn = 1")
        .drop("__rn")
    )


def merge_latest(spark, latest: DataFrame, dst: str, keys: list[str]) -> None:
    from delta.tables import DeltaTable

    cols = [c for c in latest.columns if not c.startswith("_")]
    have = set(spark.read.format("delta").load(dst).columns)
    missing = [f for f in latest.schema.fields if f.name in cols and f.name not in have]
    if missing:  # the ADD COLUMNS on the master
        spark.sql(
            f"ALTER TABLE delta.`{dst}` ADD COLUMNS ("
            + ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
            + ")"
        )
    on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
    values = {f"`{c}`": f"s.`{c}`" for c in cols}
    (
        DeltaTable.forPath(spark, dst)
        .alias("t")
        .merge(latest.alias("s"), on)
        .whenMatchedDelete("s._change_type = 'delete'")
        .whenMatchedUpdate(set=values)
        .whenNotMatchedInsert(condition="s._change_type != 'delete'", values=values)
        .execute()
    )


def recipe(spark, src: str, dst: str, start: int, keys: list[str], checkpoint: str) -> None:
    """Delta's change-feed recipe, restarted after a schema change as its users do."""
    for _attempt in range(5):
        cdf = (
            spark.readStream.format("delta").option("readChangeFeed", "true").option("startingVersion", start).load(src)
        )
        all_keys = keys or [c for c in cdf.columns if not c.startswith("_")]
        query = (
            cdf.writeStream.option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .foreachBatch(lambda df, _id: merge_latest(spark, latest_per_key(df, all_keys), dst, all_keys))
            .start()
        )
        try:
            query.awaitTermination()
            return
        except Exception as exc:  # DELTA_SCHEMA_CHANGED...: restart the stream from its checkpoint
            if "schema" not in str(exc).lower():
                raise
    raise RuntimeError("the change-feed stream kept failing on schema changes")


def floor(spark, src: str, dst: str, start: int, end: int, keys: list[str]) -> int:
    cdf = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .option("endingVersion", end)
        .load(src)
    )
    if keys:
        merge_latest(spark, latest_per_key(cdf, keys), dst, keys)
        return -1
    # unkeyed: the net signed count per row image, then the table rewritten from the counts
    cols = [c for c in cdf.columns if not c.startswith("_")]
    sign = F.when(F.col("_change_type").isin("insert", "update_postimage"), 1).otherwise(-1)
    net = cdf.groupBy(*cols).agg(F.sum(sign).alias("__d"))
    have = spark.read.format("delta").load(dst).groupBy(*cols).agg(F.count(F.lit(1)).alias("__c"))
    joined = have.join(net, on=[have[c].eqNullSafe(net[c]) for c in cols], how="full_outer").select(
        *[F.coalesce(have[c], net[c]).alias(c) for c in cols],
        (F.coalesce(F.col("__c"), F.lit(0)) + F.coalesce(F.col("__d"), F.lit(0))).alias("__n"),
    )
    rows = joined.filter("__n > 0").withColumn("__r", F.explode(F.array_repeat(F.lit(1), F.col("__n").cast("int"))))
    rows.select(*cols).localCheckpoint().write.format("delta").mode("overwrite").save(dst)
    return -1


def recopy(spark, src: str, dst: str, version: int) -> None:
    (
        spark.read.format("delta")
        .option("versionAsOf", version)
        .load(src)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(dst)
    )


def deltars_floor(src: str, dst: str, start: int, end: int, keys: list[str]) -> None:
    """The delta-rs floor: ``DeltaTable(src).load_cdf(start, end)``, the last change per key kept
    (pandas picks the rows, Arrow keeps their types), one delta-rs MERGE into ``dst`` (columns the
    master added are merged in by ``merge_schema``). Unkeyed: the table rewritten from the net count
    of each row image. No Spark."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    cdf = pa.table(DeltaTable(src).load_cdf(starting_version=start, ending_version=end))
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}  # delta-rs reads strings as views
    cdf = cdf.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in cdf.schema]))
    cols = [c for c in cdf.column_names if not c.startswith("_")]
    kind = cdf["_change_type"]
    if keys:
        cdf = cdf.filter(pc.not_equal(kind, "update_preimage"))
        pick = cdf.select([*keys, "_commit_version"]).to_pandas()
        pick["_insert"] = (cdf["_change_type"].to_numpy(zero_copy_only=False) != "delete").astype(np.int8)
        last = pick.sort_values(["_commit_version", "_insert"], kind="stable").drop_duplicates(keys, keep="last")
        latest = cdf.take(pa.array(last.index.to_numpy())).select([*cols, "_change_type"])
        live = "s._change_type != 'delete'"
        (
            DeltaTable(dst)
            .merge(
                latest,
                " AND ".join(f"t.{k} = s.{k}" for k in keys),
                source_alias="s",
                target_alias="t",
                merge_schema=True,
            )
            .when_matched_delete("s._change_type = 'delete'")
            .when_matched_update_all(live, except_cols=["_change_type"])
            .when_not_matched_insert_all(live, except_cols=["_change_type"])
            .execute()
        )
        return
    sign = np.where(np.isin(kind.to_numpy(zero_copy_only=False), ["insert", "update_postimage"]), 1, -1)
    net = cdf.select(cols).to_pandas().assign(__n=sign).groupby(cols, dropna=False)["__n"].sum()
    have = (
        pa.table(DeltaTable(dst).to_pyarrow_table()).to_pandas().assign(__n=1).groupby(cols, dropna=False)["__n"].sum()
    )
    counts = have.add(net, fill_value=0)
    counts = counts[counts > 0].reset_index()
    rows = counts.loc[counts.index.repeat(counts["__n"].astype(int)), cols]
    write_deltalake(
        dst, pa.Table.from_pandas(rows, schema=cdf.select(cols).schema, preserve_index=False), mode="overwrite"
    )


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------- many tables at once
def in_threads(spark, jobs: dict, threads: int, pool: str = "bench") -> dict:
    """``{name: fn()}`` for ``jobs`` (``{name: fn}``), ``threads`` at a time on the one session,
    each job's Spark jobs in FAIR scheduler pool ``<pool>:<name>`` (as replay runs its tables)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name):
        sc = spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", f"{pool}:{name}")
        try:
            return jobs[name]()
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)

    with ThreadPoolExecutor(max(1, threads)) as ex:
        return dict(zip(jobs, ex.map(one, list(jobs))))


def equal_many(spark, expected: dict[str, tuple], folder: str, tables, cols: dict[str, list[str]], threads: int) -> str:
    """:func:`equal` with ``threads`` tables checked at once (many small tables)."""

    def check(t):
        return lambda: checksum(spark.read.format("delta").load(os.path.join(folder, *t.split("."))), cols[t])

    got = in_threads(spark, {t: check(t) for t in tables}, threads, "check")
    bad = [t for t in tables if tuple(got[t]) != tuple(expected[t])]
    return "yes" if not bad else f"NO: {len(bad)} tables, " + ", ".join(bad[:5])
