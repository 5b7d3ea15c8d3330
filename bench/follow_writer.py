"""The writer of ``bench/scale_follow.py``: a Spark application writing a master's keyed tables as
fast as it goes, in a process of its own (its own JVM), while ``wlc capture`` and ``wlr replicate
--follow`` run in two others.

It creates ``--tables`` tables ``f.t00``, ``f.t01``, ... (``wlc.key`` = ``id``, ``--rows`` rows each),
writes the file ``<control>/ready`` and waits for ``<control>/go``; then it makes small statements
round-robin over the tables (INSERT of a few new keys, UPDATE of a few keys, DELETE of one key,
MERGE updating a few keys and inserting new ones: every statement changes rows, so each one is
one master transaction) until ``<control>/stop`` appears or SIGTERM, and writes what it did into
``<control>/writer.json``.

    python bench/follow_writer.py --config FILE --farm DIR --db NAME --control DIR [--tables 10] [--rows 200]
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.follow_procs import write_result  # noqa: E402

SCHEMA = "f"
OPS = ("insert", "update", "delete", "merge")


def table_name(i: int) -> str:
    return f"{SCHEMA}.t{i:02d}"


class Writer:
    """The statements and the keys each table holds (kept here, so every statement changes rows)."""

    def __init__(self, spark, tables: int, rows: int, seed: int) -> None:
        self.spark = spark
        self.tables = tables
        self.rng = random.Random(seed)
        self.keys = [list(range(rows)) for _ in range(tables)]
        self.next_id = [rows] * tables
        self.counts = dict.fromkeys(OPS, 0)
        self.seconds = dict.fromkeys(OPS, 0.0)

    def create(self, rows: int) -> None:
        for i in range(self.tables):
            self.spark.sql(
                f"CREATE TABLE {table_name(i)} (id BIGINT, v BIGINT, s STRING) USING delta "
                "TBLPROPERTIES ('wlc.key' = 'id')"
            )
            self.spark.sql(f"INSERT INTO {table_name(i)} SELECT id, id * 10, concat('row ', id) FROM range({rows})")

    def _fresh(self, i: int, n: int) -> list[int]:
        ids = list(range(self.next_id[i], self.next_id[i] + n))
        self.next_id[i] += n
        return ids

    def _some(self, i: int, n: int) -> list[int]:
        return self.rng.sample(self.keys[i], min(n, len(self.keys[i])))

    def statement(self, n: int) -> str:
        """Statement ``n``: table ``n % tables``, operation ``OPS[(n // tables) % 4]``."""
        i, op = n % self.tables, OPS[(n // self.tables) % len(OPS)]
        t, stamp = table_name(i), n
        if op == "delete" and len(self.keys[i]) < 10:
            op = "insert"
        t0 = time.perf_counter()
        if op == "insert":
            ids = self._fresh(i, 3)
            values = ", ".join(f"({k}, {stamp}, 'ins {k}')" for k in ids)
            self.spark.sql(f"INSERT INTO {t} VALUES {values}")
            self.keys[i] += ids
        elif op == "update":
            ids = self._some(i, 3)
            self.spark.sql(f"UPDATE {t} SET v = v + 1, s = 'upd {stamp}' WHERE id IN ({', '.join(map(str, ids))})")
        elif op == "delete":
            (k,) = self._some(i, 1)
            self.spark.sql(f"DELETE FROM {t} WHERE id = {k}")
            self.keys[i].remove(k)
        else:
            old, new = self._some(i, 2), self._fresh(i, 2)
            src = ", ".join(f"({k}, {stamp}, 'mrg {k}')" for k in old + new)
            self.spark.sql(
                f"MERGE INTO {t} AS d USING (SELECT * FROM VALUES {src} AS s(id, v, s)) AS s ON d.id = s.id "
                "WHEN MATCHED THEN UPDATE SET d.v = s.v, d.s = s.s WHEN NOT MATCHED THEN INSERT *"
            )
            self.keys[i] += new
        self.counts[op] += 1
        self.seconds[op] += time.perf_counter() - t0
        return op


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--farm", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--control", required=True, help="folder of the ready/go/stop files and writer.json")
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--seed", type=int, default=22)
    args = ap.parse_args(argv)

    from wlcore.settings import choose_config

    choose_config(args.config)  # this process's settings (nothing written to os.environ)
    import wlc

    spark = wlc.spark_session()
    m = wlc.attach(args.db, dbfarm=args.farm)
    m.create_schema(SCHEMA)
    writer = Writer(spark, args.tables, args.rows, args.seed)
    writer.create(args.rows)

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    control = Path(args.control)
    (control / "ready").write_text(str(time.time()))
    while not (control / "go").exists():
        if stopping:
            return 0
        time.sleep(0.05)
    started, n = time.time(), 0
    while not stopping and not (control / "stop").exists():
        writer.statement(n)
        n += 1
    ended = time.time()
    out = {"statements": n, "started": started, "ended": ended, "counts": writer.counts, "seconds": writer.seconds}
    write_result(control, "writer.json", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
