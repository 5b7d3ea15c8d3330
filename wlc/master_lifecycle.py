"""The life cycle of a capturing master: its calls (snapshot, compact, prune) and its background runs.

:class:`wlc.lifecycle.Lifecycle` does the work on the master's folders (any process may run
it, ``wlc snapshot``, ``wlc compact`` and ``wlc prune`` do); :class:`MasterLifecycle` is
what a :class:`wlc.Master` adds: the newest snapshot named in its ``wlc.config``, what was
compacted and pruned written in its ``wlc.log``, and :class:`AutoLifecycle`, the background
runs of ``master.snapshot_interval`` and ``master.compact.auto``.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any, Callable

from wlcore.levels import Span, Start
from wlcore.retention import keep_of
from wlcore.settings import Every, every, settings
from wlcore.utc import utcnow

from .lifecycle import Lifecycle, PruneReport
from .master_record import MasterRecord

log = logging.getLogger("wlc.lifecycle")


class MasterLifecycle:
    """The life-cycle calls of one :class:`wlc.Master` (:meth:`wlc.Master.snapshot`, ``compact``, ``prune``).

    Args:
        record: the master's ``wlc.config`` and ``wlc.log``.
        spark: returns the Spark session (called when a copy needs it: Spark starts late).
        lock: the master's lock, held while ``wlc.config`` changes.
    """

    def __init__(self, record: MasterRecord, spark: Callable[[], Any], lock: threading.RLock):
        self.record = record
        self.spark = spark
        self.lock = lock
        self.lifecycle = Lifecycle(record.storage, record.path, record.dbname)

    def snapshot(self) -> Start:
        """A snapshot at the last published transaction, named in ``wlc.config`` (see
        :meth:`wlc.Master.snapshot`, which flushes first).

        Raises:
            MasterStateError: not a master; a table is no longer readable at its version.
        """
        start = self.lifecycle.snapshot(self.spark())
        self.note_snapshot(start)
        return start

    def note_snapshot(self, start: Start) -> None:
        """Name the newest snapshot in ``wlc.config`` (``snapshot``) and in ``wlc.log``.

        Args:
            start (Start): the snapshot taken; nothing is written when ``wlc.config`` names it already.
        """
        with self.lock:
            if self.record.config.snapshot != start.path:
                self.record.adopt_snapshot(start.path, start.txn)
                self.record.save()

    def snapshots(self) -> list[Start]:
        """Every snapshot of the master, oldest first (``txn``, ``time``, ``batch``, ``path``)."""
        return self.lifecycle.snapshots(self.record.config)

    def compact(
        self, level1: Every | str | float | None = None, level2: Every | str | float | None = None
    ) -> list[Span]:
        """The level-1 and level-2 batches that are due (see :meth:`wlc.Master.compact`), each noted in ``wlc.log``.

        Args:
            level1 (Every | str | float | None): the level-1 interval instead of
                ``master.compact.level1``: seconds, a duration (``"1h"``) or ``"<n> batches"``;
                None: config's.
            level2 (Every | str | float | None): the level-2 interval, of the same kinds; None: config's.

        Returns:
            list[Span]: the batches made, in order.

        Raises:
            ConfigError: a malformed interval.
            BatchError: an input batch is damaged.
        """
        cfg = settings().master.compact.by_level()
        chosen = {
            1: every(level1, "level1", ("batches",)) if level1 is not None else cfg[1],
            2: every(level2, "level2", ("batches",)) if level2 is not None else cfg[2],
        }
        made = self.lifecycle.compact(self.spark(), chosen)
        self.note_compacted(made)
        return made

    def note_compacted(self, made: list[Span]) -> None:
        """A ``wlc.log`` line for each compacted batch made.

        Args:
            made (list[Span]): the batches :meth:`compact` made.
        """
        for span in made:
            self.record.note(f"compacted {span.name}: transactions {span.first_txn}..{span.last_txn}")

    def prune(self, dry_run: bool = False, now: datetime | None = None, keep: dict | None = None) -> PruneReport:
        """Delete what retention no longer promises (see :meth:`wlc.Master.prune`), noted in ``wlc.log``.

        Args:
            dry_run (bool): only say what would be deleted.
            now (datetime | None): the instant retention counts back from (UTC); None: now.
            keep (dict | None): ``{"level0"|"level1"|"level2"|"snapshots": duration}`` (as in
                config; left out or ``"off"``: forever) instead of ``master.retention``.

        Returns:
            PruneReport: what was (or would be) deleted, and what stays reachable.

        Raises:
            ConfigError: a malformed retention.
        """
        keep = keep_of(keep)  # checked before anything is deleted
        report = self.lifecycle.prune(dry_run=dry_run, now=now, keep=keep)
        if report.deleted and not dry_run:
            self.record.note(f"pruned {len(report.deleted)} folders")
        return report


class AutoLifecycle:
    """The background runs of a capturing master, checked every ``period`` seconds: snapshots
    every ``master.snapshot_interval``, compaction when ``master.compact.auto`` is on, and
    pruning after each run that compacted something, when a retention is set.
    Failures are logged and retried at the next check; capture goes on meanwhile.

    Args:
        master: the master's life-cycle calls.
        period: seconds between two checks.
    """

    def __init__(self, master: MasterLifecycle, period: float):
        self.master, self.period = master, period
        self.cfg = settings().master
        self.cycle = master.lifecycle
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    @property
    def wanted(self) -> bool:
        """True when the settings ask for a background run (a snapshot interval, or automatic compaction)."""
        return self.cfg.snapshot_interval is not None or self.cfg.compact.auto

    def start(self) -> None:
        """Start the background thread (a daemon)."""
        self._thread = threading.Thread(
            target=self._run, name=f"wlc-lifecycle-{self.master.record.dbname}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread; returns once its current run is over."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.run_once()
                self.error = None
            except Exception as exc:  # retried at the next check
                self.error = exc
                log.exception("life cycle of %s failed; retrying", self.master.record.dbname)

    def run_once(self) -> None:
        """One check: a snapshot when due, the compaction that is due, then retention when it compacted.

        Raises:
            WlcError: whatever the run met (the background logs it and tries again later).
        """
        m = self.master
        now = utcnow()
        tick = m.record.config.tick
        if self.cycle.snapshot_due(self.cfg.snapshot_interval, tick, now):
            start = self.cycle.snapshot(m.spark())
            m.note_snapshot(start)
        if self.cfg.compact.auto:
            made = self.cycle.compact(m.spark(), self.cfg.compact.by_level())
            m.note_compacted(made)
            # retention is applied after a compaction run made something (what it deletes is
            # mostly what compaction covered); O(batches) a run
            if made and any(v is not None for v in self.cfg.retention.by_name().values()):
                report = self.cycle.prune()
                if report.deleted:
                    m.record.note(
                        f"pruned {len(report.deleted)} folders: {', '.join(report.deleted[:5])}"
                        + (" ..." if len(report.deleted) > 5 else "")
                    )
