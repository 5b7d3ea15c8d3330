"""Replay (:class:`Replay`): rounds that read the published batches up to the target, plan, apply, record.

Its parts: what one ``replicate()`` call asks, checked once (:class:`ReplicateOptions`), the
options of replay as the last call left them (:class:`ReplayOptions`), the set-up that every round goes through (:class:`ReplicaSetup`: the
checks before anything is written, a new replica's start from a snapshot, the route) and one
round's segments applied tables in parallel (:class:`Round`).

A round reads the source's batches from the replica's next batch on (compacted batches
first where they fit, :mod:`wlr.planner`), plans what may be applied now (:func:`wlr.planner.plan`),
applies it by segments (:class:`wlr.replay.Round`) and returns a :class:`RoundResult`; the
replica's state (``tick``, ``clock``, ``batches``, the view) is saved as it moves.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Sequence

from wlcore import batch as batchfmt, epochs, snapshots as snap
from wlcore.batch import TxnRecord
from wlcore.deltalog import delta_ref
from wlcore.errors import ConfigError, first_line
from wlcore.faults import crash_point
from wlcore.logstore import LogStore
from wlcore.metrics import port_of
from wlcore.names import split_name
from wlcore.session import check_s3_log_store, check_s3a
from wlcore.settings import number, settings
from wlcore.state import MASTER_CONFIG, MasterState, ReplicaState, check_paths
from wlcore.storage import Storage, copy_tree
from wlcore.target import Published, Target, check_capture, check_in_time, check_not_empty, meaning, parse_until
from wlcore.utc import utc_iso

from . import failure, monitor, select
from .book import LOCK_FILE, LOG_FILE, ReplicaLock, StateBook
from .catalog import ConsistentView
from .errors import ApplyError, DivergedError, ReplicaStateError, ReplicationError, ReplicationTimeout
from .planner import (
    Batch,
    Item,
    Limits,
    LogError,
    RoundRead,
    Route,
    Segment,
    TxnRef,
    check_history,
    check_not_passed,
    consistent_tick,
    note_history,
    segments,
    span_text,
)
from .relay import Relay
from .select import Selection
from .source import CurrentSource, Names, Source

if TYPE_CHECKING:
    from wlcore.session import LateSession

    from .apply import Applier, Landed
    from .book import ReplicaApplier
    from .monitor import ReplicaMetrics


# How a replica replays, as the last ``replicate()`` call asked (shared by its set-up and rounds).


@dataclass
class ReplayOptions:
    """Options of replay (see :meth:`wlr.Replica.replicate`).

    Attributes:
        collapse: each table's run of DML lands as one commit a segment (False: one commit a
            master transaction, and no compacted batches).
        compacted: replay through level-1/2 compacted batches where they fit.
        start_snapshot: the snapshot (its transaction id) a new replica starts from; None: the
            newest at or before the target.
        parallelism: tables applied at once (``replica.parallelism``).
        rewrite_bytes: keyed tables up to this size (bytes) take a collapsed segment as one whole
            rewrite (:mod:`wlr.apply`, ``replica.rewrite_bytes``; 0: always a MERGE).
        deltars_bytes: tables up to this size (bytes) written here exactly as Spark would take a
            segment in this process, with no Spark job (:mod:`wlr.apply`, ``replica.deltars_bytes``;
            0: never).
        relay_wanted: True/False: turn relaying on/off at the next round; None: as recorded.
        level0_until: a compacted batch failed: its range (up to this transaction id) is
            replayed from level 0 (-2: none).
    """

    collapse: bool = True
    compacted: bool = True
    start_snapshot: int | None = None
    parallelism: int = 4
    rewrite_bytes: int = 16 * 1024 * 1024
    deltars_bytes: int = 256 * 1024 * 1024
    relay_wanted: bool | None = None
    level0_until: int = -2

    @classmethod
    def of(cls, cfg) -> "ReplayOptions":
        """The defaults of the ``replica`` settings ``cfg`` (:class:`wlcore.settings.ReplicaSettings`)."""
        return cls(
            cfg.collapse, parallelism=cfg.parallelism, rewrite_bytes=cfg.rewrite_bytes, deltars_bytes=cfg.deltars_bytes
        )

    @property
    def use_compacted(self) -> bool:
        """True when replay may use compacted batches (``collapse`` and ``compacted``)."""
        return self.collapse and self.compacted


@dataclass(frozen=True)
class ReplicateOptions:
    """What one ``replicate()`` call asks, checked once and its defaults filled in (:meth:`of`);
    :meth:`wlr.Replica.replicate` says what each option means.

    Attributes:
        target (Target): ``until`` parsed, carrying it as the caller gave it (:attr:`Target.given`).
        follow (bool): keep following after an ``"all"`` target.
        timeout (float): seconds to wait for the target to be published.
        collapse (bool): land each table's run of DML as one commit a segment.
        snapshot (int | None): the snapshot (its transaction id) a new replica starts from (None: the newest fit).
        compacted (bool): replay through compacted batches where they fit.
        relay (bool | None): turn relaying on or off (None: as recorded).
        selection (Selection | None): the tables and rows asked (``tables=``, ``where=``; None: the
            recorded selection, or for a new replica ``replica.tables``/``replica.where``).
        empty (bool): a new replica may hold no transaction of the master.
        metrics_port (int | str | None): the port to serve ``/metrics`` on, as given (None: ``metrics.port``).
        service (bool): following as a service (``wlr replicate --follow``): a failure of the first
            catch-up is retried by the follower (:class:`wlr.follow.Follower`), not raised.
    """

    target: Target
    follow: bool
    timeout: float
    collapse: bool
    snapshot: int | None = None
    compacted: bool = True
    relay: bool | None = None
    selection: Selection | None = None
    empty: bool = False
    metrics_port: int | str | None = None
    service: bool = False

    @classmethod
    def of(
        cls,
        until: int | str | datetime | None = None,
        *,
        follow: bool | None = None,
        timeout: float | None = None,
        collapse: bool | None = None,
        snapshot: int | None = None,
        compacted: bool = True,
        relay: bool | None = None,
        tables: str | list[str] | None = None,
        where: dict[str, str] | None = None,
        empty: bool = False,
        metrics_port: int | str | None = None,
        service: bool = False,
    ) -> ReplicateOptions:
        """Check the arguments of one ``replicate()`` call (the keywords of :meth:`wlr.Replica.replicate`),
        without reading the replica or its source.

        Returns:
            ReplicateOptions: the options, ``until`` parsed (:func:`wlcore.target.parse_until`);
            ``follow``, ``timeout`` and ``collapse`` left None are ``replica.follow``,
            ``replica.timeout`` and ``replica.collapse`` (:mod:`wlcore.settings`).

        Raises:
            TargetError: ``until`` is malformed.
            ConfigError: ``timeout`` is not a number of seconds >= 0; a ``tables`` pattern or a
                ``where`` key is malformed (:meth:`wlr.select.Selection.of`).
            MetricsError: ``metrics_port`` is not a port from 0 to 65535 or ``off``.
        """
        target = parse_until(until)
        if metrics_port is not None:
            port_of(metrics_port)  # kept as given: "off" turns the metrics.port setting off
        cfg = settings().replica
        return cls(
            target,
            follow=cfg.follow if follow is None else bool(follow),
            timeout=cfg.timeout if timeout is None else number(timeout, "timeout"),
            collapse=cfg.collapse if collapse is None else bool(collapse),
            snapshot=snapshot,
            compacted=bool(compacted),
            relay=relay,
            selection=None if tables is None and where is None else Selection.of(tables, where),
            empty=bool(empty),
            metrics_port=metrics_port,
            service=bool(service),
        )


# A replay round: the planned transactions applied as segments, tables in parallel.
#
# The round takes a plan's transactions (ascending, ending at the target), groups them into
# per-table segments (:func:`wlr.planner.segments`) and runs each table's segments in order on
# a bounded thread pool (``replica.parallelism``), each worker with its own Spark session
# and each table's jobs in its own FAIR scheduler pool ``wlr:<table>``, so a small table's
# jobs share the cores with a large one's instead of queueing behind them (MonetDB's
# roadmap: parallel updates on the change set files). Tables are independent: Delta has no cross-table transactions.
#
# Progress is always read back from each replica table's own Delta log (the final replay
# tag), so a round repeated after a crash applies nothing twice. A segment that fails is
# replayed again transaction by transaction, so the failure names the exact transaction
# (and the transactions before it on that table are applied), as serial replay would.


log = logging.getLogger("wlr.replay")


POOL = "wlr"  # Spark FAIR scheduler pools of replay jobs: "wlr:<table>"
# Seconds between two saves of a round's progress (tick, view, versions) to wlr.config: a
# save a segment cost 20 ms under the state's lock with 200 tables, more than a small segment
# lands in. The round's end saves; a crash in between loses nothing, as each table's progress
# is read back from its own Delta log (its replay tags).
SAVE_EVERY = 1.0


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
        metrics: counts every segment landed (engine, transactions, change rows read and after
            collapse, seconds; None: not counted).
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
        metrics: ReplicaMetrics | None = None,
    ):
        self.applier, self.state, self.lock = applier, state, lock
        self.metrics = metrics
        self.stop = stop  # set: every table stops after its current segment (wlr.stop(), SIGTERM)
        self.items, self.bad = items, bad
        self.on_progress, self.note = on_progress, note
        self.done: dict[str, int] = {}
        self.failures: list[Failure] = []
        self._halt = threading.Event()
        self.bar = None

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
            stats = applier.apply(todo)
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
                stats = applier.apply([it])
                crash_point("replay.applied")
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
        if self.metrics is not None:
            self.metrics.segment(stats.get("engine", "spark"), len(items), stats["rows_in"], stats["rows_out"], seconds)
        span = span_text(items[0].rec.start, last.txn)
        what = last.operation if len(items) == 1 else f"{len(items)} transactions"
        rows = f", {stats['rows_in']} change rows" if stats["rows_in"] else ""
        if stats["rows_out"] >= 0 and stats["rows_in"]:
            rows += f", {stats['rows_out']} after collapse"
        if stats.get("how") == "rewrite":
            rows += ", the whole table rewritten"
        if stats.get("engine") in ("arrow", "delta-rs"):
            rows += f", through {'Arrow' if stats['engine'] == 'arrow' else 'delta-rs'}"
        self.note(f"applied {last.table} transaction {span} ({what}{rows}) in {seconds:.2f} s")

    def _failed(self, it: Item, exc: Exception) -> None:
        if isinstance(exc, (ApplyError, ConfigError)):  # ConfigError: an unsafe table name in the batch
            cause = str(exc)
        else:  # Spark/Delta errors: constraint violations, schema conflicts...
            cause = f"{type(exc).__name__}: {first_line(exc)}"
        with self.lock:
            self.failures.append(Failure(it.batch, it.rec.txn, it.rec.table, cause))
        raise _Stop()


def read_by_spark(manifest, folder: str | None) -> tuple[str, ...]:
    """The Parquet files ``manifest`` lists below ``folder`` that Spark's reader reads there (it
    leaves out names starting with ``_`` or ``.``), relative to the batch; () for no folder."""
    if not folder:
        return ()
    skip = len(folder.rstrip("/")) + 1
    return tuple(
        rel
        for rel in manifest.listed_under(folder)
        if rel.endswith(".parquet") and not any(part[:1] in "_." for part in rel[skip:].split("/"))
    )


class _Stop(Exception):
    """This table's worker stops: a transaction failed."""


