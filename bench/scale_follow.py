"""Workload ``follow`` of ``bench/scale.py``: a master written continuously by a Spark job and by a
delta-rs pipeline, captured at beat 1 s and followed by ``wlr replicate --follow`` (replica beat
1 s) in another process, on a machine kept busy.

Four processes: the Spark writer (``bench/follow_writer.py``, its own JVM: small INSERT, UPDATE,
DELETE and MERGE statements round-robin over ``--follow-tables`` keyed tables, as fast as it goes),
the delta-rs pipeline (``bench/follow_pipeline.py``, no JVM: one row committed every 0.5 s into
table ``f.rs``, an append or a MERGE), ``wlc capture`` and ``wlr replicate --follow``; and, while
writing, ``--follow-load`` processes that each keep a core busy (other work on the machine). The
tables are made and the first rows written before capture starts; the follower catches up with
them, then the writers write for ``--follow-minutes``. Afterwards the writers stop, the follower is
given ``--follow-drain`` seconds to apply everything published, and capture and the follower get
SIGTERM.

The lag of every transaction is read from both Delta logs afterwards, not from the product's own
lag figure: the master's commit time (``TxnRecord.time`` of the published batches, Delta's
time-travel rule) to the commit time of the replica commit whose final replay tag covers it
(same rule), split at the batch's publication (``manifest.created``) into capture's part and the
follower's. CPU is read from ``/proc`` for each process tree (Python and its JVM) over the
writing phase; "the master's" CPU is the master database's processes': its writers (the Spark
application and the delta-rs pipeline making the transactions) and capture. The follower against capture alone is printed
beside it, a stricter reading. The end state is checked equal to the master's (row count and
order-independent checksum per table).

Goals (the issue): lag p95 <= master beat + replica beat + 3 s and max <= beats + 10 s with the
machine busy, the follower's CPU at most 0.1 of the master's, and nothing left behind at the end.

Where the time and the CPU go: the lag split above; the master's statements and the replica's
segments by operation with Delta's own timings (``operationMetrics``); each process's CPU by
thread name (JIT compilers, GC, Spark tasks, py4j connections), sampled from ``/proc``; the CPU of
capture and the follower while nothing is written (``--follow-idle`` seconds before the writing).
``--follow-lean`` runs all three processes with the tests' Spark settings for tiny tables.

    /work/main/.venv/bin/python -m bench.scale_follow --quick [--keep]   # 2 minutes of writing
    /work/main/.venv/bin/python -m bench.scale_follow --follow-report /tmp/wlc-follow-XXXX  # a kept run again
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import yaml  # noqa: E402

from bench import follow_analysis as fa  # noqa: E402
from bench.follow_procs import Proc, ThreadSampler  # noqa: E402
from bench.scale_common import Report, in_own_process  # noqa: E402
from wlcore.settings import config_file  # noqa: E402
from wlcore.state import read_master_state, read_replica_state  # noqa: E402
from wlcore.storage import Storage  # noqa: E402

DB, REPLICA = "follow", "follow_replica"
LEAN = {  # --follow-lean: tests/wlc-test.yaml's settings for tiny tables
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -XX:+UseParallelGC -XX:TieredStopAtLevel=1",
}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("follow (a master written and followed)")
    g.add_argument("--follow-minutes", type=float, default=10.0, help="minutes of writing (default 10; --quick: 2)")
    g.add_argument("--follow-tables", type=int, default=10, help="keyed tables written round-robin (default 10)")
    g.add_argument("--follow-rows", type=int, default=200, help="rows of each table before the writing (default 200)")
    g.add_argument("--follow-beat", type=float, default=1.0, help="master.beat and replica.beat in seconds (default 1)")
    g.add_argument(
        "--follow-lean",
        action="store_true",
        help="Spark settings for small transactions in all three processes (tests/wlc-test.yaml's: no whole-stage "
        "code generation, the C1 compiler only, one shuffle partition, no adaptive execution)",
    )
    g.add_argument(
        "--follow-idle", type=float, default=20.0, help="seconds of CPU measured before the writing, idle (default 20)"
    )
    g.add_argument("--follow-drain", type=float, default=300.0, help="seconds the follower gets to drain (default 300)")
    g.add_argument(
        "--follow-load",
        type=int,
        default=2,
        help="processes that each keep a core busy while writing, other work on the machine (default 2: with "
        "the Spark writer, a load of about 4 on 2 cores)",
    )
    g.add_argument(
        "--follow-every",
        type=float,
        default=0.5,
        help="seconds between two commits of the delta-rs pipeline (default 0.5; 0: no pipeline)",
    )


def _wait(what: str, cond, deadline: float, procs: list[Proc], step: float = 0.2) -> float:
    """Poll ``cond()`` until true (returns the instant, time.time()); RuntimeError on the deadline."""
    while True:
        if cond():
            return time.time()
        for p in procs:
            p.check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(step)


def _master(storage: Storage, db_path: str):
    try:
        return read_master_state(storage, db_path)
    except Exception:  # noqa: BLE001 (read again at the next poll)
        return None


def _replica_tick(storage: Storage, rep_path: str) -> int:
    try:
        st = read_replica_state(storage, rep_path)
    except Exception:  # noqa: BLE001
        return -2
    return -2 if st is None else st.tick


def _published_through(storage: Storage, db_path: str, instant: float) -> int | None:
    """The master's tick once its watermark is at or after ``instant`` (every commit before it published)."""
    cfg = _master(storage, db_path)
    wm = None if cfg is None else cfg.watermark_time
    if wm is None or wm < datetime.fromtimestamp(instant, timezone.utc):
        return None
    return cfg.tick


