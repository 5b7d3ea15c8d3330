"""The log's life cycle: rolling snapshots, compaction and retention of one master.

MonetDB's manual names the DBA's chore: "keep the log directory manageable ... taking a new
snapshot as a frame of reference". :class:`Lifecycle` does it for a master database:

* :meth:`Lifecycle.snapshot`: a snapshot at the end of the newest published batch
  (:func:`wlcore.snapshots.take_rolling`);
* :meth:`Lifecycle.compact`: the level-1 and level-2 batches that are due (:func:`compact_levels`);
* :meth:`Lifecycle.prune`: deletes what retention no longer promises (:func:`wlcore.retention.retain`),
  each batch or snapshot unpublished first (:meth:`Storage.unpublish`), so a reader sees it
  whole or not at all.

Each holds ``<db>/wlc.lifecycle.lock`` (:meth:`Storage.lock`), so the capturing process's background runs
(``master.snapshot_interval``, ``master.compact.auto``) and the ``wlc snapshot``, ``wlc
compact`` and ``wlc prune`` commands of other processes take turns. Manifests are read once
per process and cached (they never change).

Compaction (:func:`compact_levels`): runs of published batches merged into coarser batches (levels 1 and 2).

A level-1 batch merges a run of consecutive level-0 batches (for example those of one hour),
a level-2 batch a run of level-1 batches (one day): MusicBrainz's hourly, daily and weekly
packets, compacted as MusicBrainz wished they were, and Litestream's levels. For each table,
each run of its change-feed transactions between two barriers (DDL, full images, ALTERs that
add columns, transactions whose rows were lost) becomes one *piece*: the net change of the
run, in one file at the run's last master version (keyed: each key's state before and after,
nothing for a key whose state did not change, :func:`wlcore.collapse.compact_by_key`; unkeyed:
each row image's net count, :func:`wlcore.collapse.compact_by_image`). Barriers are
kept as they are, with their files. The manifest records the range of level-0 batches and
transactions, the watermark at its end, and checksums as every batch; the batch is built in
``<logs>/.compact-<db>-...`` and published by one rename beside the level-0 batches, which
stay until retention prunes them.

Cost: one Spark read, aggregation and write per piece of more than one transaction
(O(change rows of the run)); a one-transaction piece is copied as files.

Any process may run a :class:`Lifecycle` (``wlc snapshot``, ``wlc compact`` and ``wlc prune`` do);
:class:`MasterLifecycle` is what a :class:`wlc.Master` adds: the newest snapshot named in its
``wlc.config``, what was compacted and pruned written in its ``wlc.log``, and :class:`AutoLifecycle`,
the background runs of ``master.snapshot_interval`` and ``master.compact.auto``.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from datetime import datetime

from wlcore import batch as batchfmt, snapshots as snap
from wlcore.batch import CHANGE_TYPE, CHANGE_TYPES, VERSION_COLUMN, Manifest, SpanCache, TxnRecord
from wlcore.deltalog import TableMeta
from wlcore.errors import BatchError, MasterStateError
from wlcore.faults import crash_point
from wlcore.levels import Span, Start, runs_to_merge
from wlcore.logstore import LogStore
from wlcore.names import batch_folder
from wlcore.retention import PruneReport, keep_of, prune_folder, write_promise
from wlcore.session import LateSession
from wlcore.settings import Every, every, settings
from wlcore.state import MasterState
from wlcore.storage import Storage
from wlcore.utc import utcnow

from .master_record import MasterRecord

log = logging.getLogger("wlc.lifecycle")
compaction_log = logging.getLogger("wlc.compaction")

LOCK_FILE = "wlc.lifecycle.lock"


class Lifecycle:
    """The life cycle of the master at ``db_path`` (a database in master mode): its snapshots,
    compaction and retention, run by any process (``wlc snapshot``, ``wlc compact``, ``wlc prune``).

    Args:
        storage (Storage): the storage holding the dbfarm.
        db_path (str): the master's folder (path or URL).
        dbname (str): the master database's name (its batches' name prefix).
    """

    def __init__(self, storage: Storage, db_path: str, dbname: str):
        self.storage, self.path, self.dbname = storage, db_path, dbname
        self._spans = SpanCache(storage)
        self._store: LogStore | None = None
        self._local = threading.local()

    @classmethod
    def of(cls, dbfarm: str, name: str) -> "Lifecycle":
        """The life cycle of the master ``name`` of ``dbfarm``, named by its folder or (a promoted
        master) by its database's name.

        Args:
            dbfarm (str): the dbfarm folder (or URL).
            name (str): the master's folder name, or the database's name.

        Returns:
            Lifecycle: the master's, its batches named by its database.

        Raises:
            NotFoundError: no such dbfarm or master (the nearest masters are named).
            MasterStateError: the database is a replica or not a master.
        """
        from wlcore.databases import Dbfarm
        from wlcore.promotion import log_name

        folder = Dbfarm(dbfarm).require_master(name)
        storage = Storage.of(dbfarm)
        path = Storage.join(dbfarm, folder)
        return cls(storage, path, log_name(storage, path, folder))

    # ------------------------------------------------------------------ state
    def config(self) -> MasterState:
        """The master's ``wlc.config``, read now.

        Raises:
            MasterStateError: the database is not a master (the message names what it is).
        """
        from wlcore.state import read_master_state

        cfg = read_master_state(self.storage, self.path)
        if cfg is None:
            from wlcore.databases import Dbfarm

            Dbfarm(os.path.dirname(self.path)).require_master(os.path.basename(self.path))  # what it is instead
            raise MasterStateError(f"{self.path} is not a master (no wlc.config)")
        return cfg

    def logs(self, cfg: MasterState | None = None) -> str:
        """The master's log folder.

        Args:
            cfg (MasterState | None): the master's ``wlc.config``; None reads it now.

        Returns:
            str: ``logs`` of ``wlc.config`` when set, else ``<db>/wlc_logs``.

        Raises:
            MasterStateError: ``cfg`` is None and the database is not a master.
        """
        from wlcore.state import logs_of

        return logs_of(cfg or self.config(), self.path)

    def store(self, cfg: MasterState | None = None) -> LogStore:
        """The master's log store (:meth:`logs`), its batches named by the database; made once,
        and again only when ``wlc.config`` names another log folder.

        Args:
            cfg (MasterState | None): the master's ``wlc.config``; None reads it now.

        Raises:
            MasterStateError: ``cfg`` is None and the database is not a master.
        """
        logs = self.logs(cfg)
        if self._store is None or self._store.logs != logs:
            self._store = LogStore(self.storage, self.path, logs, self.dbname)
        return self._store

    def snapshots(self, cfg: MasterState | None = None) -> list[Start]:
        """Every snapshot, oldest first (the empty start of a master that began with no table
        while batch 0 is still there).

        Args:
            cfg (MasterState | None): the master's ``wlc.config``; None reads it now.

        Returns:
            list[Start]: ``txn``, ``time`` (UTC), ``batch`` and ``path`` of each.

        Raises:
            MasterStateError: ``cfg`` is None and the database is not a master.
        """
        cfg = cfg or self.config()
        return snap.list_snapshots(self.storage, self.path, cfg.snapshot, self.store(cfg))

    def spans(self, store: LogStore) -> list[Span]:
        """Every published batch of every level, as spans (manifests read once and cached).

        Args:
            store (LogStore): the master's log store (:meth:`store`).

        Returns:
            list[Span]: level-0 batches ascending, then compacted ones by first batch.

        Raises:
            BatchError: a manifest is missing or damaged.
        """
        return self._spans.spans([b.path for b in store.batches() + store.compacted()])

    @contextmanager
    def locked(self):
        """Hold ``<db>/wlc.lifecycle.lock`` (waits for another process's run to end).

        Raises:
            LockUnsupportedError: the storage can hold no lock.
        """
        if getattr(self._local, "held", False):
            yield
            return
        path = Storage.join(self.path, LOCK_FILE)
        with self.storage.lock(path, blocking=True, what=f"the life cycle of {self.path}"):
            self._local.held = True
            try:
                yield
            finally:
                self._local.held = False

    # ------------------------------------------------------------------ snapshot
    def snapshot(self, spark) -> Start:
        """A snapshot at the end of the newest published batch (the newest snapshot when
        nothing was published since it), taken under the life-cycle lock.

        Args:
            spark (SparkSession): the session that copies the tables.

        Returns:
            Start: the snapshot (``txn``, ``time`` UTC, ``batch``, ``path``).

        Raises:
            MasterStateError: not a master; nothing published and no snapshot yet; a table is no
                longer readable at its version.
            LockUnsupportedError: the storage can hold no lock.
        """
        cfg = self.config()
        with self.locked():
            published = self.store(cfg).batches()
            existing = self.snapshots(cfg)
            if not published or (existing and existing[-1].txn >= self._spans.span(published[-1].path).last_txn):
                if existing:
                    return existing[-1]
                raise MasterStateError(f"master {self.dbname!r} has no snapshot and nothing published yet")
            manifest = self.store(cfg).manifest(published[-1])
            start = snap.take_rolling(snap.copy_session(spark), self.storage, self.path, manifest, cfg.dbid)
        log.info("%s: snapshot at transaction %d in %s", self.dbname, start.txn, start.path)
        return start

    def snapshot_due(self, interval: Every | None, tick: int, now: datetime) -> bool:
        """True when ``master.snapshot_interval`` has passed since the newest snapshot and
        something was published after it.

        Args:
            interval (Every | None): ``master.snapshot_interval``: seconds, or ``<n> transactions``;
                None: never.
            tick (int): the master's last published transaction.
            now (datetime): the current instant (UTC), compared with the newest snapshot's creation.

        Returns:
            bool: a snapshot is due (always, past the first publish, when there is none yet).
        """
        if interval is None:
            return False
        starts = self.snapshots()
        newest = starts[-1] if starts else None
        if newest is not None and tick <= newest.txn:
            return False
        if interval.unit == "transactions":
            return tick - (newest.txn if newest else -1) >= interval.amount
        made = snap.read(self.storage, newest.path).created if newest else None
        return made is None or (now - made).total_seconds() >= interval.amount

    # ------------------------------------------------------------------ compaction
    def compact(self, spark, every_: dict[int, Every | None] | None = None, progress=None) -> list[Span]:
        """Make the level-1 and level-2 batches that are due (:func:`compact_levels`),
        under the life-cycle lock; staging folders of an interrupted run are removed first.

        Args:
            spark (SparkSession): the session that merges the change rows.
            every_ (dict[int, Every | None] | None): ``{level: interval}`` over ``master.compact``
                in config (None for a level: off); None: config's.
            progress (Callable[[str], None] | None): called with a line per batch made.

        Returns:
            list[Span]: the batches made, in order.

        Raises:
            MasterStateError: not a master.
            BatchError: an input batch is damaged (nothing of its run is published).
        """
        cfg, every, watermark = self._compaction_inputs(every_)
        store = self.store(cfg)
        with self.locked():
            store.clear_staging(level=1)  # an interrupted run's: we hold the lock
            return compact_levels(
                spark,
                store,
                cfg.dbid,
                every,
                watermark,
                lambda n: self._metas_before(cfg, n),
                progress,
                self._spans.span,
            )

    def next_due(self, every_: dict[int, Every | None] | None = None) -> list[str]:
        """A line per level saying when its next compacted batch is due (no Spark).

        Args:
            every_ (dict[int, Every | None] | None): ``{level: interval}`` over ``master.compact``
                in config; None: config's.

        Returns:
            list[str]: one line for each level switched on (:func:`wlcore.levels.next_due`).

        Raises:
            MasterStateError: not a master.
        """
        cfg, every, watermark = self._compaction_inputs(every_)
        return compaction_due(self.store(cfg), every, watermark, self._spans.span)

    def _compaction_inputs(
        self, every_: dict[int, Every | None] | None
    ) -> tuple[MasterState, dict[int, Every], datetime]:
        """``(wlc.config, the levels' intervals (config's, overridden by every_; off ones left out),
        the watermark windows are closed before: the master's, or now when it has none)``."""
        cfg = self.config()
        every = {**settings().master.compact.by_level(), **(every_ or {})}
        watermark = cfg.watermark_time or utcnow()
        return cfg, {k: v for k, v in every.items() if v is not None}, watermark

    def _metas_before(self, cfg: MasterState, batch: int) -> dict:
        """``{table: TableMeta}`` in force before level-0 batch ``batch``."""
        store = self.store(cfg)
        if batch == 0:
            starts = [s for s in self.snapshots(cfg) if s.txn < 0 and s.path]
            return snap.read(self.storage, starts[0].path).metas() if starts else {}
        paths = [b.path for b in store.batches(batch - 1) if b.number == batch - 1]
        paths += [b.path for b in store.compacted() if b.last == batch - 1]
        paths += [s.path for s in self.snapshots(cfg) if s.batch == batch - 1 and s.path]
        for path in paths:
            if not os.path.basename(path).startswith(self.dbname):
                return snap.read(self.storage, path).metas()
            return batchfmt.read_manifest(self.storage, path).cursors.metas()
        raise BatchError(
            f"cannot compact from batch {batch}: neither batch {batch - 1} nor a compacted batch or "
            "snapshot ending there is left to say which tables are keyed"
        )

    # ------------------------------------------------------------------ retention
    def prune(
        self, dry_run: bool = False, now: datetime | None = None, keep: dict[str, Every | None] | None = None
    ) -> PruneReport:
        """Delete what ``master.retention`` no longer promises (see :func:`wlcore.retention.retain`),
        under the life-cycle lock; each folder is renamed aside before it is deleted.

        Args:
            dry_run (bool): only say what would be deleted.
            now (datetime | None): the instant retention counts back from (UTC); None: now.
            keep (dict[str, Every | None] | None): retention per ``level0``, ``level1``, ``level2``
                and ``snapshots`` (None for one: forever); None: ``master.retention``.

        Returns:
            PruneReport: what was (or would be) deleted, and what stays reachable.

        Raises:
            MasterStateError: not a master.
            BatchError: a manifest is missing or damaged.
        """
        cfg = self.config()
        keep = keep if keep is not None else settings().master.retention.by_name()
        now = now or utcnow()
        store = self.store(cfg)
        with self.locked():
            report = prune_folder(store, self.snapshots(cfg), self.spans(store), now, keep, dry_run)
            if not dry_run:
                for item in report.decision.delete if report.decision else []:
                    self._spans.forget(item.path)
                write_promise(self.storage, self.path, report, now)
        return report


class MasterLifecycle:
    """The life-cycle calls of one :class:`wlc.Master` (:meth:`wlc.Master.snapshot`, ``compact``, ``prune``).

    Args:
        record: the master's ``wlc.config`` and ``wlc.log``.
        spark: the master's Spark session (made when a copy needs it: Spark starts late).
        lock: the master's lock, held while ``wlc.config`` changes.
    """

    def __init__(self, record: MasterRecord, spark: LateSession, lock: threading.RLock):
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


# ---------------------------------------------------------------------- compaction


def level_spans(store: LogStore, level: int, after_batch: int = -1, span_of=None) -> list[Span]:
    """The published batches of ``level`` whose first level-0 batch is after ``after_batch``, as spans.

    Args:
        store (LogStore): the log folder (``<master>/wlc_logs`` or a shipped copy).
        level (int): 0, 1 or 2.
        after_batch (int): the last level-0 batch number to skip (-1: none).
        span_of (Callable[[str], Span] | None): ``f(batch path)`` -> its span, a caller's cache of
            the manifests (which never change); None reads each manifest.

    Returns:
        list[Span]: ascending by first level-0 batch.

    Raises:
        BatchError: a manifest is missing or damaged.
    """
    if level == 0:
        found = store.batches(after_batch + 1)
    else:
        found = [b for b in store.compacted() if b.level == level and b.first > after_batch]
    if span_of is None:
        return [Span.of(store.manifest(b), b.path) for b in found]
    return [span_of(b.path) for b in found]


def last_batch_of(store: LogStore, level: int) -> int:
    """The last level-0 batch held by the newest batch of ``level``.

    Args:
        store (LogStore): the log folder.
        level (int): a compacted level (1 or 2).

    Returns:
        int: a level-0 batch number; -1 when the level has no batch.
    """
    return max((b.last for b in store.compacted() if b.level == level), default=-1)


def _level_inputs(store: LogStore, level: int, span_of=None) -> tuple[list[Span], list[Span]]:
    """``(lower, upper)`` for :func:`wlcore.levels.runs_to_merge` at ``level``: the batches of the level
    below after the newest batch of ``level``, and that newest batch (none: empty)."""
    upper_last = last_batch_of(store, level)
    lower = level_spans(store, level - 1, upper_last, span_of)
    return lower, ([Span(level, upper_last, upper_last, -1, -1, None)] if upper_last >= 0 else [])


def compact_levels(
    spark,
    store: LogStore,
    dbid: str,
    every: dict[int, Every],
    watermark: datetime,
    metas_before,
    progress=None,
    span_of=None,
) -> list[Span]:
    """Make every level-1 and level-2 batch that is due (:func:`wlcore.levels.runs_to_merge`).

    Args:
        spark (SparkSession): the session that reads, merges and writes the change rows.
        store (LogStore): the master's log folder (``<master>/wlc_logs``).
        dbid (str): the database id (written into the new manifests, as in every GTID).
        every (dict[int, Every]): ``{1: Every, 2: Every}`` (``master.compact.level1`` /
            ``level2``); a level missing or None is not made.
        watermark (datetime): the master's watermark (UTC): time windows ending after it stay open.
        metas_before (Callable[[int], dict[str, TableMeta]]): ``f(level-0 batch number)`` ->
            ``{table: TableMeta}`` in force before that batch (which tables are keyed, and by what).
        progress (Callable[[str], None] | None): called with a line per batch made (None: silent).
        span_of (Callable[[str], Span] | None): ``f(batch path)`` -> its span, passed to
            :func:`spans` (a caller's cache of manifests).

    Returns:
        list[Span]: the batches made, in order (level 1 first).

    Raises:
        BatchError: an input batch is damaged (nothing of that run is published).
    """
    from tqdm.auto import tqdm

    made = []
    for level in (1, 2):
        if every.get(level) is None:
            continue
        lower, upper = _level_inputs(store, level, span_of)
        runs = runs_to_merge(lower, upper, every[level], watermark)
        # a bar when it takes over 2 s, on a terminal or in a notebook only
        for run in tqdm(runs, desc=f"compact level {level}", unit="batch", delay=2.0, disable=None, leave=False):
            span = merge_run(spark, store, dbid, level, run, metas_before)
            made.append(span)
            if progress is not None:
                progress(
                    f"compacted {len(run)} level-{level - 1} batches into {span.name}: "
                    f"transactions {span.first_txn}..{span.last_txn}"
                )
    return made


def compaction_due(store: LogStore, every: dict[int, Every], watermark: datetime, span_of=None) -> list[str]:
    """A line per level saying when its next compacted batch is due (:func:`wlcore.levels.next_due`);
    reads manifests only (no Spark).

    Args:
        store (LogStore): the master's log folder.
        every (dict[int, Every]): ``{1: Every, 2: Every}`` as for :func:`compact_levels`.
        watermark (datetime): the master's watermark (UTC).
        span_of (Callable[[str], Span] | None): ``f(batch path)`` -> its span (None: read each manifest).

    Returns:
        list[str]: one line for each level with a setting, level 1 first.

    Raises:
        BatchError: a manifest is missing or damaged.
    """
    from wlcore.levels import next_due as due

    out = []
    for level in (1, 2):
        if every.get(level) is None:
            continue
        lower, upper = _level_inputs(store, level, span_of)
        out.append(due(lower, upper, every[level], watermark, level))
    return out


def merge_run(spark, store: LogStore, dbid: str, level: int, run: list[Span], metas_before) -> Span:
    """Merge the batches of ``run`` into one batch of ``level``, published beside them.

    Every input file is verified against its checksum first.

    Args:
        spark (SparkSession): the session that merges the change rows.
        store (LogStore): the master's log folder.
        dbid (str): the database id (written into the manifest).
        level (int): the level to make (1 or 2).
        run (list[Span]): consecutive batches of the level below, ascending.
        metas_before (Callable[[int], dict[str, TableMeta]]): ``f(level-0 batch number)`` ->
            ``{table: TableMeta}`` in force before that batch.

    Returns:
        Span: the new batch.

    Raises:
        BatchError: an input file fails its checksum or a manifest is damaged; nothing is
            published (the staging folder is removed).
    """
    storage, dbname = store.storage, store.database
    manifests = []
    for s in run:
        m = batchfmt.read_manifest(storage, s.path)
        problems = batchfmt.verify_files(storage, s.path, m)
        if problems:
            raise BatchError(
                f"cannot compact {s.name}: "
                + "; ".join(f"{f}: {p}" for f, p in sorted(problems.items())[:3])
                + "; restore it from a copy, then compact again"
            )
        manifests.append((s.path, m))
    staging = store.stage(run[0].first_batch, level)
    try:
        metas = dict(metas_before(run[0].first_batch))
        records: list[TxnRecord] = []
        open_runs: dict[str, list[tuple[str, TxnRecord]]] = {}

        def close(table: str) -> None:
            items = open_runs.pop(table, None)
            if items:
                records.append(_piece(spark, storage, staging, items, metas.get(table)))

        for path, m in manifests:
            for rec in m.txns:
                if rec.change == "cdf" and rec.ddl is None and not rec.lost:
                    open_runs.setdefault(rec.table, []).append((path, rec))
                    continue
                close(rec.table)
                records.append(_barrier(storage, staging, path, rec))
                if rec.ddl == "drop":
                    metas.pop(rec.table, None)
                elif rec.meta:
                    metas[rec.table] = TableMeta.from_json(rec.meta)
        for table in list(open_runs):
            close(table)
        records.sort(key=lambda r: r.txn)
        last = manifests[-1][1]
        crash_point("compact.staged")
        manifest = Manifest(
            database=dbname,
            dbid=dbid,
            batch=run[0].first_batch,
            watermark=last.watermark,
            txns=records,
            cursors=last.cursors,
            level=level,
            last_batch=run[-1].last_batch,
            span=(run[0].first_txn, run[-1].last_txn),
            epochs=last.epochs,
        )
        final = store.publish(staging, manifest).path
    except BaseException:
        store.discard(staging)
        raise
    return Span.of(manifest, final)


def _barrier(storage: Storage, staging: str, path: str, rec: TxnRecord) -> TxnRecord:
    """``rec`` as it is, its files copied under ``txn/<txn>/``."""
    out = TxnRecord.from_json(rec.to_json())
    if rec.rows:
        out.rows = f"txn/{rec.txn}/{rec.rows}"
        storage.copy_tree(Storage.join(path, rec.rows), Storage.join(staging, out.rows))
    return out


def _piece(
    spark, storage: Storage, staging: str, items: list[tuple[str, TxnRecord]], meta: TableMeta | None
) -> TxnRecord:
    """The net change of one table's run of change-feed transactions ``items`` as one record."""
    first, last = items[0][1], items[-1][1]
    with_rows = [(p, r, rows) for p, r in items if (rows := r.rows) and any(r.counts.values())]
    rel = f"rows/{batch_folder(last.table)}/{first.start}-{last.txn}"
    out = TxnRecord(
        txn=last.txn,
        gtid=last.gtid,
        time=last.time,
        table=last.table,
        version=last.version,
        operation=last.operation
        if len(items) == 1 and first.first is None
        else f"NET OF {last.txn - first.start + 1} TRANSACTIONS",
        change="cdf",
        user=last.user,
        first=first.start if first.start != last.txn else None,
    )
    if not with_rows:
        return out
    out.rows = rel
    if len(with_rows) == 1:  # one transaction's (or one piece's) rows: already net, copied as files
        p, r, rows_path = with_rows[0]
        src = Storage.join(p, rows_path)
        dst = Storage.join(staging, rel)
        if rows_path.rsplit("/", 1)[-1].startswith(f"{VERSION_COLUMN}="):
            dst = Storage.join(dst, rows_path.rsplit("/", 1)[-1])
        storage.copy_tree(src, dst)
        out.counts = dict(r.counts)
        return out
    from pyspark.sql import Observation, functions as F

    from wlcore import collapse  # imports pyspark, as here: `wlc status` and `wlc prune` start without it

    rows = collapse.read_rows(spark, [storage.uri(Storage.join(p, rows_path)) for p, _r, rows_path in with_rows])
    assert last.version is not None  # a change-feed record names the master version it read
    keys = [k for k in (meta.key_columns if meta else []) if k in rows.columns]
    net = collapse.compact_by_key(rows, keys, last.version) if keys else collapse.compact_by_image(rows, last.version)
    seen = Observation()
    tallies = [F.count_if(F.col(CHANGE_TYPE) == t).alias(t) for t in CHANGE_TYPES]
    # every row at the piece's last version: one folder, one file (coalesce: one writer task)
    (
        net.observe(seen, *tallies)
        .coalesce(1)
        .write.mode("overwrite")
        .partitionBy(VERSION_COLUMN)
        .parquet(storage.uri(Storage.join(staging, rel)))
    )
    out.counts = {t: int(n) for t, n in seen.get.items() if n}
    return out
