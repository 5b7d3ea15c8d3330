"""Timing for ``bench/scale_long.py``: the command lines as subprocesses (wall time, which includes
Python's start and the imports; ``wlr replicate`` also Spark's), the same calls in-process, and
the instant a replay round begins to apply (the end of planning), seen from outside the product
by wrapping :meth:`wlr.replay.Round.run`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.scale_common import cpu_seconds, descendants, median

REPO_ROOT = Path(__file__).resolve().parent.parent


def _cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` alone (0 once it is gone)."""
    return cpu_seconds(pid, tree=False)


@dataclass
class Commands:
    """Runs ``python -m wlc|wlr --config <cfg> ...`` with the worktree's code (PYTHONPATH)."""

    config: str
    poll: float = 0.2

    def run(self, module: str, *argv: str) -> tuple[float, float, str]:
        """``(wall seconds, CPU seconds, stdout)`` of one command; a failure raises with its stderr.

        CPU: the Python process's own (its rusage when it is waited for) and its descendants'
        (the JVM), sampled every ``poll`` seconds while it runs (the last fraction is missed).
        """
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        env.pop("WLC_CONFIG", None)  # --config names this workload's settings
        cmd = [sys.executable, "-m", module, "--config", self.config, *argv]
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, cwd=str(REPO_ROOT), stdout=out, stderr=err, text=True)
            seen: dict[int, float] = {}
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                for p in descendants(proc.pid)[1:]:
                    seen[p] = max(seen.get(p, 0.0), _cpu(p))
                time.sleep(self.poll)
            took = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[2:])} exited {proc.returncode}:\n{stderr[-3000:]}")
        return took, usage.ru_utime + usage.ru_stime + sum(seen.values()), stdout


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(wall seconds, CPU seconds, result)`` of ``fn()``; CPU of this process and its JVM."""
    c0, t0 = cpu_seconds(os.getpid()), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, cpu_seconds(os.getpid()) - c0, out


class FirstApply:
    """While active, notes when the first replay round of a call starts applying
    (:meth:`wlr.replay.Round.run`): everything before it (the replica's set-up, reading and checking
    the manifests, the plan, verifying the change files) is planning."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __enter__(self) -> "FirstApply":
        from wlr.replay import Round

        self._orig = orig = Round.run
        watch = self

        def run(rnd, *args, **kwargs):
            if watch.at is None:
                watch.at = time.perf_counter()
            return orig(rnd, *args, **kwargs)

        Round.run = run
        return self

    def __exit__(self, *exc) -> None:
        from wlr.replay import Round

        Round.run = self._orig


def replicate(farm: str, db: str, replica: str, until: int) -> tuple[float, float, float]:
    """``wlr.replicate(db, until=until, replica=replica)`` in this process:
    ``(seconds, CPU seconds, seconds before the first apply)``."""
    import wlr

    with FirstApply() as first:
        c0, t0 = cpu_seconds(os.getpid()), time.perf_counter()
        wlr.replicate(db, until=until, replica=replica, dbfarm=farm, follow=False)
        took, cpu = time.perf_counter() - t0, cpu_seconds(os.getpid()) - c0
    return took, cpu, (first.at - t0) if first.at is not None else took


def replica_status(farm: str, replica: str) -> dict:
    """What ``wlr status`` computes (the same call as its command line)."""
    from wlr.cli import open_replica

    return open_replica(argparse.Namespace(dbfarm=farm, replica=replica)).status()


def master_status(farm: str, db: str) -> dict:
    """What ``wlc status`` computes (:func:`wlcore.health.status`)."""
    from wlcore.health import status

    return status(db, farm)


def log(farm: str, db: str, since: int | None = None) -> list[dict]:
    """What ``wlr log`` lists (:func:`wlr.transactions`; the command also formats it as a table)."""
    import wlr

    return wlr.transactions(db, farm, since=since)


@dataclass
class Rows:
    """The report's rows: ``(measurement, batches, run as, seconds, CPU seconds, goal, met)``, and
    the figures the summary judges by (``figures[(name, batches, run as)]`` = (seconds, CPU seconds))."""

    rows: list[tuple] = field(default_factory=list)
    figures: dict[tuple[str, int, str], tuple[float, float | None]] = field(default_factory=dict)

    def add(
        self,
        name: str,
        batches: int,
        how: str,
        walls: list[float],
        cpus: list[float] | None,
        limit: float | None = None,
    ) -> float:
        """A row of the medians of ``walls`` and ``cpus`` (seconds); ``limit``: the goal in seconds (wall)."""
        secs = median(walls)
        cpu = median(cpus) if cpus else None
        n = f" (median of {len(walls)})" if len(walls) > 1 else ""
        goal = f"< {limit:g} s" if limit is not None else ""
        met = ("yes" if secs < limit else "MISSED") if limit is not None else ""
        self.rows.append((name, batches, how + n, secs, "-" if cpu is None else cpu, goal, met))
        self.figures[(name, batches, how)] = (secs, cpu)
        print(f"  {name} at {batches:,} batches, {how}{n}: {secs:.2f} s, CPU {cpu or 0:.2f} s", flush=True)
        return secs

    def sub(self, cmds: Commands, name: str, batches: int, reps: int, limit: float | None, module: str, *argv: str):
        """Run a command ``reps`` times as a subprocess; a row of its medians. Returns the last output."""
        walls, cpus, out = [], [], ""
        for _ in range(reps):
            took, cpu, out = cmds.run(module, *argv)
            walls.append(took)
            cpus.append(cpu)
        self.add(name, batches, "subprocess", walls, cpus, limit)
        return out

    def inproc(self, name: str, batches: int, reps: int, limit: float | None, fn: Callable[[], Any]) -> Any:
        """Call ``fn`` ``reps`` times in this process; a row of its medians. Returns the last result."""
        walls, cpus, out = [], [], None
        for _ in range(reps):
            took, cpu, out = timed(fn)
            walls.append(took)
            cpus.append(cpu)
        self.add(name, batches, "in-process", walls, cpus, limit)
        return out
