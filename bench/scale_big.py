"""Workload ``big`` of ``bench/scale.py``: TPC-H at SF 1 (``lineitem`` about 6 million rows,
``orders`` 1.5 million, keyed by ``wlc.key``; the backlog of ``bench/tpch_backlog.py``).

1. Set-up of a new replica: ``wlr.replicate(until=-1, empty=True)`` from the master's first
   snapshot against a plain copy of the same table folders (``shutil.copytree`` of the snapshot's).
2. Catch-up of a backlog of ``--big-txns`` master transactions (RF1/RF2 refresh sets, hot-key
   updates, deletes, merges, one ADD COLUMNS): grouped replay against the floor (one MERGE of
   each table's net change), Delta's change-feed recipe and a full re-copy.

Every method runs in a process of its own (a fresh JVM and Spark session) on its own copy of
the same base replica, after an untimed warm-up of its own on the small tables; the timed part
excludes the session's start. End states are checked equal to the master's.
"""

from __future__ import annotations

import os
import pickle
import shutil
import time
import warnings

from bench.scale_common import Report, in_own_process, median

MAIN = ("tpch.orders", "tpch.lineitem", "s.events")
SMALL = ("s.events",)  # warm-ups run on it: every method's code path, none of the big tables' cost
GOAL_SETUP, GOAL_FLOOR, GOAL_RECOPY = 1.5, 1.0, 0.2
SETUP_RUNS = 3  # set-ups (each in a fresh process) and plain copies, interleaved
STATE = "scale_big.pickle"  # what the methods need of the master, kept in its dbfarm for --big-farm


def add_arguments(ap) -> None:
    """The workload's flags (``--big-...``)."""
    ap.add_argument("--big-scale", type=float, default=1.0, help="TPC-H scale factor (default 1; --quick: 0.1)")
    ap.add_argument("--big-txns", type=int, default=200, help="backlog transactions (default 200; --quick: 30)")
    ap.add_argument("--big-repeat", type=int, default=1, help="timed runs of each method (default 1)")
    ap.add_argument("--big-farm", help="reuse the master and backlog of a dbfarm an earlier run kept (--keep)")


def _session():
    import wlc

    return wlc.spark_session()


def _folder(farm: str, replica: str, table: str) -> str:
    return os.path.join(farm, replica, *table.split("."))


# ----------------------------------------------------------------------------- each in its own process
def setup_replica(farm: str, master: str, name: str, names: bool = False) -> float:
    """Seconds for a new replica from the master's first snapshot (its session started first).
    ``names`` False: as ``wlr replicate`` makes it (no SQL names); True: with the replica's SQL
    names made in the session (a notebook's ``wlr.replicate``), its first SQL statements included."""
    import wlr

    _session()
    t0 = time.perf_counter()
    rep = wlr.Replica(master, name, farm, names=names)
    rep.replicate(until=-1, empty=True, follow=False)
    seconds = time.perf_counter() - t0
    rep.close()
    return seconds


def verify_replica(farm: str, master: str, name: str) -> tuple[float, bool]:
    """Seconds of ``wlr verify`` of replica ``name`` (its session started first), and whether it found it equal."""
    import wlr

    _session()
    rep = wlr.Replica(master, name, farm, names=False)
    t0 = time.perf_counter()
    result = rep.verify()
    seconds = time.perf_counter() - t0
    rep.close()
    return seconds, result.equal


def grouped(farm: str, master: str, base: str, runs: int, end_txn: int, warm_txn: int) -> list[float]:
    """Grouped replay of the backlog on fresh copies of ``base``: a warm-up to ``warm_txn``, then ``runs`` timed."""
    import wlr

    _session()
    out = []
    for run in range(runs + 1):
        name = f"grouped_{run}"
        shutil.copytree(os.path.join(farm, base), os.path.join(farm, name))
        rep = wlr.Replica(master, name, farm)
        t0 = time.perf_counter()
        rep.replicate(until=warm_txn if run == 0 else end_txn, follow=False)
        out.append(time.perf_counter() - t0)
        rep.close()
        if run == 0:  # the warm-up's copy
            shutil.rmtree(os.path.join(farm, name))
    return out[1:]


def table_method(method: str, farm: str, master: str, base: str, runs: int, spans: dict, keys: dict) -> list[float]:
    """``floor``, ``recipe`` or ``recopy`` of every main table on fresh copies of ``base``: a warm-up
    on the small table, then ``runs`` timed. ``spans``: ``{table: (first version, last version)}``."""
    from bench.methods import copy_tables, floor, recipe, recopy

    spark = _session()

    def one(table: str, dst: str, tag: str) -> None:
        src = _folder(farm, master, table)
        first, last = spans[table]
        if method == "floor":
            floor(spark, src, dst, first, last, keys[table])
        elif method == "recipe":
            recipe(spark, src, dst, first, keys[table], os.path.join(farm, f"ckpt_{tag}", table))
        else:
            recopy(spark, src, dst, last)

    out = []
    for run in range(runs + 1):
        tables = SMALL if run == 0 else MAIN
        folder = os.path.join(farm, f"{method}_{run}")
        copy_tables(os.path.join(farm, base), folder, tables)
        t0 = time.perf_counter()
        for table in tables:
            one(table, _folder(farm, f"{method}_{run}", table), str(run))
        out.append(time.perf_counter() - t0)
    return out[1:]