# Making a replica: the checks before anything is written, the start from a snapshot, the locks.
#
# A part of :class:`wlr.replica.Replica`, built with what it uses: the replica's applier (with
# its state book, its source and its session), its consistent view, its lock, names and options.


class ReplicaSetup:
    """Set-up of :class:`wlr.replica.Replica`: validate, the first copy, the master's config.

    Args:
        applier (ReplicaApplier): the replica's applier, with its state book, the source it reads
            now and its replay session (it keeps the selection settled here).
        view (ConsistentView): the replica's consistent view (set when a replica is made).
        lock (ReplicaLock): the replica's ``wlr.lock`` (probed by :meth:`validate`).
        names (Names): the replica's resolved names: its dbfarm, the master and the master's dbfarm.
        options (ReplayOptions): how replay runs (:class:`wlr.replay.ReplayOptions`).
    """

    def __init__(
        self,
        applier: ReplicaApplier,
        view: ConsistentView,
        lock: ReplicaLock,
        names: Names,
        options: ReplayOptions,
    ) -> None:
        book = applier.book
        self.book = book
        self.lock = lock
        self.current: CurrentSource = applier.source
        self.master = names.master
        self.master_dbfarm = names.master_dbfarm
        self.dbfarm = names.dbfarm
        self.options = options
        self._spark: LateSession = applier.spark
        self.applier = applier
        self.view = view
        self.storage: Storage = book.storage
        self.path = book.path
        self.name = book.name
        self._asked: Selection | None = None
        self._route: Route | None = None
        self._store: LogStore | None = None

    @property
    def source(self) -> Source:
        """Where the replica reads now."""
        return self.current.source

    @property
    def selection(self) -> Selection | None:
        """The tables (and rows) the replica carries, as :meth:`validate` settled them (None: not yet)."""
        return self.applier.selection

    @selection.setter
    def selection(self, value: Selection | None) -> None:
        """Settle the replica's selection; its applier lands only what it carries."""
        self.applier.selection = value

    @property
    def state(self) -> ReplicaState:
        """The replica's state in memory (:attr:`wlr.book.StateBook.state`)."""
        return self.book.state

    @property
    def spark(self) -> Any:
        """The replay session."""
        return self._spark()

    def ask_selection(self, asked: Selection | None) -> None:
        """Keep what ``replicate(tables=, where=)`` asks for; :meth:`validate` settles it.

        Args:
            asked (Selection | None): the tables and rows asked (:meth:`wlr.select.Selection.of`);
                None: the recorded selection, or for a new replica ``replica.tables``/``replica.where``.
        """
        self._asked = asked

    def validate(self, options: ReplicateOptions) -> MasterState:
        """Check, without writing anything, that a ``replicate()`` call may start (see :mod:`wlcore.target`
        for the checks on the target).

        Args:
            options (ReplicateOptions): the call: its ``target``, ``timeout`` (seconds the call
                would wait for the target) and ``empty`` (a new replica may hold no transaction).

        Returns:
            MasterState: the source's ``wlc.config``.

        Raises:
            TargetError: ``until`` is malformed or already passed; an instant later than the
                timeout can wait for; a new replica's target before the master's first
                transaction (unless ``empty``).
            ReplicationTimeout: the target is not published and cannot be: capture is stale
                or the master stopped logging before it.
            ReplicationError: a new replica's path through the logs meets a batch that is
                missing, damaged or another database's (``batch`` names it; nothing is written).
            ReplicaStateError: the master is not a master; the replica folder is a master, a
                replica of another master or of an earlier incarnation, or a non-empty folder.
            ConfigError: the replica folder is a file; a predicate does not parse or fit.
            NotFoundError: a selected table is unknown to the master.
        """
        target = options.target
        # Spark must reach S3 before anything is written. The URL's scheme, not the storage,
        # decides it: this is about Spark's configuration (its s3a filesystem on the
        # classpath, as wlcore.session decides from the same prefixes), not about files
        for url in (self.source.root, self.dbfarm):
            if url.startswith(("s3://", "s3a://")):
                check_s3a(self.spark, url)
        if self.dbfarm.startswith(("s3://", "s3a://")):  # the replica's tables are written there
            check_s3_log_store(self.spark, self.dbfarm)
        mcfg = self.master_config()
        if self.storage.exists(self.path) and not self.storage.isdir(self.path):
            raise ConfigError(f"{self.path} is a file, not a database folder; name another replica")
        self.lock.probe()
        if self.storage.exists(Storage.join(self.path, MASTER_CONFIG)):
            raise ReplicaStateError(f"{self.path} is a master; a master cannot become a replica")
        state = self.book.load()
        if state is not None and state.empty:
            state = None  # a wlr.config without a key: not a replica yet
        if state is not None:
            self._check_follows(state, mcfg)
            self.check_history(state, mcfg)
            check_not_passed(target, state.tick, state.clock, named=meaning(target))
        elif any(
            n for n in self.storage.listdir(self.path) if not n.startswith(".") and n not in (LOCK_FILE, LOG_FILE)
        ):
            raise ReplicaStateError(f"{self.path} exists and is not empty; replicate into a new database name")
        pub = self.published(mcfg)
        check_capture(target, pub, f"wlc capture {self.master_dbfarm} {self.source.capture_name(self.master)}")
        check_in_time(target, pub, datetime.now(timezone.utc), options.timeout, settings().capture.settle)
        self.selection = select.choose(state, self._asked, self.name, self._spark)
        if state is None or state.state == "restoring":
            store = self.store(mcfg)
            start = self.route(mcfg).start_for(mcfg, store, target, self.options.start_snapshot)
            if (
                state is None and start.txn < 0 and not options.empty and target.kind != "all"
            ):  # reads the first manifest
                first = self.route(mcfg).first_after(store, start)
                check_not_empty(target, first, pub, bool(start.path), options.empty, self.master)
            try:
                self.route(mcfg).check_path(store, mcfg, start, target, self.options.use_compacted)
            except LogError as exc:  # what an existing replica raises there, and nothing is written
                raise ReplicationError(exc.batch, None, None, exc.cause) from None
            select.check_selected(self.selection, store, start.path or "")
            select.check_predicates(self.selection, self._spark, self.source.storage, start.path or "")
        return mcfg

    def published(self, mcfg: MasterState) -> Published:
        """What the source's ``wlc.config`` says it has published, and capture's liveness (known
        from the master's own folder only).

        Args:
            mcfg (MasterState): the source's ``wlc.config``.

        Returns:
            Published: its tick, clock, watermark and capture's state, judged now (UTC).
        """
        label = "the master" if self.source.is_master else self.source.label
        return Published.of(mcfg, datetime.now(timezone.utc), label, self.source.is_master)

    def store(self, mcfg: MasterState) -> LogStore:
        """The source's log folder as the replica reads it (made again when the source or the log
        folder its ``wlc.config`` names changed).

        Args:
            mcfg (MasterState): the source's ``wlc.config`` (its ``logs``).

        Returns:
            LogStore: the source's log store, its batches named by the master's database.
        """
        src, logs, store = self.source, self.source.logs(mcfg), self._store
        if store is None or store.storage is not src.storage or (store.root, store.logs) != (src.root, logs):
            store = self._store = LogStore(src.storage, src.root, logs, self.master)
        return store

    def route(self, mcfg: MasterState) -> Route:
        """The master's snapshots and compacted batches as this replica reads them (made again when
        the source or its database id changed).

        Args:
            mcfg (MasterState): the source's ``wlc.config`` (its ``dbid``).

        Returns:
            Route: the replica's route (:class:`wlr.planner.Route`).
        """
        if self._route is None or (self._route.dbid, self._route.master_path) != (mcfg.dbid, self.source.root):
            self._route = Route(
                self.source.storage,
                self.source.root,
                self.master,
                mcfg.dbid,
                f"wlc snapshot {self.master_dbfarm} {self.source.capture_name(self.master)}",
            )
        return self._route

    def _check_follows(self, state: ReplicaState, mcfg: MasterState) -> None:
        """Raise ReplicaStateError unless replica ``state`` follows this master, same database id."""
        if state.master != self.master:
            raise ReplicaStateError(f"{self.path} is a replica of {state.master!r}, not {self.master!r}")
        if state.dbid != mcfg.dbid:
            raise ReplicaStateError(
                f"{self.source.label} has database id {mcfg.dbid} but this replica follows "
                f"{state.dbid}: the master was made anew (or the source is another master's); "
                "make a new replica"
            )

    def check_history(self, state: ReplicaState, mcfg: MasterState) -> None:
        """Refuse a source whose epoch history disagrees with the one this replica followed.

        Args:
            state (ReplicaState): the replica's state.
            mcfg (MasterState): the source's ``wlc.config`` (its ``epochs`` up to its ``tick``).

        Raises:
            DivergedError: the histories disagree on a transaction both have (:mod:`wlr.planner`).
            ReplicaStateError: either history is damaged.
        """
        # a promoted master's new epoch holds every transaction after the promotion, written or not
        tick = mcfg.tick if mcfg.promoted_tick is None else max(mcfg.tick, mcfg.promoted_tick + 1)
        self._check_epochs(state, mcfg.epochs, tick, f"{self.source.label}'s wlc.config", mcfg.promoted_tick)

    def check_batches(self, batches: Sequence[Batch]) -> None:
        """Refuse a batch read for this round that was written in another history than the
        replica followed (the config read before it may be older).

        Args:
            batches (Sequence[Batch]): the batches read, each with its manifest's ``epochs``.

        Raises:
            DivergedError: a batch's history disagrees (:mod:`wlr.planner`).
            ReplicaStateError: a history is damaged.
        """
        for b in batches:
            if b.manifest.epochs:
                self._check_epochs(self.state, b.manifest.epochs, b.manifest.last_txn, f"batch {b.number}")

    def _check_epochs(
        self, state: ReplicaState, their_text: str, their_tick: int, where: str, promoted: int | None = None
    ) -> None:
        check_history(
            state, their_text, their_tick, where, label=self.source.label, master=self.master, path=self.path,
            promoted=promoted,
        )  # fmt: skip

    def note_history(self, batches: Sequence[Batch]) -> None:
        """Keep the epoch history of the batch holding the replica's tick (:func:`wlr.planner.note`).

        Args:
            batches (Sequence[Batch]): the batches of the round, ascending.
        """
        note_history(self.state, batches)

    def ensure(self, mcfg: MasterState, target: Target) -> None:
        """Make the replica on first use from the newest snapshot at or before ``target``
        (:mod:`wlr.planner`): wlr.config first (state ``restoring``), then the snapshot's
        tables, then state ``new`` at the snapshot's transaction. A crash in between
        restarts the copy. A replica that exists is never reset by a newer snapshot.

        Args:
            mcfg (MasterState): the source's ``wlc.config``.
            target (Target): the replay target the snapshot must be at or before.

        Raises:
            ReplicaStateError: an existing replica follows another master or database id.
            TargetError: no snapshot is at or before the target.
        """
        if not self.state.empty and self.state.state != "restoring":
            self._check_follows(self.state, mcfg)
            if self.selection is None:
                self.selection = Selection.from_state(self.state)
            return
        store = self.store(mcfg)
        start = self.route(mcfg).start_for(mcfg, store, target, self.options.start_snapshot)
        self.storage.makedirs(self.path)
        state = ReplicaState.of(
            master=self.master,
            masterfarm=self.master_dbfarm,
            dbid=mcfg.dbid,
            source=self.source.root,
            source_kind=self.source.kind,
            **(self.selection or Selection()).to_state(),
            logs=store.logs,
            batches=start.batch + 1,
            tick=start.txn,
            clock=start.time or None,
            skipped=[],
            state="restoring",
        )
        state.set_error(None, None, "", "")
        self.book.state = state
        self.book.save()
        hist = epochs.upto(epochs.parse(mcfg.epochs), start.txn)
        if start.path:
            body = snap.read(self.source.storage, start.path)
            hist = epochs.upto(epochs.parse(body.epochs or mcfg.epochs), start.txn)
            applier = self.applier.current()
            sel = self.selection or Selection()
            for name in sorted(n for n in body.tables if sel.wants(n)):
                schema, table = split_name(name)
                dst = Storage.join(self.path, schema, table)
                self.storage.rm(dst)
                copy_tree(self.source.storage, Storage.join(start.path, schema, table), self.storage, dst)
                keep = sel.predicate(name)
                if keep is not None:  # selective replication: the rows outside the filter go
                    self.spark.sql(
                        f"DELETE FROM {delta_ref(self.storage.uri(dst))} WHERE NOT coalesce(({keep}), false)"
                    )
                self.state.set_version(name, applier.tables.current_version(name))
            self.book.log(
                f"started from the snapshot of {self.master} at transaction {start.txn} "
                f"({len(body.tables)} tables, {start.path}, {self.source.label})"
            )
        else:
            self.book.log(f"started empty from master {self.master} ({self.source.label})")
        self.state.epochs = epochs.format(hist)
        self.state.epoch = epochs.at(hist, start.txn) or ""
        self.view.set_view(-1, {})
        self.state.state = "new"
        self.book.save()

    def master_config(self) -> MasterState:
        """The source's ``wlc.config`` (the master's, or its shipped or relayed copy).

        Returns:
            MasterState: the configuration read now.

        Raises:
            WlcError: the source has no ``wlc.config`` (:meth:`wlr.source.Source.missing`: a
                ReplicaStateError, or NotFoundError naming the nearest master).
            ReplicaStateError: the source holds another master's logs.
            StalePathError: the master's wlc.config names a log folder or snapshot of another
                place (its folder was moved or copied while the file held absolute paths).
        """
        mcfg = self.source.config()
        if mcfg is None:
            raise self.source.missing(self.master)
        fenced = self.source.fenced()  # a replica was promoted in the master's place
        if fenced is not None:
            raise fenced
        if self.source.is_master:  # a master folder moved or copied while wlc.config held absolute paths
            check_paths(self.source.storage, self.source.root, mcfg)
        if self.source.is_master and mcfg.promoted is None and self.source.name != self.master:
            raise ReplicaStateError(
                f"{self.source.label} is not master {self.master!r}; name the master's own "
                "database or one of its relays as the source"
            )
        if mcfg.database and mcfg.database != self.master:
            raise ReplicaStateError(
                f"{self.source.label} holds the logs of master {mcfg.database!r}, not "
                f"{self.master!r}; name the right master or source"
            )
        return mcfg

    def note_source(self, mcfg: MasterState) -> LogStore:
        """Record in wlr.config where this round reads (a replica may switch between the
        master, shipped copies and relays of one master), logging a switch.

        Args:
            mcfg (MasterState): the source's ``wlc.config`` (names its log folder).

        Returns:
            LogStore: the log folder read (:meth:`store`).
        """
        store = self.store(mcfg)
        logs = store.logs
        state = self.state
        if state.source_error:  # read again: status shows the replica's own state again
            self.book.log(f"reading {self.source.label} again (it was out of reach: {state.source_error})")
            state.source_error, state.source_error_since = "", None
            self.book.save()
        if mcfg.beat is not None and state.master_beat != mcfg.beat:  # a promotion keeps it (wlr.promote)
            state.master_beat = mcfg.beat
            self.book.save()
        if (state.source, state.source_kind, state.logs) != (self.source.root, self.source.kind, logs):
            if state.source and state.source != self.source.root:
                self.book.log(
                    f"now reading from {self.source.label} (was {state.source}), from transaction {state.tick + 1}"
                )
            state.source, state.source_kind, state.logs = self.source.root, self.source.kind, logs
            self.book.save()
        return store


