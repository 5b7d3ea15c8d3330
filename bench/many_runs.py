"""The methods of the ``many`` workload (``bench/scale_many.py``), each run in a process of its own
(:func:`bench.scale_common.in_own_process`) on a copy of the ``base`` replica, after an untimed
warm-up of its own on another copy: grouped replay (``wlr``), with timers on the product's own
functions (:mod:`bench.probe`), and the floor (one MERGE per changed table of its net change from the
master's change feed, the same number of threads), and the delta-rs floor (the same from delta-rs,
four tables at a time, no Spark). Each returns its seconds, CPU seconds, the
timers, Delta's own metrics of the commits it made, and whether every table equals the master's.
"""

from __future__ import annotations

import os
import shutil
import warnings

from bench.many_master import DB, session, versions
from bench.scale_common import cpu_seconds

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LOGS_WORK = {  # the goal's share: listing the log folder, manifests, checksums, planning
    "list the log folder": [("wlcore.logstore", "LogStore.batches"), ("wlcore.logstore", "LogStore.compacted")],
    "read manifests": [("wlcore.batch", "read_manifest")],
    "verify checksums": [("wlcore.batch", "verify_files")],
    "plan": [("wlr.planner", "plan"), ("wlr.replay", "segments"), ("wlr.replay", "consistent_tick")],
}
SEGMENT_WORK = {  # thread-seconds inside the segments (nested: a segment holds the others)
    "segments (all their work)": [("wlr.replay", "Round._segment_jobs")],
    "  replica log checks before a segment": [("wlr.replay", "Round._progress")],
    "  replica table metadata": [("wlr.apply", "ReplicaTables.current_meta")],
    "  change rows read (plan + schema)": [("wlcore.collapse", "read_rows")],
    "  DeltaTable.forPath (target's log)": [("delta.tables", "DeltaTable.forPath")],
    "  MERGE execute (jobs + commit)": [("delta.tables", "DeltaMergeBuilder.execute")],
    "  append (insert-only segments)": [("wlr.apply", "SparkEngine._append")],
    "  Arrow engine (small tables, in the process)": [("wlr.apply", "ArrowEngine.land")],
    "  progress recorded (wlr.config, view)": [("wlr.replay", "Round._applied")],
}
DELTARS_THREADS = 4  # what a delta-rs script over many tables would run: a thread pool of four

FLOOR_WORK = {
    "tables (all their work)": [("bench.methods", "floor")],
    "  DeltaTable.forPath (target's log)": [("delta.tables", "DeltaTable.forPath")],
    "  MERGE execute (jobs + commit)": [("delta.tables", "DeltaMergeBuilder.execute")],
}


PHASES = ("executionTimeMs", "scanTimeMs", "rewriteTimeMs", "materializeSourceTimeMs")


def merge_metrics(folder: str, tables, since: dict[str, int]) -> dict:
    """Delta's own metrics of the commits after ``since`` (each table's version) in ``folder``'s
    tables: ``{"commits": n, "merges": [(table, *PHASES in ms)]}``."""
    from wlcore.deltalog import list_versions, read_commit
    from wlcore.storage import Storage

    storage = Storage.of(folder)
    out: dict = {"commits": 0, "merges": []}
    for t in tables:
        path = os.path.join(folder, *t.split("."))
        for v in list_versions(storage, path):
            if v <= since.get(t, -1):
                continue
            c = read_commit(storage, path, v)
            out["commits"] += 1
            if c.operation == "MERGE":
                out["merges"].append((t, *(int(c.metrics.get(k, 0) or 0) for k in PHASES)))
    return out


def spark_jobs(spark) -> int:
    """Spark jobs submitted so far in this process's SparkContext (every session's; 0: none runs)."""
    from pyspark import SparkContext

    sc = spark.sparkContext if spark is not None else SparkContext._active_spark_context
    return int(sc._jsc.sc().dagScheduler().numTotalJobs()) if sc is not None else 0


def _table_versions(folder: str, tables) -> dict[str, int]:
    from wlcore.deltalog import list_versions
    from wlcore.storage import Storage

    storage = Storage.of(folder)
    return {t: (list_versions(storage, os.path.join(folder, *t.split("."))) or [-1])[-1] for t in tables}