def check_equal(config: str, farm: str, tables: list[str]) -> dict[str, tuple]:
    """Row count and checksum of every table on the master and on the replica (in its own process)."""
    from wlcore.settings import choose_config

    choose_config(config)
    import wlc
    from bench.methods import checksum

    spark = wlc.spark_session()
    out = {}
    for t in tables:
        schema, name = t.split(".")  # every table has id, v and s (the writer's and the pipeline's)
        sums = [
            checksum(spark.read.format("delta").load(os.path.join(farm, db, schema, name)), ["id", "v", "s"])
            for db in (DB, REPLICA)
        ]
        out[t] = tuple(sums)
    return out


def run(args: argparse.Namespace) -> Report:
    minutes = min(args.follow_minutes, 2.0) if args.quick else args.follow_minutes
    beat = args.follow_beat
    farm = tempfile.mkdtemp(prefix="wlc-follow-")
    control = Path(farm) / "control"
    control.mkdir()
    base = config_file()
    cfg = (yaml.safe_load(base.read_text()) or {}) if base is not None else {}
    cfg.setdefault("master", {})["beat"] = beat
    cfg.setdefault("replica", {})["beat"] = beat
    if args.follow_lean:
        cfg.setdefault("spark", {}).setdefault("conf", {}).update(LEAN)
    cfg_path = str(control / "follow.yaml")
    with open(cfg_path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    storage = Storage.of(farm)
    db_path, rep_path = os.path.join(farm, DB), os.path.join(farm, REPLICA)
    py = [sys.executable]
    procs: list[Proc] = []
    busy: list[Proc] = []  # the other work, while writing
    sampler = None
    print(
        f"follow: dbfarm {farm}, {args.follow_tables} tables, {minutes:g} min of writing, beat {beat:g} s", flush=True
    )
    try:
        subprocess.run(
            py + ["-m", "wlc", "--config", cfg_path, "master", farm, DB, "--beat", str(beat)],
            cwd=REPO_ROOT,
            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
            check=True,
            capture_output=True,
        )
        writer = Proc(
            "writer",
            py
            + [str(REPO_ROOT / "bench" / "follow_writer.py"), "--config", cfg_path, "--farm", farm, "--db", DB]
            + ["--control", str(control), "--tables", str(args.follow_tables), "--rows", str(args.follow_rows)],
            control / "writer.log",
        )
        procs.append(writer)
        _wait("the writer's tables", lambda: (control / "ready").exists(), time.monotonic() + 600, procs, 0.5)
        if args.follow_every > 0:
            pipeline = Proc(
                "pipeline",
                py
                + [str(REPO_ROOT / "bench" / "follow_pipeline.py"), "--farm", farm, "--db", DB]
                + ["--control", str(control), "--rows", str(args.follow_rows), "--every", str(args.follow_every)],
                control / "pipeline.log",
            )
            procs.append(pipeline)
            _wait("the pipeline's table", lambda: (control / "pipeline-ready").exists(), time.monotonic() + 120, procs)
        ready = time.time()
        capture = Proc(
            "capture", py + ["-m", "wlc", "--config", cfg_path, "capture", farm, DB], control / "capture.log"
        )
        procs.append(capture)
        t0 = time.monotonic()
        _wait(
            "capture of the first rows",
            lambda: _published_through(storage, db_path, ready) is not None,
            t0 + 600,
            procs,
        )
        first = _published_through(storage, db_path, ready)
        # started once batch 0 is out: a follower of a new master that has published nothing yet exits
        # with "no reachable starting point; take a snapshot" (wlr.planner.Route.start_for)
        follower = Proc(
            "follower",
            py + ["-m", "wlr", "--config", cfg_path, "replicate", farm, DB, REPLICA, "--follow"],
            control / "follower.log",
        )
        procs.append(follower)
        _wait("the follower's catch-up", lambda: _replica_tick(storage, rep_path) >= first, t0 + 600, procs)
        print(
            f"follow: set up and caught up (tick {first}) in {time.monotonic() - t0:.0f} s; writing "
            f"(pids: {', '.join(f'{p.name} {p.popen.pid}' for p in procs)})",
            flush=True,
        )

        idle = {}
        if args.follow_idle > 0:  # nothing written: what capture and the follower cost while they wait
            before, t_idle = {p.name: p.cpu() for p in procs}, time.monotonic()
            time.sleep(args.follow_idle)
            for p in procs:
                p.check()
            wall = time.monotonic() - t_idle
            idle = {p.name: (p.cpu() - before[p.name]) / wall for p in procs} | {"seconds": wall}
        cpu0 = {p.name: p.cpu() for p in procs}
        sampler = ThreadSampler(procs)
        sampler.start()
        busy += [
            Proc(f"load{i}", py + ["-c", "while True: pass"], control / f"load{i}.log") for i in range(args.follow_load)
        ]
        go = time.time()
        (control / "go").write_text(str(go))
        end = time.monotonic() + minutes * 60
        while time.monotonic() < end:
            for p in procs:
                p.check()
            time.sleep(1.0)
        cpu1 = {p.name: p.cpu() for p in procs}
        threads = sampler.stop()
        wall1 = time.time() - go
        load = float(Path("/proc/loadavg").read_text().split()[0])  # the 1-minute load average
        for p in busy:
            p.kill()
        (control / "stop").write_text(str(time.time()))
        writers = [p for p in procs if p.name in ("writer", "pipeline")]
        _wait(
            "the writers' end",
            lambda: not any(p.alive() for p in writers),
            time.monotonic() + 120,
            [capture, follower],
            0.1,
        )
        wrote = json.loads((control / "writer.json").read_text())
        piped = json.loads((control / "pipeline.json").read_text()) if args.follow_every > 0 else None
        ended = max(wrote["ended"], piped["ended"] if piped else 0.0)

        drain_deadline = time.monotonic() + args.follow_drain
        _wait(
            "capture to publish everything",
            lambda: _published_through(storage, db_path, ended) is not None,
            drain_deadline,
            [capture, follower],
        )
        last = _published_through(storage, db_path, ended)
        published_at = time.time()
        drained = False
        try:
            drained_at = _wait(
                "the follower to drain",
                lambda: _replica_tick(storage, rep_path) >= last,
                drain_deadline,
                [capture, follower],
            )
            drained = True
        except RuntimeError:
            drained_at = time.time()
        cpu2 = {p.name: p.cpu() for p in (capture, follower)}
        wall2 = drained_at - ended
        for p in (follower, capture):
            p.stop()

        tables = [f"f.t{i:02d}" for i in range(args.follow_tables)] + (["f.rs"] if piped else [])
        sums = in_own_process(check_equal, cfg_path, farm, tables)
        measured = dict(
            minutes=minutes,
            beat=beat,
            lean=bool(args.follow_lean),
            tables=tables,
            wrote=wrote,
            piped=piped,
            load=load,
            busy=args.follow_load,
            go=go,
            ended=ended,
            wall1=wall1,
            cpu0=cpu0,
            cpu1=cpu1,
            cpu2=cpu2,
            threads=threads,
            idle=idle,
            wall2=wall2,
            drained=drained,
            last=last,
            final_tick=_replica_tick(storage, rep_path),
            publish_wait=published_at - ended,
            sums=sums,
            farm=farm if args.keep else None,
        )
        (control / "measured.json").write_text(json.dumps(measured))
        return report_of(farm, measured)
    finally:
        if sampler is not None:
            sampler.done.set()
        for p in busy:
            p.kill()
        for p in reversed(procs):
            try:
                p.stop(60)
            except Exception:  # noqa: BLE001 (keep stopping the others)
                p.kill()
        if not args.keep:
            shutil.rmtree(farm, ignore_errors=True)


def report_of(farm: str, measured: dict) -> Report:
    """The report from what was measured and from the logs in ``farm`` (read again: ``--follow-report``)."""
    storage = Storage.of(farm)
    db_path, rep_path = os.path.join(farm, DB), os.path.join(farm, REPLICA)
    lag = fa.analyse(storage, db_path, rep_path, DB, measured["go"], measured["ended"])
    return fa.report(lag=lag, rep_path=rep_path, **measured)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--follow-report", metavar="DBFARM", help="the report of a run kept with --keep, read again")
    add_arguments(ap)
    args = ap.parse_args()
    if args.follow_report:
        kept = json.loads((Path(args.follow_report) / "control" / "measured.json").read_text())
        report = report_of(args.follow_report, kept)
    else:
        report = run(args)
    print(report.render())
    sys.exit(0 if report.equal else 1)
