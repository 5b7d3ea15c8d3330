"""A/B of grouped replay under Spark settings, on a farm kept by ``bench/catchup.py --keep``.

One grouped run on 2 cores varies by +-15%, and the JVM keeps getting faster for several
runs, so one run of each variant says nothing. This script warms up, then runs the variants
in turn (A B A B ...) on fresh copies of the farm's ``base`` replica, each replaying the
backlog up to its last transaction, and prints the median and every run of each variant::

    .venv/bin/python bench/catchup.py --methods grouped --keep     # prints the farm's folder
    .venv/bin/python bench/ab.py /tmp/wlc-catchup-XXXX \\
        --variant plain --variant shj:spark.sql.join.preferSortMergeJoin=false --runs 5

A variant is ``name`` or ``name:key=value[,key=value...]``: Spark settings of replay's
sessions (set on each one ``wlr.apply.replay_session`` makes). ``--event-log FOLDER`` also
writes Spark's event log there, to compare task time per job.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import wlc  # noqa: E402
import wlr  # noqa: E402
import wlr.apply as apply_module  # noqa: E402
from wlcore.logstore import LogStore  # noqa: E402
from wlcore.storage import Storage  # noqa: E402

MASTER = "bench"


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``"name:key=value,key=value"`` -> ``(name, {key: value})``; raises SystemExit when malformed."""
    name, _, settings = text.partition(":")
    conf = {}
    for pair in filter(None, settings.split(",")):
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise SystemExit(f"--variant {text!r}: settings are key=value pairs separated by commas")
        conf[key.strip()] = value.strip()
    if not name:
        raise SystemExit(f"--variant {text!r}: give the variant a name before the colon")
    return name, conf


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("farm", help="dbfarm kept by bench/catchup.py --keep (holds 'bench' and 'base')")
    ap.add_argument(
        "--variant",
        action="append",
        required=True,
        help="name or name:key=value,...: Spark settings of replay's sessions (repeatable)",
    )
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each variant (default 5)")
    ap.add_argument("--warm", type=int, default=4, help="untimed warm-up runs (default 4)")
    ap.add_argument("--event-log", help="write Spark's event log into this folder")
    args = ap.parse_args()
    variants = [parse_variant(v) for v in args.variant]
    if not os.path.isdir(os.path.join(args.farm, "base")) or not os.path.isdir(os.path.join(args.farm, MASTER)):
        raise SystemExit(
            f"{args.farm} is not a kept bench farm (no 'base' and '{MASTER}'); make one with: "
            ".venv/bin/python bench/catchup.py --methods grouped --keep"
        )
    extra = {}
    if args.event_log:
        os.makedirs(args.event_log, exist_ok=True)
        extra = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": "file:" + os.path.abspath(args.event_log)}
    wlc.spark_session(**extra)
    storage = Storage.of(args.farm)
    logs = os.path.join(args.farm, MASTER, "wlc_logs")
    store = LogStore(storage, os.path.dirname(logs), logs, MASTER)
    recs = [t for b in store.batches() for t in store.manifest(b).txns]
    end_txn = max(t.txn for t in recs if t.table != "s.hot")  # the backlog, without the growth run's edits
    made = apply_module.replay_session

    def run(conf: dict[str, str]) -> float:
        def session(base):
            s = made(base)
            for key, value in conf.items():
                s.conf.set(key, value)
            return s

        apply_module.replay_session = session
        folder = os.path.join(args.farm, "ab_run")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(os.path.join(args.farm, "base"), folder)
        rep = wlr.Replica(MASTER, "ab_run", args.farm)
        t0 = time.perf_counter()
        rep.replicate(until=end_txn, follow=False)
        seconds = time.perf_counter() - t0
        rep.close()
        shutil.rmtree(folder, ignore_errors=True)
        apply_module.replay_session = made
        return seconds

    for k in range(args.warm):
        print(f"warm-up {k + 1}: {run(variants[k % len(variants)][1]):.2f} s", flush=True)
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    for k in range(args.runs):
        for name, conf in variants:
            times[name].append(run(conf))
            print(f"{name} run {k + 1}: {times[name][-1]:.2f} s", flush=True)
    first = statistics.median(times[variants[0][0]])
    for name, _ in variants:
        med = statistics.median(times[name])
        print(
            f"{name:12s} median {med:6.2f} s  x{med / first:.2f} of {variants[0][0]}  runs "
            + " ".join(f"{t:.2f}" for t in times[name])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
