"""The processes of ``bench/scale_follow.py`` (writer, capture, follower): each started in a session
of its own with the worktree's code, its output in a log file, stopped by SIGTERM (killed with its
JVM when it does not end); and the CPU of their threads by name, sampled from ``/proc``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

from bench.scale_common import TICKS, cpu_seconds, descendants

REPO_ROOT = Path(__file__).resolve().parent.parent


def write_result(control: Path, name: str, result: dict) -> None:
    """A writer's ``result`` as ``<control>/<name>``, JSON, in one rename (read once the process ended)."""
    tmp = control / f"{name}.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, control / name)


class Proc:
    """A process of the workload: started in a session of its own, its output in a log file."""

    def __init__(self, name: str, cmd: list[str], log: Path) -> None:
        self.name, self.log = name, log
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))  # the worktree's code, not the venv's editable install
        with open(log, "wb") as out:
            self.popen = subprocess.Popen(
                cmd, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def check(self) -> None:
        if not self.alive():
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} ended (exit {self.popen.returncode}); its output ends with:\n{tail}")

    def cpu(self) -> float:
        return cpu_seconds(self.popen.pid)

    def stop(self, timeout: float = 120.0) -> None:
        """SIGTERM to the Python process (it stops cleanly and takes its JVM along); the whole
        session is killed when it does not end within ``timeout``."""
        if not self.alive():
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)  # its own session: this process and its JVM
        except ProcessLookupError:
            pass
        self.popen.wait()


def _threads(pids: list[int]):
    """``((pid, tid), name, CPU seconds)`` of every thread of the processes ``pids`` (``comm``,
    trailing numbers dropped: ``GC Thread#3`` -> ``GC Thread``)."""
    for p in pids:
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/stat") as fh:
                    head, _, rest = fh.read().rpartition(")")
            except OSError:
                continue
            fields = rest.split()
            name = re.sub(r"[#\-\s]*\d+$", "", head.partition("(")[2]) or "?"
            yield (p, int(t)), name, (int(fields[11]) + int(fields[12])) / TICKS


class ThreadSampler:
    """CPU seconds of the processes' threads by name (JIT compilers, GC, Spark's executor tasks, py4j
    connections, ...), sampled from ``/proc`` every 0.5 s between :meth:`start` and :meth:`stop`:
    a thread that ends keeps what it had used at its last sample."""

    def __init__(self, procs: list[Proc]) -> None:
        self.procs = procs
        self.last: dict[tuple[int, int], float] = {}
        self.groups: dict[str, dict[str, float]] = {p.name: {} for p in procs}
        self.started = False
        self.count = 0
        self.trees: dict[str, list[int]] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="thread-sampler", daemon=True)

    def sample(self) -> None:
        if self.count % 10 == 0:  # the process trees (a JVM is started once): scanned again every 5 s
            self.trees = {p.name: descendants(p.popen.pid) for p in self.procs}
        self.count += 1
        for p in self.procs:
            for key, name, used in _threads(self.trees[p.name]):
                before = self.last.get(key, 0.0 if self.started else None)  # born since the start: from 0
                self.last[key] = used
                if before is not None and used > before:
                    g = self.groups[p.name]
                    g[name] = g.get(name, 0.0) + used - before

    def _run(self) -> None:
        while not self.done.wait(0.5):
            self.sample()

    def start(self) -> None:
        self.sample()  # the baseline
        self.started = True
        self.thread.start()

    def stop(self) -> dict[str, dict[str, float]]:
        self.done.set()
        self.thread.join()
        self.sample()
        return self.groups
