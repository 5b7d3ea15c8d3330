"""Workload ``long`` of ``bench/scale.py``: a master with a long log of level-0 batches (20,000 by
default, ``--long-batches``; ``--quick``: 500), beat 0 (one transaction per batch).

Measured, at two log lengths on the same master (``--long-first`` of the batches, 10 %, then all):

* ``wlc status``, ``wlr status`` (of a replica a few batches behind), ``wlr log`` (every
  transaction) and ``wlr log --since <a recent transaction>``, each as a subprocess (wall time,
  which includes Python's start and the imports) and the same call in-process;
* a new replica's planning before its first apply (in-process: from ``wlr.replicate`` until its first
  round starts applying, seen by wrapping ``wlr.replay.Round.run``: set-up, reading and checking
  every manifest, the plan, verifying the change files) and its whole first replay;
* a replica one batch behind catching up that batch (``wlr replicate --until <tick>``: subprocesses,
  which include Spark's start, and in-process calls, which do not);
* then ``wlc compact`` (``--long-level1`` level-0 batches per level-1 batch, ``--long-level2``
  level-1 batches per level-2 batch) and ``wlc prune`` (``master.retention.level0: 1s``: every
  level-0 batch a compacted batch covers goes), ``wlr log`` again and a new replica through the
  compacted levels (a subprocess).

Goals: status and ``wlr log --since`` under 1 s, planning under 5 s, the one-batch catch-up
within 20 % at both lengths (in-process medians: the subprocesses add Spark's start). Every
replica's end state is checked equal to the master (row count and an order-independent checksum).

How the long log is made in minutes (capture at beat 0 costs a Spark job per transaction: hours
for 20,000). A real master is made and captured: ``wlc.master`` on a new dbfarm, table ``s.t``
(``id BIGINT, v STRING``, ``wlc.key = id``) created by Spark, two inserts captured at beat 0
(``wlc.beat(0)``, ``wlc.flush()``), capture stopped with ``Master.close()``. The last real batch
is the template: the synthetic batches repeat its record (operation, change ``cdf``), its cursor
and the Parquet schema of its change rows (with Spark's metadata). For each log length, the rows
of the next transactions (3 new keys each, ``--long-rows``) are first appended to the master
table in one Spark commit (version V, commit time T by Delta's rule, as capture reads it); then
one level-0 batch per transaction is published with the product's writer (``wlcore.logstore.LogStore``'s
``stage`` and ``publish``, which checksums the files): numbers and transaction ids continuing gap-free, GTID
``<dbid>:<txn>``, commit times spread evenly after the master's last transaction and watermark and
ending at T, each watermark just before the next transaction (the last one: now less
``capture.settle``), the change rows in ``rows/s.t/wlc_version=V/part-*.parquet`` written with
pyarrow in capture's schema, every record naming version V and every cursor the table at V and T
(a restarted capture starts after the append, which the batches describe); ``wlc.config``
(batches, tick, write, watermark) and ``wlc.log`` follow as capture writes them. That is the
on-disk result capture produces at beat 0 for those inserts, but for the master's Delta log, which
holds one append instead of one commit per transaction (nothing measured here reads it but
``wlr status``, which lists its versions). ``os.fsync`` is a no-op while the batches are written
(a throwaway dbfarm; capture's own publish costs about 9 fsyncs per batch).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.scale_common import Report, in_own_process  # noqa: E402

HEADER = ("measurement", "batches", "run as", "seconds", "CPU s", "goal", "met")
PLANNING = "new replica: planning before its first apply"
CATCHUP = "one-batch catch-up"
SINCE = "wlr log --since <tick - 4>"
PRUNE = "wlc prune (level0: 1s)"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("long (a master with a long log)")
    g.add_argument("--long-batches", type=int, help="level-0 batches of the master (default 20000; --quick: 500)")
    g.add_argument("--long-first", type=float, default=0.1, help="the first log length, a fraction (default 0.1)")
    g.add_argument("--long-rows", type=int, default=3, help="rows each transaction inserts (default 3)")
    g.add_argument("--long-reps", type=int, default=3, help="repetitions of each measurement (default 3)")
    g.add_argument("--long-level1", type=int, help="level-0 batches per level-1 batch (default batches/20)")
    g.add_argument("--long-level2", type=int, default=5, help="level-1 batches per level-2 batch (default 5)")


def run(args) -> Report:
    """The workload in a process of its own (its settings, its Spark session); see the module."""
    opts = {k: getattr(args, k, None) for k in ("quick", "keep")}
    opts.update({k: v for k, v in vars(args).items() if k.startswith("long_")})
    return in_own_process(_run, opts)


def _config(farm: str) -> str:
    from wlcore.settings import config_file

    base = config_file()  # the file chosen so far (WLC_CONFIG), if any
    cfg = (yaml.safe_load(base.read_text()) or {}) if base is not None else {}
    cfg.setdefault("capture", {}).update({"settle": 0.2, "poll_interval": 0.2})
    cfg.setdefault("master", {})["retention"] = {"level0": "1s"}
    cfg.setdefault("replica", {})["beat"] = 1
    path = os.path.join(farm, "long.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path


def _run(opts: dict) -> Report:
    from wlcore.settings import choose_config

    n = opts.get("long_batches") or (500 if opts.get("quick") else 20_000)
    farm = tempfile.mkdtemp(prefix="wlc-scale-long-")
    cfg_path = _config(farm)
    choose_config(cfg_path)  # this process's settings from now on (nothing written to os.environ)
    try:
        report = Workload(farm, cfg_path, n, opts).run()
    finally:
        if opts.get("keep"):
            print(f"long: the dbfarm is kept in {farm}", flush=True)
        else:
            shutil.rmtree(farm, ignore_errors=True)
    return report


class Workload:
    """The master, its long log, the measurements at two lengths, compaction and prune."""

    def __init__(self, farm: str, cfg_path: str, n: int, opts: dict):
        import wlc
        from bench.scale_long_time import Commands, Rows

        self.farm, self.n, self.opts = farm, n, opts
        self.reps = max(1, opts.get("long_reps") or 3)
        self.rows_per_txn = opts.get("long_rows") or 3
        self.cmds, self.out = Commands(cfg_path), Rows()
        self.spark = wlc.spark_session()
        self.equal: list[str] = []
        self.notes: list[str] = []

    def run(self) -> Report:
        from bench import scale_long_synth as synth

        t0 = time.perf_counter()
        self.tpl = synth.make_master(self.spark, self.farm)
        made = time.perf_counter() - t0
        first = max(2 * self.reps + 5, int(self.n * (self.opts.get("long_first") or 0.1)))
        lengths = []
        for upto in (first, self.n):
            batches = self.grow(upto - self.batches())
            lengths.append(batches)
            self.measure(batches)
        self.lifecycle(lengths[-1])
        self.notes.insert(0, f"master made and captured (3 real batches) in {made:.0f} s; dbfarm {self.farm}")
        return self.report(lengths)

    # ------------------------------------------------------------------ the master
    def batches(self) -> int:
        from wlcore.state import read_master_state

        return read_master_state(self.tpl.storage, self.tpl.db_path).batches

    def tick(self) -> int:
        from wlcore.state import read_master_state

        return read_master_state(self.tpl.storage, self.tpl.db_path).tick

    def grow(self, txns: int) -> int:
        """Append the rows of ``txns`` more transactions, publish their batches; the log's length."""
        from bench import scale_long_synth as synth

        t0 = time.perf_counter()
        first_id, version, at = synth.append_rows(self.spark, self.tpl, txns * self.rows_per_txn)
        appended = time.perf_counter() - t0
        with mock.patch("os.fsync", lambda fd: None):
            synth.synthesize(self.tpl, txns, self.rows_per_txn, first_id, version, at, settle=0.2)
        took = time.perf_counter() - t0 - appended
        batches = self.batches()
        self.notes.append(
            f"{txns:,} transactions appended to the master (Delta version {version}) in {appended:.1f} s, "
            f"their batches written in {took:.1f} s ({1000 * took / txns:.1f} ms a batch): {batches:,} batches"
        )
        print(f"long: {batches:,} level-0 batches", flush=True)
        return batches

    def expected(self) -> dict:
        from bench import scale_long_synth as synth
        from bench.methods import checksum

        df = self.spark.read.format("delta").load(self.tpl.storage.uri(self.tpl.table_path))
        return {synth.TABLE: checksum(df, synth.COLS)}

    def check(self, replica: str, batches: int) -> None:
        from bench import scale_long_synth as synth
        from bench.methods import equal

        got = equal(
            self.spark, self.expected(), os.path.join(self.farm, replica), [synth.TABLE], {synth.TABLE: synth.COLS}
        )
        self.equal.append(f"{replica} ({batches:,} batches): {got}")

    # ------------------------------------------------------------------ measurements
    def measure(self, batches: int) -> None:
        from bench import scale_long_time as tm
        from bench.scale_long_synth import DB

        out, cmds, reps, farm = self.out, self.cmds, self.reps, self.farm
        tick = self.tick()
        out.sub(cmds, "wlc status", batches, reps, 1.0, "wlc", "status", farm, DB)
        out.inproc("wlc status", batches, reps, 1.0, lambda: tm.master_status(farm, DB))
        listed = out.sub(cmds, "wlr log", batches, 1, None, "wlr", "log", farm, DB)
        assert sum(1 for ln in listed.splitlines() if ln[:1].isdigit()) == tick + 1, "wlr log missed transactions"
        out.inproc("wlr log", batches, 1, None, lambda: tm.log(farm, DB))
        self.since(batches, tick, "")
        # a new replica 2 x reps + 1 transactions behind, then one batch at a time
        replica, target = f"r{batches}", tick - 2 * reps - 1
        took, cpu, planning = tm.replicate(farm, DB, replica, target)
        out.add(PLANNING, batches, "in-process", [planning], None, 5.0)
        out.add(f"new replica: whole replay of {target + 1:,} txns", batches, "in-process", [took], [cpu])
        out.sub(cmds, "wlr status", batches, reps, 1.0, "wlr", "status", farm, replica)
        status = out.inproc("wlr status", batches, reps, 1.0, lambda: tm.replica_status(farm, replica))
        assert (status["tick"], status["lag_transactions"]) == (target, tick - target), status
        target += 1
        took, cpu, _ = cmds.run("wlr", "replicate", farm, DB, replica, "--until", str(target))
        out.add(CATCHUP, batches, "subprocess", [took], [cpu])
        walls, cpus, plans = [], [], []
        for _ in range(2 * reps):
            target += 1
            took, cpu, planning = tm.replicate(farm, DB, replica, target)
            walls.append(took)
            cpus.append(cpu)
            plans.append(planning)
        del walls[0], cpus[0], plans[0]  # a warm-up: the first MERGE after the other measurements
        out.add(CATCHUP, batches, "in-process", walls, cpus)
        out.add("one-batch catch-up: planning before its apply", batches, "in-process", plans, None)
        assert target == tick
        self.check(replica, batches)

    def since(self, batches: int, tick: int, after: str) -> None:
        """``wlr log --since <tick - 4>``, as a subprocess and in-process."""
        from bench import scale_long_time as tm
        from bench.scale_long_synth import DB

        name, since = SINCE + after, str(tick - 4)
        self.out.sub(self.cmds, name, batches, self.reps, 1.0, "wlr", "log", self.farm, DB, "--since", since)
        self.out.inproc(name, batches, self.reps, 1.0, lambda: tm.log(self.farm, DB, since=tick - 4))

    def lifecycle(self, batches: int) -> None:
        """``wlc compact``, ``wlc prune``, then the log and a new replica through the levels."""
        from bench.scale_long_synth import DB

        out, cmds, farm = self.out, self.cmds, self.farm
        level1 = self.opts.get("long_level1") or max(10, self.n // 20)
        level2 = self.opts.get("long_level2") or 5
        argv = ("compact", farm, DB, "--level1", f"{level1} batches", "--level2", f"{level2} batches")
        out.sub(cmds, "wlc compact", batches, 1, None, "wlc", *argv)
        compacted = self.tpl.store.compacted()
        self.notes.append(
            f"wlc compact ({level1} level-0 batches per level-1 batch, {level2} level-1 per level-2): "
            f"{sum(1 for c in compacted if c.level == 1)} level-1 and {sum(1 for c in compacted if c.level == 2)} "
            "level-2 batches made"
        )
        out.sub(cmds, PRUNE, batches, 1, None, "wlc", "prune", farm, DB)
        left = len(self.tpl.store.batches())
        self.notes.append(f"wlc prune: {batches - left:,} level-0 batches deleted, {left:,} left")
        tick = self.tick()
        out.sub(cmds, "wlr log, after prune", batches, 1, None, "wlr", "log", farm, DB)
        self.since(batches, tick, ", after prune")
        argv = ("replicate", farm, DB, "r_levels", "--until", str(tick))
        out.sub(cmds, "new replica through the levels, whole replay", batches, 1, None, "wlr", *argv)
        self.check("r_levels", batches)

    # ------------------------------------------------------------------ the report
    def report(self, lengths: list[int]) -> Report:
        f = self.out.figures
        a, b = lengths

        def judged(name: str, how: str, limit: float) -> str:
            wall, cpu = f[(name, b, how)]
            cpu_text = f", CPU {cpu:.2f} s" if cpu is not None else ""
            return f"{wall:.2f} s{cpu_text}: {'met' if wall < limit else 'MISSED'}"

        (wa, ca), (wb, cb) = f[(CATCHUP, a, "in-process")], f[(CATCHUP, b, "in-process")]
        sa, sb = f[(CATCHUP, a, "subprocess")][0], f[(CATCHUP, b, "subprocess")][0]
        growth = cb / ca - 1
        equal = all(e.endswith(": yes") for e in self.equal)
        summary = (
            f"at {b:,} batches (subprocess wall time, goal < 1 s): wlc status {judged('wlc status', 'subprocess', 1)}; "
            f"wlr status {judged('wlr status', 'subprocess', 1)}; wlr log --since {judged(SINCE, 'subprocess', 1)} "
            f"(in-process {f[(SINCE, b, 'in-process')][0]:.2f} s). Planning of a new replica (goal < 5 s): "
            f"{f[(PLANNING, a, 'in-process')][0]:.2f} s at {a:,}, {judged(PLANNING, 'in-process', 5)}. "
            f"One-batch catch-up in-process (goal: CPU at most 20 % more at {a:,} and {b:,} batches): CPU {ca:.2f} -> "
            f"{cb:.2f} s ({growth:+.0%}: {'met' if growth <= 0.2 else 'MISSED'}), wall {wa:.2f} -> {wb:.2f} s "
            f"(subprocess {sa:.1f} -> {sb:.1f} s). wlc compact {f[('wlc compact', b, 'subprocess')][0]:.1f} s, "
            f"wlc prune {f[(PRUNE, b, 'subprocess')][0]:.1f} s. End states equal: {'yes' if equal else 'NO'}"
        )
        notes = self.notes + ["end states equal to the master: " + "; ".join(self.equal)]
        notes += [
            "subprocess: wall time of python -m wlc|wlr, Python's start and imports included (replicate and compact",
            "  also start Spark); CPU: of the process and its JVM. On a busy 2-core machine wall time varies with",
            "  others' load, so the catch-up goal is judged on CPU seconds (wall shown beside it).",
        ]
        return Report(
            "long",
            f"a master with {b:,} level-0 batches (beat 0), measured at {a:,} and {b:,}",
            HEADER,
            self.out.rows,
            summary,
            equal,
            notes,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (500 batches)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dbfarm")
    add_arguments(ap)
    report = run(ap.parse_args(argv))
    print(report.render())
    return 0 if report.equal else 1


if __name__ == "__main__":
    sys.exit(main())
