"""A replay round: the planned transactions applied as segments, tables in parallel.

The round takes a plan's transactions (ascending, ending at the target), groups them into
per-table segments (:func:`wlr.planner.segments`) and runs each table's segments in order on
a bounded thread pool (``replica.parallelism``), each worker with its own Spark session
and each table's jobs in its own FAIR scheduler pool ``wlr:<table>``, so a small table's
jobs share the cores with a large one's instead of queueing behind them (MonetDB's
roadmap: parallel updates on the change set files). Tables are independent: Delta has no cross-table transactions.

Progress is always read back from each replica table's own Delta log (the final replay
tag), so a round repeated after a crash applies nothing twice. A segment that fails is
replayed again transaction by transaction, so the failure names the exact transaction
(and the transactions before it on that table are applied), as serial replay would.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from wlcore.batch import TxnRecord
from wlcore.errors import ConfigError, first_line
from wlcore.faults import crash_point
from wlcore.replica_state import ReplicaState

from .errors import ApplyError
from .planner import Segment, TxnRef, segments, span_text

if TYPE_CHECKING:  # wlr.apply imports pyspark: `wlr status` and `wlr log` start without it
    from .apply import Applier, Landed

log = logging.getLogger("wlr.replay")

POOL = "wlr"  # Spark FAIR scheduler pools of replay jobs: "wlr:<table>"


@dataclass
class Item:
    """A transaction to apply: its batch number, batch folder and record."""

    batch: int
    path: str
    rec: TxnRecord


@dataclass
class Failure:
    """Where a round of replay stopped: the ``batch`` number (None when not known), the
    transaction ``txn``, its ``table`` and the ``cause`` (the error's message), as
    :mod:`wlr.failure` stores it in ``wlr.config``."""

    batch: int | None
    txn: int
    table: str
    cause: str


class Round:
    """One round of replay.

    Args:
        applier: applies to the replica's tables (forked per worker thread).
        state: the replica's ``wlr.config`` values; each table's Delta version
            (``version.<table>``) is updated (under ``lock``) after every applied unit.
        items: ``{txn: Item}`` of every transaction in ``todo``.
        bad: ``{txn: cause}`` for transactions that cannot be applied as published (change
            files that failed verification, change rows capture could not copy).
        on_progress: called (under ``lock``) with ``{table: last txn applied}`` after each unit.
        note: writes a line to ``wlr.log``.
        stop: when set, each table stops after the segment it is applying (the round ends
            early; what landed is recorded, the rest is applied by a later round).
    """

    def __init__(
        self,
        applier: Applier,
        state: ReplicaState,
        lock: threading.RLock,
        items: dict[int, Item],
        bad: dict[int, str],
        on_progress: Callable[[dict[str, int]], None],
        note: Callable[[str], None],
        stop: threading.Event | None = None,
    ):
        self.applier, self.state, self.lock = applier, state, lock
        self.stop = stop  # set: every table stops after its current segment (wlr.stop(), SIGTERM)
        self.items, self.bad = items, bad
        self.on_progress, self.note = on_progress, note
        self.done: dict[str, int] = {}
        self.failures: list[Failure] = []
        self._halt = threading.Event()
        self.bar = None
        # told of every segment landed: engine, transactions, change rows read and after collapse, seconds
        self.observe: Callable[[str, int, int, int, float], None] = lambda *segment: None

    def run(
        self, todo: list[TxnRef], collapse: bool = True, parallelism: int = 4, progress: bool = True
    ) -> Failure | None:
        """Apply ``todo``: its segments (:func:`wlr.planner.segments`), each table's in order, tables in parallel.

        Args:
            todo (list[TxnRef]): the transactions to apply, ascending.
            collapse (bool): collapse each run of change-feed transactions of a table into one
                commit (False: one commit per transaction).
            parallelism (int): tables applied at once (at least 1; threads with Spark sessions of their own).
            progress (bool): a bar when the round takes over 2 s, on a terminal or in a notebook.

        Returns:
            Failure | None: the failure at the lowest transaction; None when every segment applied.
        """
        plan = segments(todo, collapse)
        if not plan:
            return None
        count = sum(len(s) for s in plan.values())
        if progress:
            from tqdm.auto import tqdm

            # shown only when the round takes over 2 s, and only on a terminal or in a notebook
            self.bar = tqdm(
                total=len(todo),
                unit="txn",
                desc="replay",
                delay=2.0,
                disable=None,
                leave=False,
                postfix={"segments": f"0/{count}"},
            )
        self._segments_total, self._segments_done = count, 0
        try:
            workers = max(1, min(int(parallelism), len(plan)))
            if workers == 1:
                for segs in plan.values():
                    self._table(self.applier, segs)
            else:
                with ThreadPoolExecutor(workers, thread_name_prefix="wlr-replay") as pool:
                    for fut in [pool.submit(self._worker, segs) for segs in plan.values()]:
                        fut.result()
        finally:
            if self.bar is not None:
                self.bar.close()
        return min(self.failures, key=lambda f: f.txn) if self.failures else None

    def _worker(self, segs: list[Segment]) -> None:
        applier = self.applier.fork()
        with applier.job_property("spark.scheduler.pool", f"{POOL}:{segs[0].table}"):
            self._table(applier, segs)

    def _table(self, applier: Applier, segs: list[Segment]) -> None:
        for seg in segs:
            if self._halt.is_set() or (self.stop is not None and self.stop.is_set()):
                return
            try:
                self._segment(applier, seg)
            except _Stop:
                self._halt.set()
                return
            with self.lock:
                self._segments_done += 1
                if self.bar is not None:
                    self.bar.set_postfix(segments=f"{self._segments_done}/{self._segments_total}")

    # ------------------------------------------------------------------ one segment
    def _segment(self, applier: Applier, seg: Segment) -> None:
        # Spark's UI and event log name the replay jobs by table and transactions
        with applier.job_property(
            "spark.job.description",
            f"wlr replay {seg.table} transactions {span_text(seg.first, seg.last)}",
        ):
            self._segment_jobs(applier, seg)

    def _segment_jobs(self, applier: Applier, seg: Segment) -> None:
        items = [self.items[r.txn] for r in seg.txns]
        started = time.monotonic()
        if seg.barrier or len(items) == 1 or any(it.rec.txn in self.bad for it in items):
            for it in items:
                self._one(applier, it)
            return
        first = items[0]
        try:
            progress = self._progress(applier, first.rec)
        except Exception as exc:
            self._failed(first, exc)
        todo = [it for it in items if it.rec.txn > progress]
        landed = items[: len(items) - len(todo)]
        if landed:  # landed before (a crash, or an earlier round that stopped): the table's own log says so
            self._applied(applier, landed, None, 0.0)
        if not todo:
            return
        try:
            stats = applier.apply_segment([(it.path, it.rec) for it in todo])
            crash_point("replay.applied")
        except Exception as exc:  # replayed one by one: the failure names its exact transaction
            log.info("segment %s failed (%s); replaying it transaction by transaction", seg, first_line(exc))
            for it in todo:
                self._one(applier, it)
            return
        self._applied(applier, todo, stats, time.monotonic() - started)

    def _one(self, applier: Applier, it: Item) -> None:
        rec = it.rec
        started = time.monotonic()
        if rec.txn in self.bad:
            self._failed(it, ApplyError(self.bad[rec.txn]))
        stats: Landed | None = None
        try:
            if self._progress(applier, rec) < rec.txn:
                landed = applier.apply(it.path, rec)
                crash_point("replay.applied")
                stats = landed or {"rows_in": sum(rec.counts.values()), "rows_out": -1}
        except Exception as exc:
            self._failed(it, exc)
        self._applied(applier, [it], stats, time.monotonic() - started)

    def _progress(self, applier: Applier, rec: TxnRecord) -> int:
        """The last transaction applied to ``rec.table`` (from its Delta log; -1: none).

        Raises ApplyError when the table was made or written outside replay.
        """
        if applier.tables.current_version(rec.table) < 0:  # a CREATE killed in its first commit leaves an empty log
            return -1
        with self.lock:
            known = self.state.versions.get(rec.table)
        if known is None and not applier.tables.created_by_replay(rec.table):
            if rec.ddl == "create":
                raise ApplyError(f"table {rec.table} already exists on the replica and was not made by replay")
            raise ApplyError(f"table {rec.table} on the replica is not known to replay (made outside replay?)")
        foreign = applier.tables.foreign_writes(rec.table, known if known is not None else -1)
        if foreign:
            raise ApplyError(
                f"table {rec.table} was written outside replay: {', '.join(foreign)}; "
                "replica tables are read-only (undo those writes, or restore the table)"
            )
        return applier.tables.last_final_txn(rec.table)

    def _applied(self, applier: Applier, items: list[Item], stats: Landed | None, seconds: float) -> None:
        """Record that ``items`` are on their table; ``stats`` None: they were already (no log line)."""
        last = items[-1].rec
        version = applier.tables.current_version(last.table)
        with self.lock:
            if last.ddl == "drop":
                self.state.drop_version(last.table)
            else:
                self.state.set_version(last.table, version)
            self.done[last.table] = last.txn
            self.on_progress(self.done)
            if self.bar is not None:
                self.bar.update(len(items))
        if stats is None:
            return
        self.observe(stats.get("engine", "spark"), len(items), stats["rows_in"], stats["rows_out"], seconds)
        span = span_text(items[0].rec.start, last.txn)
        what = last.operation if len(items) == 1 else f"{len(items)} transactions"
        rows = f", {stats['rows_in']} change rows" if stats["rows_in"] else ""
        if stats["rows_out"] >= 0 and stats["rows_in"]:
            rows += f", {stats['rows_out']} after collapse"
        if stats.get("how") == "rewrite":
            rows += ", the whole table rewritten"
        if stats.get("engine") == "delta-rs":
            rows += ", through delta-rs"
        self.note(f"applied {last.table} transaction {span} ({what}{rows}) in {seconds:.2f} s")

    def _failed(self, it: Item, exc: Exception) -> None:
        if isinstance(exc, (ApplyError, ConfigError)):  # ConfigError: an unsafe table name in the batch
            cause = str(exc)
        else:  # Spark/Delta errors: constraint violations, schema conflicts...
            cause = f"{type(exc).__name__}: {first_line(exc)}"
        with self.lock:
            self.failures.append(Failure(it.batch, it.rec.txn, it.rec.table, cause))
        raise _Stop()


class _Stop(Exception):
    """This table's worker stops: a transaction failed."""
