"""The fixed cost of applying a net change to a small table: one Delta MERGE (what grouped replay
and the floor pay per changed table) against a whole rewrite of the table (read it, drop the changed
keys, add the new images, overwrite in one commit), side by side on identical tables in one Spark
session, each end state compared. The lever named for many small quiet tables.

    .venv/bin/python bench/small_apply.py [--tables 12] [--rows 1000] [--rounds 3]

Prints seconds per table for each method and round (round 0 includes the JVM's warm-up) and the
ratio rewrite / MERGE over the warm rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=4, help="tables per method and round (default 4)")
    ap.add_argument("--rows", type=int, default=1000, help="rows of each table (default 1000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the first a warm-up (default 3)")
    args = ap.parse_args(argv)

    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    import wlc

    spark = wlc.spark_session()
    folder = tempfile.mkdtemp(prefix="wlc-small-apply-")
    count = args.tables * args.rounds
    for i in range(count):
        for kind in ("merge", "rewrite"):
            base = spark.range(args.rows).select("id", (F.col("id") * 3).alias("v"), F.lit("x" * 20).alias("s"))
            base.coalesce(1).write.format("delta").save(f"{folder}/{kind}{i}")

    def net(i: int):  # about 1/40 of the rows changed: updates, deletes (gone) and inserts
        step = max(args.rows // 40, 1)
        ids = spark.range(i, args.rows * 3 // 2, step)
        return ids.select(
            "id", (F.col("id") * 5).alias("v"), F.lit("y").alias("s"), (F.col("id") % 7 == 0).alias("gone")
        )

    def merge(i: int) -> None:
        target = DeltaTable.forPath(spark, f"{folder}/merge{i}")
        (
            target.alias("t")
            .merge(net(i).alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.gone")
            .whenMatchedUpdate(set={"v": "s.v", "s": "s.s"})
            .whenNotMatchedInsert(condition="not s.gone", values={"id": "s.id", "v": "s.v", "s": "s.s"})
            .execute()
        )

    def rewrite(i: int) -> None:
        current, change = spark.read.format("delta").load(f"{folder}/rewrite{i}"), net(i)
        out = current.join(change.select("id"), "id", "left_anti").unionByName(change.filter("not gone").drop("gone"))
        out.write.format("delta").mode("overwrite").save(f"{folder}/rewrite{i}")

    per: dict[str, list[float]] = {"merge": [], "rewrite": []}
    for rnd in range(args.rounds):
        for name, apply in (("merge", merge), ("rewrite", rewrite)):
            started = time.perf_counter()
            for i in range(rnd * args.tables, (rnd + 1) * args.tables):
                apply(i)
            seconds = (time.perf_counter() - started) / args.tables
            if rnd:
                per[name].append(seconds)
            print(f"round {rnd}{' (warm-up)' if not rnd else ''}: {name:8} {seconds:.3f} s a table", flush=True)
    differ = sum(
        spark.read.format("delta")
        .load(f"{folder}/merge{i}")
        .exceptAll(spark.read.format("delta").load(f"{folder}/rewrite{i}"))
        .count()
        for i in range(count)
    )
    ratio = statistics.median(per["rewrite"]) / statistics.median(per["merge"])
    sizes = f"{args.rounds - 1} warm rounds of {args.tables} tables of {args.rows} rows"
    print(
        f"SUMMARY small apply: rewrite / MERGE = {ratio:.2f} over {sizes}; end states equal: {'no' if differ else 'yes'}"
    )
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
