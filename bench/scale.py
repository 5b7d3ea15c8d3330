"""Benchmark at warehouse scale (``make bench-scale``): four workloads, each printing a table and
one summary line, every end state checked equal to the master's (row count and an
order-independent checksum per table).

1. ``big``:    TPC-H at SF 1 (lineitem about 6 million rows): a new replica's set-up from the
               snapshot against a plain copy of the table folders, then a backlog of a few hundred
               transactions caught up by grouped replay against the floor, Delta's change-feed
               recipe and a full re-copy (``bench/scale_big.py``);
2. ``many``:   200 keyed tables, a few large and busy, most small and quiet, a few thousand
               transactions: grouped replay against the floor (one MERGE per changed table, the
               same parallelism), where a catch-up's time goes, and idle capture's CPU share
               (``bench/scale_many.py``);
3. ``long``:   a master with 20,000 level-0 batches: status, ``wlr log``, a new replica's
               planning, a replica one batch behind, compaction and prune (``bench/scale_long.py``);
4. ``follow``: a master writing small transactions over 10 tables for 10 minutes, captured at
               beat 1 s and followed by ``wlr replicate --follow`` in another process: the lag of
               every transaction read from both Delta logs, and CPU (``bench/scale_follow.py``).

Methods that are compared run each in a process of its own (a fresh JVM, one Spark session).
About an hour on 2 cores; ``--workloads`` picks some, and each workload's flags make it smaller
(``--quick`` makes all of them small, for a first look).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

WORKLOADS = ("big", "many", "long", "follow")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated (default {','.join(WORKLOADS)})")
    ap.add_argument("--quick", action="store_true", help="small sizes everywhere: a first look in minutes")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dbfarms")
    modules = {w: importlib.import_module(f"bench.scale_{w}") for w in WORKLOADS}
    for module in modules.values():
        module.add_arguments(ap)
    args = ap.parse_args(argv)
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = sorted(set(chosen) - set(WORKLOADS))
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    reports, started = [], time.perf_counter()
    for name in chosen:
        t0 = time.perf_counter()
        report = modules[name].run(args)
        print(report.render(), f"\n({name}: {time.perf_counter() - t0:.0f} s)\n", flush=True)
        reports.append(report)
    print(f"== all: {time.perf_counter() - started:.0f} s")
    for report in reports:
        print(f"SUMMARY {report.workload}: {report.summary}")
    return 0 if all(r.equal for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