# ----------------------------------------------------------------------------- methods (own process each)
def run_grouped(farm: str, cfg: str, info: dict, warm_txn: int, names: bool = False, repeat: int = 1) -> dict:
    """Grouped replay. ``names``: with a Spark session running in the process (a notebook's), so
    replay moves the tables' SQL names after its round; else none until the end state is checked
    (``wlr replicate`` as a process: Spark starts only where a segment needs it). ``repeat``: timed
    runs, each on a fresh copy of ``base``; the first one probed, the median's seconds and CPU kept
    (``runs``: every run's seconds)."""
    from wlcore.settings import choose_config

    choose_config(cfg)
    spark = session(cfg) if names else None
    import wlr
    from bench.methods import timed
    from bench.probe import Probe
    from wlcore.settings import settings

    replica = "grouped_names" if names else "grouped"
    base = os.path.join(farm, "base")
    shutil.copytree(base, os.path.join(farm, f"warm_{replica}"))
    rep = wlr.Replica(DB, f"warm_{replica}", farm)
    rep.replicate(until=warm_txn)
    rep.close()
    folder = os.path.join(farm, replica)
    probe = Probe()
    runs: list[tuple[float, float, int]] = []
    segments = since = None
    for run in range(max(1, repeat)):
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(base, folder)
        since = _table_versions(folder, info["tables"])
        if run == 0:
            for label, targets in {
                **LOGS_WORK,
                **SEGMENT_WORK,
                "apply (Round.run)": [("wlr.replay", "Round.run")],
            }.items():
                for module, name in targets:
                    probe.wrap(module, name, label)
        log = os.path.join(folder, "wlr.log")
        before = open(log).read().count(" applied ")  # the base replica's own lines
        rep = wlr.Replica(DB, replica, farm)
        cpu0, jobs0 = cpu_seconds(os.getpid()), spark_jobs(spark)
        try:
            secs = timed(lambda: rep.replicate(until=info["end"]))
        finally:
            runs.append((secs, cpu_seconds(os.getpid()) - cpu0, spark_jobs(spark) - jobs0))
            rep.close()
            probe.remove()
        segments = open(log).read().count(" applied ") - before
    secs, cpu, jobs = sorted(runs)[len(runs) // 2]
    spark = spark or session(cfg)  # for the check of the end state
    threads = settings().replica.parallelism
    out = _result(spark, info, folder, since, threads, secs, cpu, jobs, probe, segments or 0)
    out["runs"] = [r[0] for r in runs]
    return out


def run_floor(farm: str, cfg: str, info: dict, warm_txn: int) -> dict:
    spark = session(cfg)
    from bench import methods
    from bench.methods import copy_tables, in_threads, timed
    from bench.probe import Probe
    from wlcore.settings import settings

    threads = settings().replica.parallelism
    base = os.path.join(farm, "base")
    master = os.path.join(farm, DB)
    keys = ["k"]
    v0 = versions(info["recs"], info["start"])

    def jobs(folder: str, upto: int) -> dict:
        v1 = versions(info["recs"], upto)
        changed = [t for t in info["tables"] if v1.get(t, -1) > v0.get(t, -1)]
        return {
            t: (
                lambda t=t: methods.floor(  # through the module: the probe sees it
                    spark,
                    os.path.join(master, *t.split(".")),
                    os.path.join(folder, *t.split(".")),
                    v0[t] + 1,
                    v1[t],
                    keys,
                )
            )
            for t in changed
        }

    warm = os.path.join(farm, "warm_floor")
    copy_tables(base, warm, info["tables"])
    in_threads(spark, jobs(warm, warm_txn), threads, "floor")
    folder = os.path.join(farm, "floor")
    copy_tables(base, folder, info["tables"])
    since = _table_versions(folder, info["tables"])
    todo = jobs(folder, info["end"])
    probe = Probe()
    for label, targets in FLOOR_WORK.items():
        for module, name in targets:
            probe.wrap(module, name, label)
    cpu0, jobs0 = cpu_seconds(os.getpid()), spark_jobs(spark)
    try:
        secs = timed(lambda: in_threads(spark, todo, threads, "floor"))
    finally:
        cpu, jobs = cpu_seconds(os.getpid()) - cpu0, spark_jobs(spark) - jobs0
        probe.remove()
    return _result(spark, info, folder, since, threads, secs, cpu, jobs, probe, len(todo))


def run_deltars(farm: str, cfg: str, info: dict, warm_txn: int, repeat: int = 1) -> dict:
    """The delta-rs floor (:func:`bench.methods.deltars_floor`): each changed table's change feed
    read by delta-rs, its last change per key, one delta-rs MERGE, ``DELTARS_THREADS`` tables at a
    time in a thread pool; no Spark but for the check of the end state. ``repeat``: timed runs,
    each on a fresh copy of ``base``, the median's seconds and CPU kept (``runs``: every run's)."""
    from concurrent.futures import ThreadPoolExecutor

    from bench import methods
    from bench.methods import copy_tables, timed

    master = os.path.join(farm, DB)
    v0 = versions(info["recs"], info["start"])

    def run(folder: str, upto: int) -> int:
        v1 = versions(info["recs"], upto)
        changed = [t for t in info["tables"] if v1.get(t, -1) > v0.get(t, -1)]

        def one(t: str) -> None:
            src, dst = os.path.join(master, *t.split(".")), os.path.join(folder, *t.split("."))
            methods.deltars_floor(src, dst, v0[t] + 1, v1[t], ["k"])

        with ThreadPoolExecutor(DELTARS_THREADS) as pool:
            list(pool.map(one, changed))
        return len(changed)

    base = os.path.join(farm, "base")
    warm = os.path.join(farm, "warm_deltars")
    copy_tables(base, warm, info["tables"])
    run(warm, warm_txn)
    folder = os.path.join(farm, "deltars")
    runs: list[tuple[float, float]] = []
    changed: list[int] = []
    since: dict = {}
    for _ in range(max(1, repeat)):
        shutil.rmtree(folder, ignore_errors=True)
        copy_tables(base, folder, info["tables"])
        since = _table_versions(folder, info["tables"])
        cpu0 = cpu_seconds(os.getpid())
        secs = timed(lambda: changed.append(run(folder, info["end"])))
        runs.append((secs, cpu_seconds(os.getpid()) - cpu0))
    secs, cpu = sorted(runs)[len(runs) // 2]
    spark = session(cfg)  # for the check of the end state only
    out = _result(spark, info, folder, since, DELTARS_THREADS, secs, cpu, 0, None, changed[-1])
    out["runs"] = [r[0] for r in runs]
    return out


def profile_idle_scans(farm: str, cfg: str, scans: int) -> dict:
    """What an idle capture does at each wake-up, profiled: ``scans`` times the body of the capture
    thread's loop (:meth:`wlc.master.CaptureThread._run`: the publisher's scan, its due time,
    the heartbeat, the schema check) in this process's main thread under cProfile, a poll interval
    apart, as the thread runs them on an idle local master: the first reads every table's log,
    the others see no event in the database folder and read none (a scan that reads the logs
    again comes every ``wlc.master.FULL_SCAN`` seconds). Returns the CPU milliseconds a
    scan and the functions taking the most of it."""
    import cProfile
    import pstats
    import time

    session(cfg)
    import wlc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "already in master mode": as meant
        m = wlc.Master(DB, dbfarm=farm, capture=False).start()
    try:
        interval = m.timing.poll_interval
        prof = cProfile.Profile()
        cpu = 0.0
        m.publisher.capture.quiet.on = True  # as the thread sets it where events wake it
        for i in range(scans):
            c0 = time.process_time()
            prof.enable()
            m.publisher.step(take_all=False, look=i == 0)
            m.publisher.due_in()
            m.publisher.heartbeat()
            m.catalog.check_schemas()
            prof.disable()
            cpu += time.process_time() - c0
            time.sleep(interval)
    finally:
        m.close()
    stats = pstats.Stats(prof).stats  # {(file, line, name): (cc, nc, tottime, cumtime, callers)}
    top = sorted(stats.items(), key=lambda kv: kv[1][3], reverse=True)
    wanted = [
        (
            f"{os.path.relpath(k[0], str(REPO_ROOT)) if k[0].startswith(str(REPO_ROOT)) else os.path.basename(k[0])}"
            f":{k[2]}",
            v[1] / scans,
            1000 * v[3] / scans,
        )
        for k, v in top
        if k[0].startswith(str(REPO_ROOT)) or k[2] in ("listdir", "stat", "scandir", "open", "read")
    ]
    return {"cpu_ms": 1000 * cpu / scans, "interval": interval, "top": wanted[:14]}


def _result(spark, info: dict, folder: str, since: dict, threads: int, secs, cpu, jobs, probe, segments: int) -> dict:
    """A method's measurements, its end state checked against the master's (``equal``)."""
    from bench.methods import equal_many

    return {
        "seconds": secs,
        "cpu": cpu,
        "jobs": jobs,
        "equal": equal_many(spark, info["expected"], folder, info["tables"], info["cols"], threads),
        "probe": probe.totals() if probe is not None else {},
        "segments": segments,
        "delta": merge_metrics(folder, info["tables"], since),
        "threads": threads,
    }
