"""The delta-rs pipeline of ``bench/scale_follow.py``: a Python process with no Spark committing one
row every ``--every`` seconds into a master's keyed table through delta-rs (the ``deltalake``
package), as a small ingestion job does, beside the Spark writer (``bench/follow_writer.py``).

It creates the table ``f.rs`` (``wlc.key`` = ``id``, change feed on) in the master database's folder
with ``--rows`` rows, writes ``<control>/pipeline-ready`` and waits for ``<control>/go``; then, every
``--every`` seconds, it appends a new key (three commits of four) or updates one through a delta-rs
MERGE (one of four), until ``<control>/stop`` appears or SIGTERM, and writes what it did into
``<control>/pipeline.json``.

    python bench/follow_pipeline.py --farm DIR --db NAME --control DIR [--rows 200] [--every 0.5]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.follow_procs import write_result  # noqa: E402

TABLE = "f.rs"  # the writer's schema (bench/follow_writer.py makes it through the master first)


def rows(ids: list[int], stamp: int, what: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([stamp] * len(ids), pa.int64()),
            "s": pa.array([f"{what} {k}" for k in ids], pa.string()),
        }
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--farm", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--control", required=True, help="folder of the ready/go/stop files and pipeline.json")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--every", type=float, default=0.5, help="seconds between two commits (default 0.5)")
    args = ap.parse_args(argv)

    control = Path(args.control)
    while not (control / "ready").exists():  # the Spark writer made the schema folder and its tables
        time.sleep(0.1)
    path = os.path.join(args.farm, args.db, *TABLE.split("."))
    write_deltalake(path, rows(list(range(args.rows)), 0, "row"), configuration={"delta.enableChangeDataFeed": "true"})
    # the key: delta-rs takes a property of its own only this way (write_deltalake refuses it)
    DeltaTable(path).alter.set_table_properties({"wlc.key": "id"}, raise_if_not_exists=False)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    (control / "pipeline-ready").write_text(str(time.time()))
    while not (control / "go").exists():
        if stopping:
            return 0
        time.sleep(0.05)
    dt = DeltaTable(path)
    started, n, next_id = time.time(), 0, args.rows
    counts, seconds = {"append": 0, "merge": 0}, {"append": 0.0, "merge": 0.0}
    due = time.monotonic()
    while not stopping and not (control / "stop").exists():
        t0 = time.perf_counter()
        if n % 4 == 3:
            op = "merge"
            (
                dt.merge(rows([next_id - 1 - (n % 50)], n, "mrg"), "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        else:
            op = "append"
            write_deltalake(dt, rows([next_id], n, "app"), mode="append")
            next_id += 1
        counts[op] += 1
        seconds[op] += time.perf_counter() - t0
        n += 1
        due += args.every
        time.sleep(max(0.0, due - time.monotonic()))
    out = {"commits": n, "started": started, "ended": time.time(), "counts": counts, "seconds": seconds}
    write_result(control, "pipeline.json", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
