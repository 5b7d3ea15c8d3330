"""Benchmark: a replica catching up on a backlog, five methods side by side in one run.

``make bench`` runs it (one SparkSession, 2 cores are enough). Workload: TPC-H ``orders``
and ``lineitem`` at SF 0.1 from the demo's ``dbgen`` (keyed), an unkeyed ``events`` table
with duplicate rows, then a backlog of ``--txns`` master transactions: RF1/RF2 refresh
sets, UPDATEs of hot keys that change the same rows again and again (MusicBrainz's
``edits_pending`` +1 then -1), DELETEs, MERGEs and one ADD COLUMNS in the middle.
Capture is stopped while the backlog is written and catches up afterwards (this run
measures replay, not capture).

Every method starts from the same state (the tables after transaction 0), after one
untimed warm-up (a grouped replay of the backlog and a change-feed MERGE on scratch copies,
so no method pays for the JVM compiling MERGE's and replay's code), and its end state is
checked equal to the master's (row count and an order-independent checksum per table).
Serial replay runs first: its minutes of replay bring the JVM to a steady state, so the
methods timed after it (all the others) run in the same one.
Methods that take seconds run ``--repeat`` times (default 3) on fresh copies and the median
is reported next to every run's time (one run of them varies by +-20% on 2 cores); serial
replay runs once (its 300 transactions average out):

1. serial:  ``wlr.replicate(collapse=False)``, one replica commit per master transaction;
2. grouped: ``wlr.replicate()``, segments collapsed, tables in parallel;
3. recipe:  Delta's change-feed recipe: Structured Streaming over ``readChangeFeed`` from
            ``startingVersion``, ``foreachBatch`` keeping the latest change per key and
            MERGEing it, ``trigger(availableNow=True)``, restarted after the schema change
            (it has no duplicate-row semantics: the unkeyed table is merged by full row);
4. floor:   one batch read of each table's change-feed range, net change per key, one
            MERGE per table (the unkeyed table rewritten from its net counts);
5. recopy:  a full copy of every table at the end of the backlog;
6. deltars: what a Python data engineer writes in twenty lines without Spark: delta-rs reads
            each table's change feed, pandas keeps the last change per key, one delta-rs MERGE
            per table (the unkeyed table rewritten from its net counts); the floor replay is
            measured against (``bench.methods.deltars_floor``).

Then a growth run: ``--growth`` N and 4N transactions of hot-key edits on the same keys,
replayed grouped. Prints a table and a summary line with the ratios.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


import wlc  # noqa: E402
import wlr  # noqa: E402
from bench.methods import (  # noqa: E402
    Written,
    bytes_written,
    checksum,
    copy_tables,
    deltars_floor,
    equal,
    floor,
    recipe,
    recopy,
    timed,
)
from bench.tpch_backlog import KEYS, MAIN_TABLES, MASTER, Bench  # noqa: E402
from wlcore.deltalog import list_versions  # noqa: E402
from wlcore.logstore import LogStore  # noqa: E402
from wlcore.storage import Storage  # noqa: E402

METHODS = ("grouped", "serial", "recipe", "floor", "recopy", "deltars")


# ----------------------------------------------------------------------------- deletion vectors
def latest_version(path: str) -> int:
    """The newest version of the Delta table in local folder ``path``."""
    return list_versions(Storage.of(path), path)[-1]


@dataclass
class Vectors:
    ratio: float  # the replica's bytes written / the master's
    same: str  # "yes", or the table that differs
    lines: list[str]


def deletion_vectors(b: Bench, spark) -> Vectors:
    """A big keyed table with deletion vectors on the master (``lineitem`` copied, about 600,000
    rows at SF 0.1), captured and replicated; then a DELETE of a few keys and an UPDATE of a few
    others on the master, replayed in one segment. Compares what the replica's commit wrote with
    what the master's two commits wrote (:func:`bench.methods.bytes_written`): no data file
    rewritten whole where the master wrote a deletion vector."""
    print("== deletion vectors: a small DELETE and UPDATE on a big table that has them")
    table = "s.dv"
    m = wlc.master(MASTER, dbfarm=b.farm)
    b.run(
        f"CREATE TABLE {b.ref(table)} USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        f"'wlc.key' = 'l_orderkey,l_linenumber') AS SELECT * FROM {b.ref('tpch.lineitem')}"
    )
    first = wlc.flush()
    rep = wlr.replicate(MASTER, until=first, replica="dv", dbfarm=b.farm, tables=[table])
    replica_path = os.path.join(b.farm, "dv", *table.split("."))
    vm, vr = latest_version(b.path(table)), latest_version(replica_path)
    keys = spark.read.format("delta").load(b.path(table)).select("l_orderkey").distinct().orderBy("l_orderkey")
    picked = [r[0] for r in keys.limit(4000).collect()][::200]  # 20 orders spread over the table
    gone, updated = picked[:10], picked[10:]
    b.run(f"DELETE FROM {b.ref(table)} WHERE l_orderkey IN ({', '.join(map(str, gone))})")
    b.run(f"UPDATE {b.ref(table)} SET l_comment = 'dv' WHERE l_orderkey IN ({', '.join(map(str, updated))})")
    last = wlc.flush()
    m.close()
    secs = timed(lambda: rep.replicate(until=last))
    rep.close()
    master, replica = bytes_written(b.path(table), vm), bytes_written(replica_path, vr)
    cols = spark.read.format("delta").load(b.path(table)).columns
    same = (
        "yes"
        if checksum(spark.read.format("delta").load(b.path(table)), cols)
        == checksum(spark.read.format("delta").load(replica_path), cols)
        else f"NO: {table}"
    )
    ratio = replica.bytes / max(master.bytes, 1)
    lines = [
        f"deletion vectors ({table}, {len(gone)} orders deleted, {len(updated)} updated; replayed in {secs:.1f} s): "
        f"master {master.bytes / 1e3:.1f} kB ({master.vectors} deletion vectors, {master.files} files added, "
        f"{master.rewritten} removed whole), replica {replica.bytes / 1e3:.1f} kB ({replica.vectors} deletion vectors, "
        f"{replica.files} files added, {replica.rewritten} removed whole): {ratio:.2f}x; equal: {same}"
    ]
    return Vectors(ratio, same, lines)


# ----------------------------------------------------------------------------- main
def collapsed_rows(replica_folder: str) -> int:
    text = open(os.path.join(replica_folder, "wlr.log")).read()
    return sum(int(n) for n in re.findall(r"(\d+) after collapse", text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--txns", type=int, default=300, help="master transactions in the backlog (default 300)")
    ap.add_argument("--growth", type=int, default=40, help="N of the growth run: N and 4N hot-key edits (default 40)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dbfarm")
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs of each method but serial; the median is reported (default 3)"
    )
    ap.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated methods to run, grouped always (default {','.join(METHODS)})",
    )
    args = ap.parse_args()
    methods = {m.strip() for m in args.methods.split(",") if m.strip()} | {"grouped"}
    if methods - set(METHODS):
        ap.error(f"unknown method(s) {', '.join(sorted(methods - set(METHODS)))}; choose from {', '.join(METHODS)}")
    b = Bench(args.txns)
    spark = b.spark
    print(f"== set-up in {b.farm}")
    b.load()
    m = wlc.master(MASTER, dbfarm=b.farm)
    wlc.beat(3600)
    b.run(f"INSERT INTO {b.ref('s.events')} VALUES ('start', 0)")  # every method starts after this txn
    start_txn = wlc.flush()
    base = wlr.replicate(MASTER, until=start_txn, replica="base", dbfarm=b.farm)
    base.close()
    v0 = b.versions(KEYS)
    m.close()  # capture catches up after the backlog: this run measures replay
    t0 = time.perf_counter()
    b.backlog(args.txns)
    v1 = b.versions(MAIN_TABLES)
    b.hot_edits(4 * args.growth)
    print(f"  master statements written in {time.perf_counter() - t0:.0f} s")
    m = wlc.master(MASTER, dbfarm=b.farm)  # capture resumes and catches up
    wlc.flush()
    m.close()
    storage = Storage.of(b.farm)
    logs = os.path.join(b.farm, MASTER, "wlc_logs")
    store = LogStore(storage, os.path.dirname(logs), logs, MASTER)
    recs = [t for b in store.batches() for t in store.manifest(b).txns]
    # a statement that changes nothing is no transaction: take the ids from the logs
    end_txn = max(t.txn for t in recs if t.table != "s.hot")
    hot = [t.txn for t in recs if t.table == "s.hot" and t.txn > end_txn]
    rows_read = sum(sum(t.counts.values()) for t in recs if start_txn < t.txn <= end_txn)
    # the rows the backlog changed: inserted, deleted, and updated (their post-images)
    changed = sum(
        n for t in recs if start_txn < t.txn <= end_txn for k, n in t.counts.items() if k != "update_preimage"
    )
    print(
        f"  {end_txn - start_txn} transactions in the backlog, {len(hot)} hot-key edits after it, "
        f"{len(store.batches())} batches"
    )
    cols = {t: spark.read.format("delta").option("versionAsOf", v1[t]).load(b.path(t)).columns for t in MAIN_TABLES}
    expected = {
        t: checksum(spark.read.format("delta").option("versionAsOf", v1[t]).load(b.path(t)), cols[t])
        for t in MAIN_TABLES
    }
    base_folder = os.path.join(b.farm, "base")
    results = []  # (method, [seconds of each run], rows read, rows after, equal)
    fast = max(1, args.repeat)
    base_v = {t: latest_version(os.path.join(base_folder, *t.split("."))) for t in MAIN_TABLES}
    wrote: dict[str, Written] = {  # what each method's first run wrote into the replica's tables
        "master": sum((bytes_written(b.path(t), v0[t], v1[t]) for t in MAIN_TABLES), Written())
    }

    def written(folder: str) -> Written:
        return sum((bytes_written(os.path.join(folder, *t.split(".")), base_v[t]) for t in MAIN_TABLES), Written())

    def replica_run(name: str, collapse: bool, run: int) -> tuple[float, str, str]:
        folder = os.path.join(b.farm, name if run == 0 else f"{name}_{run}")
        shutil.copytree(base_folder, folder)
        rep = wlr.Replica(MASTER, os.path.basename(folder), b.farm)
        secs = timed(lambda: rep.replicate(until=end_txn, collapse=collapse))
        rep.close()
        return secs, equal(spark, expected, folder, MAIN_TABLES, cols), folder

    def replica_method(name: str, collapse: bool, runs: int) -> None:
        done = [replica_run(name, collapse, r) for r in range(runs)]
        after = rows_read if not collapse else collapsed_rows(done[0][2])  # the same for every run
        same = next((d[1] for d in done if d[1] != "yes"), "yes")
        wrote[name] = written(done[0][2])
        results.append((name, [d[0] for d in done], rows_read, after, same))
        print(f"  {name}: {' '.join(f'{d[0]:.1f}' for d in done)} s")

    # untimed: the JVM compiles MERGE's, the change feed's and replay's code paths, for every method
    print("== warm-up (untimed): a grouped replay of the backlog and change-feed MERGEs, on scratch copies")
    shutil.copytree(base_folder, os.path.join(b.farm, "warm"))
    warm = wlr.Replica(MASTER, "warm", b.farm)
    warm.replicate(until=end_txn)
    warm.close()
    copy_tables(base_folder, os.path.join(b.farm, "warm-floor"), ["tpch.orders"])
    floor(
        spark,
        b.path("tpch.orders"),
        os.path.join(b.farm, "warm-floor", "tpch", "orders"),
        v0["tpch.orders"] + 1,
        v0["tpch.orders"] + 3,
        KEYS["tpch.orders"],
    )
    if "deltars" in methods:  # delta-rs's library loaded, its first MERGE planned
        copy_tables(base_folder, os.path.join(b.farm, "warm-deltars"), ["tpch.orders"])
        deltars_floor(
            b.path("tpch.orders"),
            os.path.join(b.farm, "warm-deltars", "tpch", "orders"),
            v0["tpch.orders"] + 1,
            v0["tpch.orders"] + 3,
            KEYS["tpch.orders"],
        )

    print(
        f"== replay of transactions {start_txn + 1}..{end_txn} ({rows_read:,} change rows); "
        f"serial once, first; methods under a minute {fast} times each (median)"
    )
    # serial first: its minutes of replay bring the JVM to the steady state every later method
    # runs in (after one warm-up, a grouped run still gets faster for several runs: 11.8 s,
    # then 8.3 s by the eighth, on 2 cores)
    if "serial" in methods:
        replica_method("serial", False, 1)
    replica_method("grouped", True, fast)
    for name, fn in (
        (
            "recipe",
            lambda t, dst, run: recipe(
                spark, b.path(t), dst, v0[t] + 1, KEYS[t], os.path.join(b.farm, f"ckpt-{run}", t)
            ),
        ),
        ("floor", lambda t, dst, run: floor(spark, b.path(t), dst, v0[t] + 1, v1[t], KEYS[t])),
        ("recopy", lambda t, dst, run: recopy(spark, b.path(t), dst, v1[t])),
        ("deltars", lambda t, dst, run: deltars_floor(b.path(t), dst, v0[t] + 1, v1[t], KEYS[t])),
    ):
        if name not in methods:
            continue
        times, same = [], "yes"
        for run in range(fast):
            folder = os.path.join(b.farm, f"{name}-{run}")
            copy_tables(base_folder, folder, MAIN_TABLES)
            times.append(timed(lambda: [fn(t, os.path.join(folder, *t.split(".")), run) for t in MAIN_TABLES]))
            check = equal(spark, expected, folder, MAIN_TABLES, cols)
            same = check if same == "yes" else same
            if run == 0:
                wrote[name] = written(folder)
        after = sum(expected[t][0] for t in MAIN_TABLES) if name == "recopy" else "-"
        results.append((name, times, rows_read, after, same))
        print(f"  {name}: {' '.join(f'{x:.1f}' for x in times)} s")

    print(f"== growth: {args.growth} and {4 * args.growth} hot-key edits on the same 20 keys, grouped")
    growth = {}
    for n in (len(hot) // 4, len(hot)):
        runs = []
        for run in range(fast):
            name = f"growth{n}_{run}"
            shutil.copytree(os.path.join(b.farm, "grouped"), os.path.join(b.farm, name))
            rep = wlr.Replica(MASTER, name, b.farm)
            runs.append(timed(lambda: rep.replicate(until=hot[n - 1], collapse=True)))
            rep.close()
        growth[n] = statistics.median(runs)

    vectors = deletion_vectors(b, spark)

    results = [(name, statistics.median(times), times, read, after, same) for name, times, read, after, same in results]
    results.sort(key=lambda r: r[0] != "grouped")  # grouped first, the others in the order they ran
    grouped = results[0][1]
    print(
        f"\n{'method':<9} {'seconds':>9} {'÷ grouped':>10} {'rows read':>11} {'after collapse':>15} "
        f"{'MB written':>11} {'B/changed row':>14}  {'equal to master':<16} runs (s)"
    )
    for name, secs, times, read, after, same in results:
        after_text = f"{after:,}" if isinstance(after, int) else after
        w = wrote[name]
        print(
            f"{name:<9} {secs:>9.1f} {secs / grouped:>10.2f} {read:>11,} {after_text:>15} {w.bytes / 1e6:>11.1f} "
            f"{w.bytes / max(changed, 1):>14.0f}  {same:<16} {' '.join(f'{x:.1f}' for x in times)}"
        )
    w = wrote["master"]
    print(
        f"{'(master)':<9} {'':>9} {'':>10} {'':>11} {'':>15} {w.bytes / 1e6:>11.1f} {w.bytes / max(changed, 1):>14.0f}"
        f"  its own commits of the backlog; {changed:,} rows changed (inserted, deleted, updated)"
    )
    (n1, g1), (n4, g4) = sorted(growth.items())
    print(f"growth    {g1:>9.1f} s for {n1} txns, {g4:.1f} s for {n4} on the same keys: x{g4 / g1:.2f}")
    by = {r[0]: r[1] for r in results}
    parts = [f"grouped {grouped:.1f} s"]
    if "serial" in by:
        parts.append(f"serial {by['serial'] / grouped:.1f}x slower")
    if "recipe" in by:
        parts.append(f"recipe {by['recipe'] / grouped:.2f}x grouped")
    if "floor" in by:
        parts.append(f"grouped {grouped / by['floor']:.2f}x the floor")
    if "recopy" in by:
        parts.append(f"recopy {by['recopy'] / grouped:.2f}x grouped")
    if "deltars" in by:
        ratio = grouped / by["deltars"]
        parts.append(f"grouped {ratio:.2f}x the delta-rs floor (goal <= 1.0: {'met' if ratio <= 1.0 else 'MISSED'})")
    parts.append(f"4x txns on the same keys: {g4 / g1:.2f}x time")
    for line in vectors.lines:
        print(line)
    parts.append(
        f"bytes per changed row {wrote['grouped'].bytes / max(changed, 1):.0f} (the delta-rs floor "
        f"{wrote['deltars'].bytes / max(changed, 1) if 'deltars' in wrote else float('nan'):.0f}, the master "
        f"{wrote['master'].bytes / max(changed, 1):.0f})"
    )
    parts.append(
        f"deletion vectors: the replica wrote {vectors.ratio:.2f}x the master's bytes for a small DELETE and "
        f"UPDATE (goal <= 2: {'met' if vectors.ratio <= 2 else 'MISSED'}), equal: {vectors.same}"
    )
    print(f"\nSUMMARY {end_txn - start_txn} txns: {'; '.join(parts)}")
    if not args.keep:
        shutil.rmtree(b.farm, ignore_errors=True)
    return 0 if all(r[5] == "yes" for r in results if r[0] != "recipe") and vectors.same == "yes" else 1


if __name__ == "__main__":
    sys.exit(main())
