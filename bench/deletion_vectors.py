"""A keyed MERGE spread over a big table, with and without deletion vectors, side by side.

Two copies of the same table (``--rows`` rows in 16 files, not laid out by key); one gets
``delta.enableDeletionVectors``. Each round MERGEs the same change set into both (about 3,000 keys
spread over the whole table: a third deleted, the others updated or inserted) and prints Delta's
own timings (``operationMetrics``). Then it says which of delta-rs's read paths read the table with
deletion vectors, because replicas may use them only where every reader the docs name can.

    .venv/bin/python bench/deletion_vectors.py [--rows 6000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

METRICS = ("executionTimeMs", "scanTimeMs", "rewriteTimeMs", "numTargetFilesRemoved", "numTargetDeletionVectorsAdded")


def _changes(spark, rows: int, seed: int):
    from pyspark.sql import functions as F

    keys = spark.range(3000).select(
        ((F.col("id") * 1999 + seed * 7919) % rows).alias("k"), (F.col("id") % 3).alias("op")
    )
    return keys.dropDuplicates(["k"]).select(
        "k",
        F.lit(-1).cast("long").alias("a"),
        F.lit(1.0).alias("b"),
        F.lit("x").alias("c"),
        F.lit(None).cast("date").alias("d"),
        "op",
    )


def _merge(spark, path: str, src) -> float:
    from delta.tables import DeltaTable

    t0 = time.perf_counter()
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(src.alias("s"), "t.k = s.k")
        .whenMatchedDelete(condition="s.op = 0")
        .whenMatchedUpdate(set={c: f"s.{c}" for c in "abcd"})
        .whenNotMatchedInsert(values={c: f"s.{c}" for c in "kabcd"})
        .execute()
    )
    return time.perf_counter() - t0


def _delta_rs_reads(path: str) -> dict[str, str]:
    import deltalake
    import pyarrow as pa

    out = {}
    table = deltalake.DeltaTable(path)
    try:
        out["to_pyarrow_table"] = f"yes, {table.to_pyarrow_table(columns=['k']).num_rows:,} rows"
    except Exception as exc:  # noqa: BLE001 (the answer is the error's kind)
        out["to_pyarrow_table"] = f"no: {type(exc).__name__}"
    try:
        result = deltalake.QueryBuilder().register("t", table).execute("SELECT count(*) AS n FROM t").read_all()
        out["QueryBuilder (DataFusion)"] = f"yes, {pa.table(result).column('n')[0].as_py():,} rows"
    except Exception as exc:  # noqa: BLE001
        out["QueryBuilder (DataFusion)"] = f"no: {type(exc).__name__}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=6_000_000, help="rows of the table (default 6,000,000)")
    ap.add_argument("--rounds", type=int, default=3, help="MERGE rounds (default 3; the first warms up)")
    args = ap.parse_args(argv)
    from pyspark.sql import functions as F

    import wlc

    spark = wlc.spark_session()
    base = tempfile.mkdtemp(prefix="wlc-dv-")
    try:
        plain, dv = f"{base}/plain", f"{base}/dv"
        spark.range(args.rows).select(
            F.col("id").alias("k"),
            (F.col("id") % 1000).alias("a"),
            (F.col("id") * 7 % 99991).cast("double").alias("b"),
            F.concat(F.lit("comment-"), F.col("id").cast("string")).alias("c"),
            F.expr("date_add(date'1992-01-01', cast(id % 2500 as int))").alias("d"),
        ).repartition(16).write.format("delta").save(plain)
        shutil.copytree(plain, dv)
        spark.sql(f"ALTER TABLE delta.`{dv}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        ratios = []
        for rnd in range(args.rounds):
            secs = {}
            for name, path in (("plain", plain), ("deletion vectors", dv)):
                secs[name] = _merge(spark, path, _changes(spark, args.rows, rnd))
                m = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()["operationMetrics"]
                print(f"round {rnd} {name:<17} {secs[name]:6.1f} s  " + ", ".join(f"{k} {m.get(k)}" for k in METRICS))
            if rnd:
                ratios.append(secs["deletion vectors"] / secs["plain"])
        counts = {n: spark.read.format("delta").load(p).count() for n, p in (("plain", plain), ("dv", dv))}
        print(f"rows after: {counts} ({'equal' if len(set(counts.values())) == 1 else 'DIFFERENT'})")
        for how, answer in _delta_rs_reads(dv).items():
            print(f"delta-rs {how} reads the table with deletion vectors: {answer}")
        if ratios:
            print(f"SUMMARY: a MERGE with deletion vectors takes {min(ratios):.2f}-{max(ratios):.2f}x the plain one")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
