"""What the workloads of ``bench/scale.py`` share: a report (a table and one summary line),
running a method in a process of its own (a fresh JVM, one Spark session: no method runs in a
JVM another method warmed up), and CPU time of a process and its children read from ``/proc``.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Report:
    """One workload's results.

    Attributes:
        workload: its name (``big``, ``many``, ``long``, ``follow``).
        title: what was measured, one line.
        header: the table's column names.
        rows: the table's rows (values printed as given; floats with 2 decimals).
        summary: the one summary line (goals met or missed, with the ratios).
        equal: every end state was checked equal to the master's (False: the table says where not).
        notes: lines printed under the table (where the time goes, sizes).
    """

    workload: str
    title: str
    header: tuple[str, ...]
    rows: list[tuple] = field(default_factory=list)
    summary: str = ""
    equal: bool = True
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        """The report as text: title, aligned table, notes, ``SUMMARY <workload>: ...``."""
        cells = [tuple(_cell(v) for v in row) for row in self.rows]
        widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(self.header)]
        lines = [f"== {self.workload}: {self.title}", "  ".join(h.ljust(w) for h, w in zip(self.header, widths))]
        lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
        lines += self.notes
        lines.append(f"SUMMARY {self.workload}: {self.summary}")
        return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def median(values: list[float]) -> float:
    """The median of ``values`` (seconds)."""
    return statistics.median(values)


def _call(queue, fn: Callable, args: tuple, kwargs: dict) -> None:
    try:
        queue.put(("ok", fn(*args, **kwargs)))
    except BaseException:  # noqa: BLE001 (reported to the parent, which raises)
        queue.put(("error", traceback.format_exc()))


def in_own_process(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a new interpreter (``spawn``): its own JVM and Spark session.

    ``fn`` must be a module-level function and its arguments and result picklable.

    Raises:
        RuntimeError: ``fn`` raised (the message holds its traceback) or the process died.
    """
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_call, args=(queue, fn, args, kwargs))
    proc.start()
    try:
        status, value = queue.get()
    except (EOFError, OSError) as exc:
        raise RuntimeError(f"{fn.__name__}: its process died ({exc})") from None
    finally:
        proc.join()
    if status == "error":
        raise RuntimeError(f"{fn.__name__} failed in its own process:\n{value}")
    return value


def warm_cache(*folders: str) -> int:
    """Read every file below ``folders`` once, so that the method timed next finds them in the
    page cache as the methods before it left them (none pays the disk for another); returns the
    bytes read."""
    total = 0
    for folder in folders:
        for root, _dirs, files in os.walk(folder):
            for name in files:
                try:
                    with open(os.path.join(root, name), "rb") as fh:
                        while chunk := fh.read(1 << 22):
                            total += len(chunk)
                except OSError:
                    pass
    return total


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (a Python process and the JVM it started), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pid: int, tree: bool = True) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), with its descendants when
    ``tree``; a child that ended and was waited for counts in its parent's figures."""
    total = 0.0
    for p in descendants(pid) if tree else [pid]:
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / TICKS  # utime, stime, and its waited-for children's
    return total
