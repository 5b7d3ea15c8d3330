"""Benchmark: capture and replay cost per transaction, by kind of change and table size.

Run with ``make bench``. Builds a master in a temporary dbfarm with one keyed and one
unkeyed table of ``--rows`` rows, runs ``--txns`` transactions of each kind (append,
UPDATE, DELETE, MERGE), captures them with beat 0, then replays into a fresh replica and
prints seconds per transaction for capture and for replay, per kind.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import wlc  # noqa: E402
import wlr  # noqa: E402
from wlr import apply as apply_mod  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000, help="rows per table before the stream")
    ap.add_argument("--txns", type=int, default=5, help="transactions of each kind per table")
    args = ap.parse_args()
    farm = tempfile.mkdtemp(prefix="wlc-bench-")
    spark = wlc.spark_session()
    m = wlc.master("bench", dbfarm=farm)
    wlc.beat(0)
    paths = {"keyed": m.table_path("s.keyed"), "image": m.table_path("s.unkeyed")}
    for kind, path in paths.items():
        props = "TBLPROPERTIES ('wlc.key' = 'id')" if kind == "keyed" else ""
        spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, grp INT, val DOUBLE, note STRING) USING delta {props}")
        spark.range(args.rows).selectExpr("id", "CAST(id % 100 AS INT) grp", "rand() val", "'x' note").write.format(
            "delta"
        ).mode("append").save(path)
    wlc.flush()
    capture = defaultdict(list)
    for i in range(args.txns):
        for kind, path in paths.items():
            base = args.rows + i * 1000
            stmts = {
                "append 1000 rows": f"INSERT INTO delta.`{path}` SELECT id, CAST(id % 100 AS INT), rand(), 'n' FROM range({base}, {base + 1000})",
                "UPDATE ~1% rows": f"UPDATE delta.`{path}` SET val = val + 1 WHERE grp = {i}",
                "DELETE ~0.1% rows": f"DELETE FROM delta.`{path}` WHERE id % 1000 = {i}",
                "MERGE 500 rows": None,
            }
            for label, stmt in stmts.items():
                if stmt is None:
                    src = spark.range(base - 250, base + 250).selectExpr("id", "7 AS grp", "0.5 AS val", "'m' AS note")
                    src.createOrReplaceTempView("src")
                    stmt = (
                        f"MERGE INTO delta.`{path}` t USING src s ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
                    )
                spark.sql(stmt)
                t = time.perf_counter()
                wlc.flush()
                capture[(kind, label)].append(time.perf_counter() - t)
    replay = defaultdict(list)
    orig = apply_mod.Applier.apply
    labels = {}

    def timed(self, batch_path, rec):
        t = time.perf_counter()
        orig(self, batch_path, rec)
        replay[labels.get(rec.txn, ("setup", rec.operation))].append(time.perf_counter() - t)

    apply_mod.Applier.apply = timed
    # map txn ids to labels in the order they were made
    order = [
        (k, lbl)
        for _i in range(args.txns)
        for k in paths
        for lbl in ("append 1000 rows", "UPDATE ~1% rows", "DELETE ~0.1% rows", "MERGE 500 rows")
    ]
    first = wlc.tick() - len(order) + 1
    labels.update({first + n: key for n, key in enumerate(order)})
    t = time.perf_counter()
    r = wlr.replicate("bench", replica="bench_replica", dbfarm=farm, follow=False)
    total = time.perf_counter() - t
    print(f"\nrows per table {args.rows}, {args.txns} transactions of each kind, replica at txn {r.tick()}")
    print(f"{'table':7} {'transaction':20} {'capture s/txn':>14} {'replay s/txn':>13}")
    for key in capture:
        c, p = capture[key], replay.get(key, [float("nan")])
        print(f"{key[0]:7} {key[1]:20} {sum(c) / len(c):14.2f} {sum(p) / len(p):13.2f}")
    print(f"replay total {total:.1f} s for {r.tick() + 1} transactions (incl. snapshot-less table loads)")
    m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