@dataclass
class RoundResult:
    """What a round did.

    Attributes:
        reached: the target is reached (following: everything published is applied).
        waiting_for: what replay waits for when not reached (a sentence; "" when reached).
        master: the source's wlc.config as the round read it.
        handoff: level 0 stopped before this batch number, where a compacted batch takes
            over; the caller runs another round at once (None: no hand-off).
        tick: the replica's last applied transaction after the round.
    """

    reached: bool
    waiting_for: str
    master: MasterState
    handoff: int | None = None
    tick: int = -1


class Replay:
    """Runs rounds of replay for :class:`wlr.replica.Replica`.

    Args:
        setup (ReplicaSetup): the replica's set-up (first copy, checks of the source, its route),
            with the state book, consistent view, options, source and applier it checks with
            (the rounds use the same ones).
        relay (Relay): the replica's relay (ships what was applied after the rounds).
        stop (threading.Event): when set, a round ends after the segments being applied.
        metrics (ReplicaMetrics): the replica's metrics (segments landed, failures stored).
    """

    def __init__(self, setup: ReplicaSetup, relay: Relay, stop: threading.Event, metrics: ReplicaMetrics) -> None:
        self.setup = setup
        self.book: StateBook = setup.book
        self.view: ConsistentView = setup.view
        self.options: ReplayOptions = setup.options
        self._source: CurrentSource = setup.current
        self._applier: ReplicaApplier = setup.applier
        self.relay = relay
        self.stop = stop
        self.metrics = metrics

    @property
    def state(self) -> ReplicaState:
        """The replica's state in memory."""
        return self.book.state

    def steps(self, target: Target, progress: bool = True) -> RoundResult:
        """Apply what the plan allows now: rounds until ``target`` is reached or no compacted
        batch takes over from level 0 (the source's wlc.config read once a round); then relay.

        Args:
            target (Target): the replay target.
            progress (bool): a bar for a long round, on a terminal or in a notebook.

        Returns:
            RoundResult: the last round's result.

        Raises:
            ReplicationError, ReplicationTimeout, DivergedError: as :meth:`run`.
            ReplicaStateError: the source's wlc.config is missing or another master's
                (:meth:`wlr.replay.ReplicaSetup.master_config`).
        """
        diverged = False
        mcfg: MasterState | None = None
        try:
            while True:
                mcfg = self.setup.master_config()
                result = self.run(target, mcfg, progress)
                if result.reached or result.handoff is None or self.stop.is_set():
                    return result
        except DivergedError:
            diverged = True  # nothing more is relayed from a source on another history
            raise
        finally:
            if not diverged:
                self.relay.ship(mcfg)

    def run(self, target: Target, mcfg: MasterState, progress: bool) -> RoundResult:
        """One round toward ``target``: prepare (first copy, checks), read the batches, plan, apply,
        record.

        Args:
            target (Target): the replay target.
            mcfg (MasterState): the source's ``wlc.config``, read for this round.
            progress (bool): a bar for a long round, on a terminal or in a notebook.

        Returns:
            RoundResult: whether the target was reached, why not, and where the replica stands.

        Raises:
            ReplicationError: a transaction or batch failed (stored in wlr.config first).
            ReplicationTimeout: the master stopped logging before a ``txn`` target.
            DivergedError: a batch read belongs to another history than the replica's.
        """
        store = self._prepare(mcfg, target)
        tick = self._tick()
        compacted = self.options.use_compacted and tick >= self.options.level0_until
        read = self.setup.route(mcfg).round(store, mcfg, self.state.dbid, tick, self.state.batches, target, compacted)
        for line in read.notes:
            self.book.log(line)
        self._note_recovery(read.read_up_to)  # a batch's failure
        todo = read.plan
        self.setup.check_batches(read.batches)  # read after the config was: a batch of another history is never applied
        wanted = {r.txn for r in todo.apply}
        failed = self._round(todo.apply, read.batches, *self._items(read.batches, wanted), progress)
        self._record(read.batches, read.tick)
        retry = self._after_failure(failed, read, target)
        if retry is not None:
            return RoundResult(False, retry, mcfg, read.handoff, self._tick())
        if self.stop.is_set():  # the round may have ended early: the target is not known reached
            return RoundResult(False, "stop() was called", mcfg, read.handoff, self._tick())
        if target.kind == "txn" and not todo.reached and mcfg.stopped:
            raise ReplicationTimeout(
                f"the master stopped logging at transaction {mcfg.tick if mcfg.has('tick') else None}; "
                f"transaction {target.upto_txn} will never be published (the replica "
                f"applied everything up to {self.state.tick})"
            )
        return RoundResult(todo.reached, todo.waiting_for, mcfg, read.handoff, self._tick())

    def _tick(self) -> int:
        return self.state.tick

    def _prepare(self, mcfg: MasterState, target: Target) -> LogStore:
        """Make the replica on first use, record a relay switch and the source; returns the log store read."""
        self.setup.ensure(mcfg, target)
        if self.options.relay_wanted is not None:
            self.state.relay = bool(self.options.relay_wanted)
            self.options.relay_wanted = None
        self.setup.check_history(self.state, mcfg)
        return self.setup.note_source(mcfg)

    def _record(self, batches: list[Any], tick: int) -> None:
        """Save where the round got: the next batch, the epoch history, a ``tick`` line in wlr.log."""
        self._advance(batches)
        self.setup.note_history(batches)
        self.book.save()
        if self._tick() > tick:  # wlr.lag_history() reads these lines
            clock = self.state.clock
            self.book.log(f"{monitor.TICK_LINE} {self.state.tick} (committed {utc_iso(clock) if clock else ''})")
        self._note_recovery(-1)  # a transaction's failure, passed now

    def _after_failure(self, failed: Failure | None, read: RoundRead, target: Target) -> str | None:
        """Store and raise the round's failure; returns what replay waits for when a compacted
        batch failed (its range is replayed from level 0 next), else None."""
        if failed is not None and any(r.txn == failed.txn for r in read.unit_refs):
            unit = next(b for b in read.units if b.manifest.first_txn <= failed.txn <= b.manifest.last_txn)
            self.options.level0_until = unit.manifest.last_txn
            self.book.log(
                f"compacted batch {os.path.basename(unit.path)} failed on {failed.table} ({failed.cause}); "
                f"replaying transactions up to {unit.manifest.last_txn} from level 0"
            )
            return "level-0 replay of a compacted batch's range"
        if failed is not None:
            self.fail(failed.batch, failed.txn, failed.table, failed.cause)
        # reading stops at the batch that reaches the target, so a broken batch was needed,
        # unless the replica already stood at a target transaction
        broken = read.broken
        if broken is not None and not target.reached_by(read.tick, None):  # by id alone: no watermark
            self.fail(broken.batch, None, None, broken.cause)
        return None

    def _note_recovery(self, read_up_to: int) -> None:
        """Clear a stored failure once replay got past it (a later retry succeeded)."""
        line = failure.clear_if_passed(self.state, read_up_to)
        if line:
            self.book.save()
            self.book.last_error = None
            self.book.log(line)

    def _items(self, batches, wanted: set[int]) -> tuple[dict[int, Item], dict[int, str]]:
        """``({txn: Item}, {txn: cause})`` of the wanted transactions, files verified; the
        causes are the transactions that cannot be applied as published."""
        items, bad = {}, {}
        selection, storage = self._applier.selection, self._source.source.storage
        for b in batches:
            records = [
                t for t in b.manifest.txns if t.txn in wanted and (selection is None or selection.wants(t.table))
            ]
            if not records:
                continue
            problems = batchfmt.verify_files(storage, b.path, b.manifest, [r.rows for r in records if r.rows])
            for rec in records:
                items[rec.txn] = Item(b.number, b.path, rec, read_by_spark(b.manifest, rec.rows))
                found = {f: p for f, p in problems.items() if rec.rows and f.startswith(rec.rows.rstrip("/") + "/")}
                if found:
                    bad[rec.txn] = "checksum verification failed: " + "; ".join(
                        f"{f}: {p}" for f, p in sorted(found.items())[:3]
                    )
                elif rec.lost:
                    bad[rec.txn] = f"its change rows were not captured: {rec.lost}"
        return items, bad

    def _advance(self, batches) -> None:
        """Move ``batches`` (the next batch to read) past every batch whose transactions are all handled."""
        tick = self.state.tick
        for b in batches:
            if tick < b.manifest.last_txn:
                break
            self.state.batches = b.number + 1

    def _round(
        self, todo: list[TxnRef], batches, items: dict[int, Item], bad: dict[int, str], progress: bool = True
    ) -> Failure | None:
        """Apply ``todo`` by segments, tables in parallel; tick, clock, the next batch and the
        read view follow the consistent point, saved at most every :data:`SAVE_EVERY` seconds
        (the caller saves the round's end)."""
        if not todo:
            return None
        tick0 = self._tick()
        times = {r.txn: r.time for r in todo}
        saved = time.monotonic()

        def progressed(done: dict[str, int], final: bool = False) -> None:
            # each table's own log holds its progress: between saves, only readers wait for it
            nonlocal saved
            if not final and time.monotonic() - saved < SAVE_EVERY:
                return
            reached = consistent_tick(tick0, todo, done)
            if reached > self.state.tick:
                self.state.tick, self.state.clock = reached, times[reached]
                self._advance(batches)
                self.view.set_view(reached, done)  # saved with the tick: readers see both move together
            if not final:  # the round's end is saved by the caller (Replay._record)
                self.book.save()
                saved = time.monotonic()

        applier = self._applier.current()
        # a rewrite shows in the replica's change feed as every row, so collapse=False keeps MERGEs
        applier.limits = Limits(
            deltars_bytes=self.options.deltars_bytes,
            rewrite_bytes=self.options.rewrite_bytes if self.options.collapse else 0,
        )
        rnd = Round(applier, self.state, self.book.lock, items, bad, progressed, self.book.log, self.stop, self.metrics)
        sel = self._applier.selection
        skipped = {r.table for r in todo if sel is not None and not sel.wants(r.table)}
        if skipped:  # tables this replica does not carry: handled without being applied
            rnd.done.update({t: max(r.txn for r in todo if r.table == t) for t in skipped})
            for t in skipped:  # a drop or create there must not leave a stale table entry
                self.state.drop_version(t)
        try:
            return rnd.run(
                [r for r in todo if r.table not in skipped],
                collapse=self.options.collapse,
                parallelism=self.options.parallelism,
                progress=progress,
            )
        finally:
            with self.book.lock:
                progressed(dict(rnd.done), final=True)

    def fail(self, batch: int | None, txn: int | None, table: str | None, cause: str) -> None:
        """Store the failure in wlr.config, log it, and raise it (PostgreSQL's apply worker stops the same way).

        Args:
            batch (int | None): the level-0 batch the failure is in.
            txn (int | None): the transaction that failed (None: a failure of the logs themselves).
            table (str | None): the table it failed on.
            cause (str): the error's text.

        Raises ReplicationError: always (``batch``, ``txn``, ``table`` and ``cause`` name it).
        """
        err: ReplicationError = failure.record(self.state, batch, txn, table, cause)
        self.metrics.failed(failure.kind(self.state))
        self.book.save()
        self.book.last_error = err
        self.book.log(f"FAILED {err}")
        raise err