def check(farm: str, folders: list[str], expected: dict, cols: dict) -> dict[str, str]:
    """``{folder: "yes" or what differs}`` for each replica folder against the master's checksums."""
    from bench.methods import equal

    spark = _session()
    return {f: equal(spark, expected, os.path.join(farm, f), MAIN, cols) for f in folders}


# ----------------------------------------------------------------------------- the master (this process)
def _master(scale: float, txns: int) -> dict:
    """Make the master, its first snapshot, the base replica and the backlog; returns what the methods need."""
    import wlc
    from bench.methods import checksum
    from bench.tpch_backlog import KEYS, MASTER, Bench
    from wlcore.logstore import LogStore
    from wlcore.storage import Storage

    b = Bench(txns, scale=scale, prefix="wlc-scale-big-")
    t0 = time.perf_counter()
    b.load()
    loaded = time.perf_counter() - t0
    m = wlc.master(MASTER, dbfarm=b.farm)  # master mode: the first snapshot copies every table
    wlc.beat(3600)
    b.run(f"INSERT INTO {b.ref('s.events')} VALUES ('start', 0)")
    start_txn = wlc.flush()
    v0 = b.versions(KEYS)
    m.close()
    t0 = time.perf_counter()
    b.backlog(txns)
    written = time.perf_counter() - t0
    v1 = b.versions(MAIN)
    with warnings.catch_warnings():  # "already in master mode": capture resuming is the point here
        warnings.simplefilter("ignore")
        m = wlc.master(MASTER, dbfarm=b.farm)  # capture resumes and publishes the backlog
    end_txn = wlc.flush()
    m.close()
    storage = Storage.of(b.farm)
    logs = os.path.join(b.farm, MASTER, "wlc_logs")
    store = LogStore(storage, os.path.dirname(logs), logs, MASTER)
    recs = [t for b in store.batches() for t in store.manifest(b).txns]
    spark = b.spark
    cols = {t: spark.read.format("delta").option("versionAsOf", v1[t]).load(b.path(t)).columns for t in MAIN}
    expected = {
        t: checksum(spark.read.format("delta").option("versionAsOf", v1[t]).load(b.path(t)), cols[t]) for t in MAIN
    }
    rows = {t: expected[t][0] for t in MAIN}
    warm = min(end_txn, start_txn + 5)  # the grouped warm-up replays the backlog's first transactions
    return {
        "farm": b.farm,
        "master": MASTER,
        "start_txn": start_txn,
        "end_txn": end_txn,
        "warm_txn": warm,
        "rows_read": sum(sum(r.counts.values()) for r in recs if start_txn < r.txn <= end_txn),
        "spans": {t: (v0[t] + 1, v1[t]) for t in MAIN},
        "keys": {t: KEYS[t] for t in MAIN},
        "cols": cols,
        "expected": expected,
        "rows": rows,
        "loaded": loaded,
        "written": written,
    }


