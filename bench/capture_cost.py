"""Benchmark: what live capture costs the master, writing and idle, side by side in one run.

``make bench`` runs it after ``catchup.py``. One SparkSession; a keyed table of ``--rows``
rows (default 100,000) written by small statements (UPDATE of a few keys, INSERT, DELETE,
MERGE) in alternating blocks of ``--block`` statements (default 10): no capture thread,
capture at beat 1 s, capture at beat 300 s, repeated ``--rounds`` times (default 3) so that
warm-up and drift fall on every method alike. Each statement is timed on its own; the
figure is the mean seconds a statement and the ratio to no capture.

Then the idle cost: the process and its JVM are left alone for ``--idle`` seconds (default
20) with no capture thread and with capture running (beat 1 s), and the CPU seconds they
use are measured from ``/proc`` (Linux). The capture figure is the difference, as a share of
one core.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import wlc  # noqa: E402

DB = "costdb"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) from /proc."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Cost:
    def __init__(self, args):
        self.args = args
        self.spark = wlc.spark_session()
        self.farm = tempfile.mkdtemp(prefix="wlc-capture-cost-")
        self.jvm_pid = int(self.spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        self.n = 0
        self.path = None

    def setup(self) -> None:
        m = wlc.Master(DB, dbfarm=self.farm, capture=False).start()
        self.path = m.table_path("s.t")
        m.close()
        rows = self.args.rows
        (
            self.spark.range(rows)
            .selectExpr("CAST(id AS INT) AS id", "CAST(id % 1000 AS INT) AS v", "CAST(uuid() AS STRING) AS note")
            .write.format("delta")
            .option("delta.enableChangeDataFeed", "true")
            .option("delta.enableInCommitTimestamps", "true")
            .save(self.path)
        )
        self.spark.sql(f"ALTER TABLE delta.`{self.path}` SET TBLPROPERTIES ('wlc.key' = 'id')")

    def statement(self) -> str:
        self.n += 1
        i, ref, rows = self.n, f"delta.`{self.path}`", self.args.rows
        return [
            f"UPDATE {ref} SET v = v + 1 WHERE id IN ({i * 7 % rows}, {i * 13 % rows}, {i * 31 % rows})",
            f"INSERT INTO {ref} VALUES ({rows + i}, {i}, 'new{i}'), ({rows + 10_000_000 + i}, {i}, 'n')",
            f"DELETE FROM {ref} WHERE id = {i * 17 % rows}",
            f"MERGE INTO {ref} t USING (SELECT {i * 19 % rows} AS id, {i} AS v) s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v, note) "
            f"VALUES (s.id, s.v, 'm')",
        ][i % 4]

    def block(self) -> list[float]:
        out = []
        for _ in range(self.args.block):
            sql = self.statement()
            t0 = time.perf_counter()
            self.spark.sql(sql)
            out.append(time.perf_counter() - t0)
        return out

    def master(self, beat: float) -> wlc.Master:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = wlc.Master(DB, dbfarm=self.farm).start()
        m.beat(beat)
        m.flush()  # what was written with no capture thread is captured before the timed block
        return m

    def writes(self) -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"off": [], "beat 1 s": [], "beat 300 s": []}
        for r in range(self.args.rounds):
            print(f"round {r + 1}/{self.args.rounds}", flush=True)
            times["off"] += self.block()
            for label, beat in (("beat 1 s", 1.0), ("beat 300 s", 300.0)):
                m = self.master(beat)
                try:
                    times[label] += self.block()
                finally:
                    m.close()
        return times

    def idle_window(self, capture: bool) -> float:
        m = self.master(1.0) if capture else None
        try:
            time.sleep(2.0)  # let the first scans settle
            t0, py0, jvm0 = time.monotonic(), time.process_time(), cpu_seconds(self.jvm_pid)
            time.sleep(self.args.idle)  # the measured window: nothing happens but what capture does
            wall = time.monotonic() - t0
            return (time.process_time() - py0 + cpu_seconds(self.jvm_pid) - jvm0) / wall
        finally:
            if m is not None:
                m.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="rows in the keyed table (default 100000)")
    ap.add_argument("--block", type=int, default=10, help="statements a block (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="blocks of each method (default 3)")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of each idle window (default 20)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dbfarm")
    args = ap.parse_args()
    bench = Cost(args)
    try:
        bench.setup()
        bench.block()  # warm-up, not counted
        times = bench.writes()
        idle_off = bench.idle_window(capture=False)
        idle_on = bench.idle_window(capture=True)
    finally:
        if not args.keep:
            shutil.rmtree(bench.farm, ignore_errors=True)
    base = statistics.mean(times["off"])
    print(f"\n{'capture':<12} {'s/statement':>12} {'median':>8} {'vs off':>8}")
    for label, values in times.items():
        mean = statistics.mean(values)
        print(f"{label:<12} {mean:>12.3f} {statistics.median(values):>8.3f} {mean / base:>7.2f}x")
    print(
        f"\nidle CPU (process + JVM, share of one core): no capture {idle_off:.1%}, "
        f"capture on {idle_on:.1%}, capture's own {max(0.0, idle_on - idle_off):.1%}"
    )
    over = {k: statistics.mean(v) / base - 1 for k, v in times.items() if k != "off"}
    print(
        "SUMMARY capture write overhead: "
        + ", ".join(f"{k} {v:+.0%}" for k, v in over.items())
        + f" (goal <= +15%); idle capture {max(0.0, idle_on - idle_off):.1%} of a core (goal < 1%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
