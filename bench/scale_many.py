"""Workload ``many`` of ``bench/scale.py``: many keyed tables, a few large and busy, most small
and quiet, and a backlog of a few thousand small transactions over them (``bench/many_master.py``,
written with delta-rs, captured by ``wlc``).

A replica made up to the transaction before the backlog (``base``) is copied for each method;
each method runs in a process of its own (a fresh JVM), after an untimed warm-up of its own on
another copy (the first ``--many-warmup`` transactions of the backlog) and with the master's
folder and the base replica read into the page cache just before it (none pays the disk for
another), and its end state is checked equal to the master's (row count and checksum of every
table):

* grouped: ``wlr.Replica(...).replicate(until=<last txn>)``, segments collapsed, tables in
  parallel (``replica.parallelism`` threads), in a process with no Spark running (as ``wlr
  replicate`` runs: Spark starts only where a segment needs it);
* names:   the same in a process where a Spark session runs (a notebook's): replay also moves the
  tables' SQL names (a view each) to the new tick;
* floor:   one MERGE per changed table of its net change read from the master's change feed
  (``bench.methods.floor``), with the same number of threads;
* deltars: the delta-rs floor, what a Python data engineer writes without Spark: each changed
  table's change feed read by delta-rs, the last change per key, one delta-rs MERGE, four tables
  at a time (``bench.methods.deltars_floor``).

grouped, names and deltars are timed ``--many-repeat`` times (3) on fresh copies, and the median
is kept. The grouped run's process times the product's own functions from outside (``bench/probe.py``,
in its first timed run):
listing the log folder, reading manifests, verifying checksums and planning (the goal: <= 5% of
the catch-up), and the parts of a segment (the replica log checks, MERGE, recording progress),
next to Delta's own MERGE metrics of every commit. Last, ``wlc capture`` runs in a process of its
own on the master, publishes one new transaction and is left idle: its process tree's CPU seconds
over ``--many-idle`` seconds, as a share of one core (the goal: < 1% with 200 tables).
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.many_master import DB, build_master, versions  # noqa: E402
from bench.many_runs import (  # noqa: E402
    FLOOR_WORK,
    LOGS_WORK,
    SEGMENT_WORK,
    profile_idle_scans,
    run_deltars,
    run_floor,
    run_grouped,
)
from bench.scale_common import Report, cpu_seconds, descendants, in_own_process, warm_cache  # noqa: E402


def add_arguments(ap) -> None:
    g = ap.add_argument_group("many", "workload many: many tables, few busy")
    g.add_argument("--many-tables", type=int, default=200, help="tables (default 200)")
    g.add_argument("--many-busy", type=int, default=5, help="large, busy tables among them (default 5)")
    g.add_argument("--many-txns", type=int, default=3000, help="transactions in the backlog (default 3000)")
    g.add_argument("--many-hot-share", type=float, default=0.5, help="share on the busy tables (default 0.5)")
    g.add_argument("--many-rows", type=int, default=1000, help="rows of a quiet table (default 1000)")
    g.add_argument("--many-big-rows", type=int, default=200_000, help="rows of a busy table (default 200000)")
    g.add_argument("--many-warmup", type=int, default=150, help="backlog transactions of each warm-up (150)")
    g.add_argument(
        "--many-repeat", type=int, default=3, help="timed runs of grouped and the delta-rs floor, median kept (3)"
    )
    g.add_argument("--many-idle", type=float, default=60.0, help="seconds of idle capture measured (default 60)")
    g.add_argument("--many-parallelism", type=int, help="replica.parallelism (default: the product's)")
    g.add_argument("--many-idle-only", action="store_true", help="set up the master and measure idle capture only")
    g.add_argument("--many-farm", help="measure again on the dbfarm of a run kept with --keep (no set-up)")


def sizes(args) -> dict:
    if args.quick:
        return dict(
            tables=20,
            busy=2,
            txns=200,
            hot_share=0.5,
            rows=500,
            big_rows=20_000,
            warmup=30,
            repeat=args.many_repeat,
            idle=20.0,
            replay=not args.many_idle_only,
        )
    return dict(
        tables=args.many_tables,
        busy=args.many_busy,
        txns=args.many_txns,
        hot_share=args.many_hot_share,
        rows=args.many_rows,
        big_rows=args.many_big_rows,
        warmup=args.many_warmup,
        repeat=args.many_repeat,
        idle=args.many_idle,
        replay=not args.many_idle_only,
    )


# ----------------------------------------------------------------------------- idle capture
def idle_capture(farm: str, cfg: str, table_path: str, seconds: float) -> dict:
    """``wlc capture`` in a process of its own: one new transaction published, then left idle;
    CPU of its process tree (Python and its JVM) over ``seconds``, as a share of one core."""
    import deltalake

    from bench.many_master import rows
    from wlcore.health import status

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    out = open(os.path.join(farm, "capture.out"), "w")
    cmd = [sys.executable, "-m", "wlc", "--config", cfg, "capture", farm, DB, "--beat", "1"]
    proc = subprocess.Popen(cmd, env=env, cwd=str(REPO_ROOT), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while status(DB, dbfarm=farm).get("capture") != "alive":
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"wlc capture did not start: see {out.name}")
            time.sleep(1)
        tick = status(DB, dbfarm=farm).get("tick", -1)
        t0 = time.monotonic()
        deltalake.write_deltalake(table_path, rows([10**12], "idle"), mode="append")
        while status(DB, dbfarm=farm).get("tick", -1) <= tick:  # published: capture took it (beat 1 s)
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"wlc capture did not publish the new transaction: see {out.name}")
            time.sleep(0.2)
        published = time.monotonic() - t0
        time.sleep(5)  # the batch's own follow-up (watermark, heartbeat) settles
        tree = descendants(proc.pid)
        c0, p0, w0 = cpu_seconds(proc.pid), cpu_seconds(proc.pid, tree=False), time.monotonic()
        time.sleep(seconds)
        c1, p1, wall = cpu_seconds(proc.pid), cpu_seconds(proc.pid, tree=False), time.monotonic() - w0
        return {
            "share": (c1 - c0) / wall,
            "python": (p1 - p0) / wall,
            "wall": wall,
            "published": published,
            "processes": len(tree),
        }
    finally:
        _stop(proc)
        out.close()


def _started(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (capture flushes and stops), then SIGKILL to what is left of its tree: only the
    processes it started (the same pid and start time), never another one that took a pid since."""
    tree = [(pid, _started(pid)) for pid in descendants(proc.pid)]
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            pass
    for pid, started in reversed(tree):
        if started is not None and _started(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if proc.poll() is None:
        proc.wait(10)


# ----------------------------------------------------------------------------- the workload
def _config(farm: str, args) -> str:
    """This run's settings file: the one chosen so far (``WLC_CONFIG``), with ``--many-parallelism``."""
    from wlcore.settings import config_file

    base = config_file()
    cfg = (yaml.safe_load(base.read_text()) or {}) if base is not None else {}
    if args.many_parallelism:
        cfg.setdefault("replica", {})["parallelism"] = args.many_parallelism
    path = os.path.join(farm, "many.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path


def _goal(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _work_lines(title: str, totals: dict, labels, whole: float, per: int) -> list[str]:
    lines = [title]
    for label in labels:
        secs, calls = totals.get(label, (0.0, 0))
        lines.append(
            f"  {label:<42} {secs:8.2f} s {calls:6d} calls {100 * secs / whole:6.1f}% {secs / max(per, 1):7.3f} s/table"
        )
    return lines


def _merge_lines(name: str, merges: list) -> list[str]:
    """Delta's MERGE metrics, busy and quiet tables apart: the mean of each phase a MERGE."""
    out = []
    for kind in ("busy", "quiet"):
        ms = [m[1:] for m in merges if m[0].startswith(kind + ".")]
        if not ms:
            continue
        mean = [sum(col) / len(ms) / 1000 for col in zip(*ms)]
        execution, scan, rewrite, materialize = mean
        out.append(
            f"  {name:<8} {kind:<6} {len(ms):4d} MERGEs: a MERGE {execution:6.2f} s in Delta = scan (find the "
            f"touched files) {scan:5.2f} + rewrite {rewrite:5.2f} + materialize source {materialize:5.2f} + "
            f"the rest {execution - scan - rewrite - materialize:5.2f}"
        )
    return out


def _measure(
    args, sz: dict, farm: str, cfg: str
) -> tuple[dict, dict | None, dict | None, dict | None, dict | None, dict]:
    if args.many_farm:  # the set-up of a kept run; the methods' folders are made again
        for name in ("grouped", "grouped_names", "floor", "deltars"):
            for folder in (name, f"warm_{name}"):
                shutil.rmtree(os.path.join(farm, folder), ignore_errors=True)
            shutil.rmtree(os.path.join(farm, name), ignore_errors=True)
        with open(os.path.join(farm, "info.pickle"), "rb") as fh:
            info = pickle.load(fh)
    else:
        info = in_own_process(build_master, farm, cfg, sz)
        with open(os.path.join(farm, "info.pickle"), "wb") as fh:
            pickle.dump(info, fh)
    print(f"  set-up: {', '.join(f'{k} {v:.0f} s' for k, v in info['times'].items())}", flush=True)
    grouped = named = floor_ = deltars = None
    if sz["replay"]:
        warm = (os.path.join(farm, DB), os.path.join(farm, "base"))  # before each method: its files in the page cache
        warm_cache(*warm)
        grouped = in_own_process(run_grouped, farm, cfg, info, warm_txn(info, sz), repeat=sz["repeat"])
        print(f"  grouped: {grouped['seconds']:.1f} s, equal: {grouped['equal']}", flush=True)
        warm_cache(*warm)
        named = in_own_process(run_grouped, farm, cfg, info, warm_txn(info, sz), names=True, repeat=sz["repeat"])
        print(f"  grouped, Spark running (names moved): {named['seconds']:.1f} s, equal: {named['equal']}", flush=True)
        warm_cache(*warm)
        floor_ = in_own_process(run_floor, farm, cfg, info, warm_txn(info, sz))
        print(f"  floor: {floor_['seconds']:.1f} s, equal: {floor_['equal']}", flush=True)
        warm_cache(*warm)
        deltars = in_own_process(run_deltars, farm, cfg, info, warm_txn(info, sz), repeat=sz["repeat"])
        print(f"  delta-rs floor: {deltars['seconds']:.1f} s, equal: {deltars['equal']}", flush=True)
    quiet = [t for t in info["tables"] if t.startswith("quiet.")] or info["tables"]
    idle = idle_capture(farm, cfg, os.path.join(farm, DB, *quiet[-1].split(".")), sz["idle"])
    print(f"  idle capture: {100 * idle['share']:.2f}% of a core", flush=True)
    idle["profile"] = in_own_process(profile_idle_scans, farm, cfg, 20)
    return info, grouped, named, floor_, deltars, idle


def _idle_lines(idle: dict, tables: int) -> list[str]:
    prof = idle["profile"]
    return [
        f"idle capture ({tables} tables, beat 1 s, {idle['processes']} processes): "
        f"{100 * idle['share']:.2f}% of a core over {idle['wall']:.0f} s (Python alone "
        f"{100 * idle['python']:.2f}%); the new transaction was published in {idle['published']:.1f} s",
        f"  a wake-up of the capture thread (every {prof['interval']:g} s), profiled in the main thread: "
        f"{prof['cpu_ms']:.1f} ms CPU; the functions taking the most (calls, ms a wake-up, inclusive):",
        *[f"    {name:<56} {calls:7.1f} {ms:8.2f}" for name, calls, ms in prof["top"]],
    ]


def run(args) -> Report:
    sz = sizes(args)
    farm = args.many_farm or tempfile.mkdtemp(prefix="wlc-many-")
    print(f"== many: {sz['tables']} tables ({sz['busy']} busy), {sz['txns']} transactions, in {farm}", flush=True)
    try:
        info, grouped, named, floor_, deltars, idle = _measure(args, sz, farm, _config(farm, args))
    finally:
        if not args.keep and not args.many_farm:
            shutil.rmtree(farm, ignore_errors=True)
    if grouped is None or named is None or floor_ is None or deltars is None:
        report = Report("many", f"idle capture of a master of {len(info['tables'])} tables", ("",))
        report.notes = _idle_lines(idle, len(info["tables"]))
        report.summary = (
            f"idle capture {100 * idle['share']:.2f}% of a core with {len(info['tables'])} tables "
            f"(goal < 1%: {_goal(idle['share'] < 0.01)}); replay not measured (--many-idle-only)"
        )
        return report
    start, end = info["start"], info["end"]
    v0, v1 = versions(info["recs"], start), versions(info["recs"], end)
    changed = [t for t in info["tables"] if v1.get(t, -1) > v0.get(t, -1)]
    rows_read = sum(r for txn, _t, _v, r, _c in info["recs"] if start < txn <= end)
    images = sum(1 for txn, _t, _v, _r, c in info["recs"] if start < txn <= end and c == "image")
    g, f, r = grouped["seconds"], floor_["seconds"], deltars["seconds"]
    report = Report(
        "many",
        f"{len(info['tables'])} tables, {end - start} transactions on {len(changed)} of them "
        f"({rows_read:,} change rows), grouped replay against the floor",
        (
            "method",
            "seconds",
            "÷ floor",
            "÷ delta-rs",
            "s/table",
            "CPU s",
            "Spark jobs",
            "tables",
            "commits",
            "MERGEs",
            "equal to master",
        ),
    )
    for name, m in (("grouped", grouped), ("names", named), ("floor", floor_), ("deltars", deltars)):
        d = m["delta"]
        s = m["seconds"]
        row = (name, s, s / f, s / r, s / len(changed), m["cpu"], m["jobs"], len(changed), d["commits"])
        row += (len(d["merges"]), m["equal"])
        report.rows.append(row)
    report.equal = all(m["equal"] == "yes" for m in (grouped, named, floor_, deltars))
    totals = grouped["probe"]
    logs_secs = sum(totals.get(k, (0.0, 0))[0] for k in LOGS_WORK)
    share = logs_secs / g
    apply_secs = totals.get("apply (Round.run)", (0.0, 0))[0]
    threads = grouped["threads"]
    report.notes += [
        f"master: {sz['tables']} tables ({sz['busy']} busy of {sz['big_rows']:,} rows, the others {sz['rows']:,}), "
        f"backlog {end - start} transactions in {info['batches']} batches ({images} carried as images), "
        f"statements {info['ops']}; each method after a warm-up of transactions {start + 1}..{warm_txn(info, sz)}, "
        f"{threads} threads",
        f"set-up: {', '.join(f'{k} {v:.0f} s' for k, v in info['times'].items())}",
        "timed runs (each on a fresh copy of base; the table gives the median): "
        + "; ".join(
            f"{name} {', '.join(f'{x:.2f}' for x in m.get('runs', [m['seconds']]))} s"
            for name, m in (("grouped", grouped), ("names", named), ("deltars", deltars))
        ),
        *_work_lines(
            f"grouped catch-up {g:.1f} s: listing, manifests, checksums, planning (goal <= 5%)",
            totals,
            LOGS_WORK,
            g,
            len(changed),
        ),
        f"  {'together':<42} {logs_secs:8.2f} s {'':12} {100 * share:5.1f}%",
        f"  apply (Round.run, tables in parallel) {apply_secs:.1f} s = {100 * apply_secs / g:.0f}% of the catch-up; "
        f"the rest (set-up, reading, recording) {g - apply_secs:.1f} s",
        *_work_lines(
            f"grouped: inside the segments ({grouped['segments']}), thread-seconds over {threads} threads",
            totals,
            SEGMENT_WORK,
            g,
            len(changed),
        ),
        *_work_lines(
            f"floor: thread-seconds over {floor_['threads']} threads", floor_["probe"], FLOOR_WORK, f, len(changed)
        ),
        "Delta's own MERGE metrics (thread-seconds; under load they hold waiting for a core too):",
        *_merge_lines("grouped", grouped["delta"]["merges"]),
        *_merge_lines("floor", floor_["delta"]["merges"]),
        *_idle_lines(idle, len(info["tables"])),
    ]
    report.summary = (
        f"grouped {g:.1f} s = {g / f:.2f}x the floor {f:.1f} s (goal <= 0.7x: {_goal(g / f <= 0.7)}), "
        f"{g / r:.2f}x the delta-rs floor {r:.1f} s (goal <= {_deltars_goal(len(info['tables'])):.1f}x: "
        f"{_goal(g / r <= _deltars_goal(len(info['tables'])))}); with Spark running and the SQL names moved "
        f"{named['seconds']:.1f} s = {named['seconds'] / r:.2f}x the delta-rs floor; "
        f"listing+manifests+checksums+planning {logs_secs:.2f} s = {100 * share:.1f}% of the catch-up "
        f"(goal <= 5%: {_goal(share <= 0.05)}); idle capture {100 * idle['share']:.2f}% of a core with "
        f"{len(info['tables'])} tables (goal < 1%: {_goal(idle['share'] < 0.01)}); "
        f"{len(changed)} tables changed; equal to the master: {'yes' if report.equal else 'NO'}"
    )
    return report


def _deltars_goal(tables: int) -> float:
    """The goal against the delta-rs floor: at most 1.0x, 0.5x from 200 tables."""
    return 0.5 if tables >= 200 else 1.0


def warm_txn(info: dict, sz: dict) -> int:
    """The last transaction of each method's warm-up."""
    return min(info["end"], info["start"] + sz["warmup"])


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: a first look in minutes")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dbfarm")
    add_arguments(ap)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    report = run(args)
    print(report.render(), f"\n(many: {time.perf_counter() - t0:.0f} s)")
    return 0 if report.equal else 1


if __name__ == "__main__":
    from bench import scale_many  # functions run in processes of their own by their module's name

    sys.exit(scale_many.main())