def run(args) -> Report:
    """The workload; see the module."""
    import wlr

    scale = 0.1 if args.quick and args.big_scale == 1.0 else args.big_scale
    txns = 30 if args.quick and args.big_txns == 200 else args.big_txns
    runs = max(1, args.big_repeat)
    if args.big_farm:  # a farm kept by an earlier run: its master and backlog as they were
        with open(os.path.join(args.big_farm, STATE), "rb") as fh:
            w = pickle.load(fh)
        for name in os.listdir(args.big_farm):
            if name not in (w["master"], STATE):
                shutil.rmtree(os.path.join(args.big_farm, name), ignore_errors=True)
    else:
        w = _master(scale, txns)
        with open(os.path.join(w["farm"], STATE), "wb") as fh:
            pickle.dump(w, fh)
    farm, master = w["farm"], w["master"]
    # 1. set-up: a new replica from the snapshot against a plain copy of the same table folders (the
    # snapshot's: the tables at the version the replica starts from, not the master's folders after the
    # backlog, which hold every later version's files too)
    from wlcore.snapshots import folder_of

    # interleaved, SETUP_RUNS of each (the first set-up reads a colder page cache than the copy after
    # it); the medians are compared, the runs are printed
    snapshot = folder_of(os.path.join(farm, master), -1)
    setups, copies, named = [], [], []
    for run in range(SETUP_RUNS):
        name = "setup" if run == 0 else f"setup_{run}"  # the first is the base of every catch-up
        setups.append(in_own_process(setup_replica, farm, master, name))
        named.append(in_own_process(setup_replica, farm, master, f"setup_names_{run}", True))
        t0 = time.perf_counter()
        for table in (*MAIN, "s.hot"):
            shutil.copytree(os.path.join(snapshot, *table.split(".")), _folder(farm, f"filecopy_{run}", table))
        copies.append(time.perf_counter() - t0)
    size = sum(
        os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(os.path.join(farm, "filecopy_0")) for f in fs
    )
    for run in range(SETUP_RUNS):
        shutil.rmtree(os.path.join(farm, f"filecopy_{run}"))
        shutil.rmtree(os.path.join(farm, f"setup_names_{run}"))
        if run:
            shutil.rmtree(os.path.join(farm, f"setup_{run}"))
    setup, copied = median(setups), median(copies)
    # the base of every catch-up: the replica made above, brought to the backlog's start
    wlr.Replica(master, "setup", farm).replicate(until=w["start_txn"], follow=False).close()
    times = {"grouped": in_own_process(grouped, farm, master, "setup", runs, w["end_txn"], w["warm_txn"])}
    for method in ("floor", "recipe", "recopy"):
        times[method] = in_own_process(table_method, method, farm, master, "setup", runs, w["spans"], w["keys"])
    folders = ["grouped_1", "floor_1", "recipe_1", "recopy_1"]
    same = in_own_process(check, farm, folders, w["expected"], w["cols"])
    verified, verified_equal = in_own_process(verify_replica, farm, master, "grouped_1")
    g = median(times["grouped"])
    by = {m: median(t) for m, t in times.items()}
    rows = [
        ("set-up: new replica, as wlr replicate makes it (x copy)", setup, setup / copied, "-", f"<= {GOAL_SETUP}x"),
        ("set-up: plain copy of the table folders", copied, 1.0, "-", ""),
        ("set-up with SQL names, a fresh session (x copy)", median(named), median(named) / copied, "-", ""),
    ]
    for method, folder in zip(("grouped", "floor", "recipe", "recopy"), folders):
        goal = {"grouped": "", "floor": f"grouped <= {GOAL_FLOOR}x", "recopy": f"grouped <= {GOAL_RECOPY}x"}.get(
            method, ""
        )
        rows.append((f"catch-up: {method} (x grouped)", by[method], by[method] / g, same[folder], goal))
    rows.append(
        ("wlr verify of the grouped replica (x grouped)", verified, verified / g, "yes" if verified_equal else "NO", "")
    )
    ok_setup, ok_floor, ok_recopy = (
        setup <= GOAL_SETUP * copied,
        g <= GOAL_FLOOR * by["floor"],
        g <= GOAL_RECOPY * by["recopy"],
    )
    summary = (
        f"SF {scale:g}, {w['end_txn'] - w['start_txn']} txns: set-up {setup / copied:.2f}x a file copy "
        f"({'met' if ok_setup else 'MISSED'} <= {GOAL_SETUP}); grouped {g / by['floor']:.2f}x the floor "
        f"({'met' if ok_floor else 'MISSED'} <= {GOAL_FLOOR}), {g / by['recopy']:.2f}x a re-copy "
        f"({'met' if ok_recopy else 'MISSED'} <= {GOAL_RECOPY}), recipe {by['recipe'] / g:.2f}x grouped"
    )
    notes = [
        f"  master: {sum(w['rows'].values()):,} rows in {', '.join(f'{t} {n:,}' for t, n in w['rows'].items())}; "
        f"{size / 1e9:.2f} GB of table folders; loaded in {w['loaded']:.0f} s, backlog written in {w['written']:.0f} s",
        f"  set-up runs (s, interleaved): new replica {' '.join(f'{x:.2f}' for x in setups)}; "
        f"plain copy {' '.join(f'{x:.2f}' for x in copies)}; with SQL names {' '.join(f'{x:.2f}' for x in named)} "
        "(the session's first SQL statements and Delta loads, about 3 s once a session)",
        f"  backlog: transactions {w['start_txn'] + 1}..{w['end_txn']}, {w['rows_read']:,} change rows; "
        f"runs (s): " + "; ".join(f"{m} {' '.join(f'{x:.1f}' for x in t)}" for m, t in times.items()),
    ]
    if not args.keep and not args.big_farm:
        shutil.rmtree(farm, ignore_errors=True)
    else:
        notes.append(f"  kept: {farm}")
    return Report(
        "big",
        f"TPC-H SF {scale:g}: a new replica's set-up, and a backlog caught up four ways",
        ("measurement", "seconds", "ratio", "equal to master", "goal"),
        rows,
        summary,
        all(v == "yes" for k, v in same.items() if not k.startswith("recipe")),
        notes,
    )
