"""Master mode: a database whose committed changes are captured (MonetDB's ``wlc.master()``).

A :class:`Master` owns its parts, each built with what it needs: :mod:`wlc.master_record` (``wlc.config``,
``wlc.log``), :class:`MasterSetup` (set-up, capture lock), :mod:`wlc.capture` (reading the Delta logs),
:mod:`wlc.publisher` (the open batch), :class:`CaptureThread` and :class:`Background` (the threads),
:mod:`wlc.lifecycle` (snapshots, compaction, retention), :class:`MasterCatalog` (its schemas and tables
in the Spark session catalog, :mod:`wlcore.catalog`) and :class:`MasterShipping` (``Master.ship()`` and
``ship_stop()`` over :mod:`wlcore.ship`); the parts that copy or read tables share its Spark session
(:class:`LateSession`, made when one first needs it).

Putting a database in master mode (:class:`MasterSetup`): the checks made before anything is written, the capture
lock (``<db>/wlc.lock``), the first snapshot of a new master, and where capture resumes in one
that was capturing before.

MonetDB's ``CALL wlc.master()``: a database that holds tables gets a snapshot first (each
table copied at its current Delta version), and capture starts after it; a master that
captured before resumes from the cursors of its newest published batch.

The thread that captures a master scans at each wake-up, woken by filesystem events (or polling). A
wake-up without any event in the database folder since the last scan (a beat's timeout on an idle
master) reads no table's log: the folder's watcher vouches that nothing changed, so the scan only
publishes what is due and moves the watermark, as Litestream's watcher of a database file does. Logs
are read again at every event and at least every :data:`FULL_SCAN` seconds. Each scan stages what
capture finds and publishes the open batch when its beat is over (:class:`wlc.publisher.Publisher`),
writes the heartbeat, and warns about schemas made outside the master (:class:`MasterCatalog`). A
failed scan is logged (a line, its traceback in the log file) and retried from the same cursors with
backoff (:func:`retry_wait`), as PostgreSQL's apply worker retries; ``wlc.config`` names the failure
while it lasts. :class:`Background` holds it, and the background life cycle beside it, while a master
captures.
"""

from __future__ import annotations

import logging
import os
import posixpath
import threading
import time
import uuid
import warnings
from datetime import datetime
from typing import Any

from wlcore import batch as batchfmt, epochs, metrics, snapshots as snap
from wlcore.batch import TxnRecord
from wlcore.catalog import create_schema, register, warehouse_folder, warehouse_schemas
from wlcore.databases import Dbfarm
from wlcore.deltalog import RESERVED
from wlcore.errors import BatchError, ConfigError, LockHeldError, MasterStateError, NotWritableError
from wlcore.levels import Span, Start
from wlcore.names import split_name
from wlcore.promotion import read_start, resume_point
from wlcore.session import LateSession
from wlcore.settings import check_name, dbfarm as resolve_dbfarm, number, settings
from wlcore.ship import Shipper, ShipReport, add_copy, dest_root
from wlcore.state import (
    LOCK_FILE,
    LOG_FILE,
    MASTER_CONFIG as CONFIG_FILE,
    REPLICA_CONFIG as REPLICA_CONFIG_FILE,
    STARTED,
    STOPPED,
    WATERMARK_STOPPED,
    MasterState,
    check_paths,
    logs_of,
    read_master_state,
)
from wlcore.storage import HeldLock, Storage
from wlcore.utc import utcnow
from wlcore.watch import FolderWatch

from .capture import Capture, CaptureState, Holds, discover_tables
from .lifecycle import AutoLifecycle, Lifecycle, MasterLifecycle, PruneReport
from .master_record import MasterRecord, TableNotes
from .metrics import CaptureMetrics
from .publisher import CaptureTiming, Publisher


class Master:
    """A database in master mode and the capture that feeds its logs.

    Create it with :func:`wlc.master` (or ``Master(...).start()``). A program may hold
    several. Capture runs in a daemon thread woken by filesystem events (or polling) and
    publishes the open batch ``beat`` seconds after its first record.

    Args:
        dbname: database name (a plain identifier; the folder ``<dbfarm>/<dbname>``).
        dbfarm: folder holding the databases; default ``$WLC_DBFARM`` or ``dbfarm`` in config.
        logs: folder for the published batches; default ``<dbfarm>/<dbname>/wlc_logs``.
        spark: the Spark session (default: the active one, made when first needed).
        capture: False: :meth:`start` does not start the capture thread.
        metrics_port: serve Prometheus metrics at ``http://127.0.0.1:<port>/metrics`` while capturing
            (:mod:`wlc.metrics`; 0: any free port, then ``metrics_port`` holds it; None: ``metrics.port``).

    Raises:
        ConfigError: a malformed name, dbfarm or metrics port.
        NotFoundError: the dbfarm does not exist.
    """

    @property
    def settle(self) -> float:
        """Seconds a commit must be old before capture takes it (``capture.settle``)."""
        return self.timing.settle

    @settle.setter
    def settle(self, value: float) -> None:
        """Set it (takes effect at the next use)."""
        self.timing.settle = value

    @property
    def polling(self) -> bool:
        """True: poll the folder instead of waiting for filesystem events (``capture.polling``)."""
        return self.timing.polling

    @polling.setter
    def polling(self, value: bool) -> None:
        """Set it (takes effect at the next use)."""
        self.timing.polling = value

    @property
    def poll_interval(self) -> float:
        """Seconds between scans of an idle master (``capture.poll_interval``)."""
        return self.timing.poll_interval

    @poll_interval.setter
    def poll_interval(self, value: float) -> None:
        """Set it (takes effect at the next use)."""
        self.timing.poll_interval = value

    @property
    def stage_within(self) -> float:
        """Seconds staged change rows may wait (``capture.stage_within``)."""
        return self.timing.stage_within

    @stage_within.setter
    def stage_within(self, value: float) -> None:
        """Set it (takes effect at the next use)."""
        self.timing.stage_within = value

    @property
    def retry_max(self) -> float:
        """Seconds, the longest wait between two reads of a held table (``capture.retry_max``)."""
        return self.timing.retry_max

    @retry_max.setter
    def retry_max(self, value: float) -> None:
        """Set it (takes effect at the next use)."""
        self.timing.retry_max = value

    def __init__(
        self,
        dbname: str,
        dbfarm: str | None = None,
        logs: str | None = None,
        spark: Any = None,
        capture: bool = True,
        metrics_port: int | str | None = None,
    ):
        self.dbname = check_name(dbname, "database")
        self.dbfarm = resolve_dbfarm(dbfarm)
        self.storage = Storage.of(self.dbfarm)
        # a dbfarm that does not exist is refused (never made by accident); a promoted master is
        # named by its folder or by its database's name
        self.dbname = Dbfarm(self.dbfarm).folder_of(self.dbname)
        self.path = Storage.join(self.dbfarm, self.dbname)
        self.session = LateSession(spark)  # the Spark session, made when a part first needs it
        self._want_capture = capture
        self.metrics_port = metrics.port_of(metrics_port) if metrics_port is not None else settings().metrics.port
        self.timing = CaptureTiming.from_settings()
        self._lock = threading.RLock()
        self.background = Background()  # the capture thread and the background life cycle, from start() on
        self.record = MasterRecord(self.storage, self.path, self.dbname, settings().master.beat)
        self.notes = TableNotes(self.record)
        self.setup = MasterSetup(self.record, self.notes, self.dbfarm, logs, self.session)
        self.catalog = MasterCatalog(self.session, self.record, self.timing)
        self.cycle = MasterLifecycle(self.record, self.session, self._lock)
        self.shipping = MasterShipping(self.storage, self.path, self.record.dbname)
        self.capture: Capture | None = None  # from start() on
        self.publisher: Publisher | None = None  # from start() on

    # ------------------------------------------------------------------ properties
    @property
    def spark(self) -> Any:
        """The Spark session (the one given, else the active one, made when first needed)."""
        return self.session()

    @property
    def config(self) -> MasterState:
        """``wlc.config`` as this object holds it (:class:`wlcore.state.MasterState`)."""
        return self.record.config

    @config.setter
    def config(self, value: MasterState) -> None:
        """Hold ``value`` as ``wlc.config`` (written by the next save)."""
        self.record.config = value

    @property
    def logs(self) -> str:
        """The log folder of the published batches (``logs`` in ``wlc.config``)."""
        return self.record.logs

    @property
    def state(self) -> int:
        """``state`` of ``wlc.config``: 1 started, 2 stopped (MonetDB's)."""
        return self.config.state

    @property
    def beat_seconds(self) -> float:
        """The beat in seconds: ``beat`` of ``wlc.config``, else ``master.beat`` of config."""
        return self.record.beat_seconds

    @property
    def lifecycle(self) -> Lifecycle:
        """The :class:`wlc.lifecycle.Lifecycle` of this master's folders."""
        return self.cycle.lifecycle

    def table_path(self, name: str) -> str:
        """The URI of master table ``name``'s folder, as Spark reads it (for ``df.write.save(...)``).

        Args:
            name: ``"schema.table"`` (a part holding ``.`` in backticks).

        Raises:
            ConfigError: the name is not two parts, or a part would leave the database folder.
        """
        schema, table = split_name(name)
        return self.storage.uri(Storage.join(self.path, schema, table))

    def attach(self) -> "Master":
        """Use this master's tables by name in this process without capturing here
        (a writer application; the capturing process may be another one).

        Raises MasterStateError: the database is not a master (call :func:`wlc.master` first)
        or it stopped logging (its new writes would not be captured)."""
        self.setup.attach()
        self.register_catalog()
        return self

    # ------------------------------------------------------------------ life cycle
    def start(self) -> "Master":
        """Put the database in master mode (or resume capture of one already there).

        Everything is checked before anything is written; a refused call leaves the
        filesystem as it was and a running capturer untouched.

        Raises:
            MasterStateError: the master was stopped (state=2): a new snapshot is needed, as in
                MonetDB; the database is a replica; another process is capturing it.
            ConfigError: ``logs`` is empty or names a file; the database folder is a file.
        """
        self.validate()
        if self._want_capture:  # a port taken elsewhere is refused before anything is written
            self.metrics_port = metrics.serve(self.metrics_port) if self.metrics_port is not None else None
        created = not self.storage.exists(self.path)
        self.setup.take_lock()
        try:
            state, last = self.setup.begin()
            self.capture, self.publisher = self.setup.capture_parts(self.spark, self.timing, state, last)
            self.register_catalog()
            if self._want_capture:
                self.background.start(
                    CaptureThread(self.publisher, self.catalog, self.record, self.timing, self._lock),
                    AutoLifecycle(self.cycle, max(5 * self.poll_interval, 1.0)),
                )
        except BaseException:
            self.setup.release_lock()
            self.setup.undo(created)  # nothing of a refused new master stays behind
            raise
        return self

    def create(self, beat: float | None = None) -> int:
        """Put the database in master mode without capturing: ``wlc master`` on the command line,
        MonetDB's ``CALL wlc.master()``. A deliberate step, done once; :meth:`start` (``wlc capture``)
        then captures. Spark starts only when the database holds tables (copied into the first snapshot).

        Args:
            beat: the heartbeat in seconds to record (default ``master.beat`` of config).

        Returns:
            int: the number of tables in the first snapshot (0: replicas start empty).

        Raises:
            NotFoundError: the dbfarm does not exist.
            ConfigError: ``logs`` or ``beat`` is malformed, or the database folder is a file.
            MasterStateError: the database is already a master or a replica, or another process
                holds its capture lock.
        """
        return self.setup.create(beat)

    @property
    def running(self) -> bool:
        """True from start() until close(): this object holds the capture lock (or its thread runs)."""
        return self.setup.lockfile is not None or self.background.alive

    def validate(self) -> MasterState | None:
        """Check, without changing anything, that ``start()`` may proceed; returns the existing wlc.config.

        Raises:
            ConfigError: ``logs`` is empty, or the database or log folder is a file.
            MasterStateError: the database is a replica, or a stopped master, or logs elsewhere."""
        return self.setup.validate()

    def _step(self, take_all: bool) -> bool:
        """One scan of the publisher (:meth:`Publisher.step`); True when commits were left for a later scan."""
        if self.publisher is None:
            raise MasterStateError(f"this wlc.Master of {self.dbname!r} never started capturing: call wlc.master()")
        return self.publisher.step(take_all)

    def not_replicated(self) -> dict[str, str]:
        """Delta tables in the database that capture cannot carry: ``{path: reason}`` (empty: none)."""
        return self.notes.not_replicated()

    # ------------------------------------------------------------------ public API
    def beat(self, seconds: float) -> None:
        """Set the heartbeat: a batch is published ``seconds`` after its first record (0: one batch per
        transaction). Raises ConfigError: ``seconds`` is negative or not a number."""
        value = number(seconds, "beat")
        with self._lock:
            self.setup.check_started()
            self.config.beat = value
            self.record.save()
        self.background.wake()

    def flush(self) -> int:
        """Capture every commit made before this call and publish the open batch now.

        Returns the id of the last transaction published (-1: none yet). Warns
        (:class:`wlc.NotReplicatedWarning`) naming every Delta table of the database that
        cannot be replicated, and why, and (:class:`wlc.ChangeFeedWarning`) every version
        since the last flush that Delta's change feed could not describe (vacuumed change
        files, commits removed by log clean-up, the feed switched off) and how it was carried.

        Raises:
            MasterStateError: the master was stopped.
            BatchError: the batch could not be published (its name is taken); its
                transactions stay staged with their ids and the next flush tries again.
        """
        with self._lock:
            self.setup.check_started()
            self._step(take_all=True)
            if self.capture is not None and self.capture.switched:  # capture's own commits (switching a feature on)
                self._step(take_all=True)
            tick = self.config.tick
        self.notes.warn()
        return tick

    def stop(self) -> None:
        """Flush, then stop logging for good (state=2). MonetDB: the end of life of the snapshot."""
        with self._lock:
            if self.state == STOPPED:
                return
            self.setup.check_started()
            self._step(take_all=True)
            self.config.state = STOPPED
            self.config.watermark = WATERMARK_STOPPED
            self.record.save()
        self.close()

    def close(self) -> None:
        """Stop this process's capture thread and shippers (the database stays in master mode)."""
        self.ship_stop()
        if self.background.stop() and self.setup.lockfile is not None:  # a clean stop: status shows "stopped"
            with self._lock:
                self.config.capture_stopped = utcnow()
                self.record.save()
        self.setup.release_lock()

    def clock(self) -> datetime | None:
        """Commit time (UTC) of the last published transaction (:meth:`tick`'s; MonetDB's
        ``wlc.clock()``), or None when none was published."""
        with self._lock:
            last = self.publisher.last_published if self.publisher is not None else None
            return last.time if last else self.config.write

    def last_logged(self) -> int:
        """Id of the last *logged* transaction (captured into a batch, published or still open), -1 when
        none; it may run ahead of :meth:`tick`, the last published one."""
        with self._lock:
            last = self.publisher.last_logged if self.publisher is not None else None
            return last.txn if last else -1

    def tick(self) -> int:
        """Id of the last *published* transaction, as ``wlc.config``'s ``tick`` (-1: none; MonetDB's
        ``wlc.tick()``): what replicas can reach and status shows, as a replica's ``tick()`` is its
        last applied one. The last logged one (maybe in a batch still open) is :meth:`last_logged`."""
        with self._lock:
            return self.config.tick

    # ------------------------------------------------------------------ life cycle, catalog, shipping
    def snapshot(self) -> Start:
        """Flush, then snapshot the last published transaction T while capture goes on
        (``wlc_snapshot/<T>/``: each table copied at its Delta version holding exactly the
        transactions <= T, so it survives VACUUM of the master). Cost: one Spark copy of every table.

        Returns the snapshot (``txn`` T, ``time`` its commit time, ``path``); the newest one
        when nothing was published since. New replicas start from the newest at or before their target.

        Raises:
            MasterStateError: the master is stopped or not capturing here; a table is no longer
                readable at its version."""
        self.flush()
        return self.cycle.snapshot()

    def note_snapshot(self, start: Start) -> None:
        """Name the newest snapshot ``start`` in ``wlc.config`` (``snapshot``) and in ``wlc.log``."""
        self.cycle.note_snapshot(start)

    def snapshots(self) -> list[Start]:
        """Every snapshot of this master, oldest first (``txn``, ``time``, ``batch``, ``path``)."""
        return self.cycle.snapshots()

    def compact(self, level1: float | str | None = None, level2: float | str | None = None) -> list[Span]:
        """Merge published batches into level-1 and level-2 batches, as many as are due.

        Args:
            level1: override ``master.compact.level1``: a duration (seconds, ``"1h"``, ``"1d"``:
                the batches of each UTC-aligned window, once it is over) or ``"<n> batches"``.
            level2: override ``master.compact.level2``, of the same kinds as ``level1``.

        Returns the batches made (spans: ``level``, ``first_txn``, ``last_txn``, ``path``); the
        level-0 batches stay until :meth:`prune` deletes them.

        Raises:
            ConfigError: a malformed interval; BatchError: an input batch is damaged."""
        return self.cycle.compact(level1, level2)

    def prune(self, dry_run: bool = False, now: datetime | None = None, keep: dict | None = None) -> PruneReport:
        """Delete the batches and snapshots ``master.retention`` no longer promises: never one a
        kept snapshot's path to a promised recovery point uses.

        Args:
            dry_run: only report what would be deleted.
            now: the instant (UTC) retention counts back from; default now.
            keep: retention instead of ``master.retention``: ``{"level0": "1d", "level1": "30d", "level2":
                "365d", "snapshots": "365d"}`` (durations as in config; left out or ``"off"``: forever).

        Returns a :class:`PruneReport` (``deleted``, ``bytes_freed``, ``lines()``: the earliest
        reachable transaction and instant, the granularity by age). Raises ConfigError: a malformed retention."""
        return self.cycle.prune(dry_run=dry_run, now=now, keep=keep)

    def create_schema(self, schema: str) -> str:
        """Register SQL schema ``schema`` at ``<db>/<schema>`` in the session catalog (``CREATE TABLE
        <schema>.<t>`` then lives in the master's layout; ``DROP TABLE`` removes its folder, a drop).
        Returns the schema name. Raises ConfigError: not a plain identifier, or the catalog has a
        schema of that name elsewhere."""
        return self.catalog.create_schema(schema)

    def register_catalog(self) -> dict[str, str]:
        """Register every schema folder of the database, and its Delta tables, in this process's
        session catalog (:mod:`wlcore.catalog`); :func:`wlc.master` and :func:`wlc.attach` call it,
        again to see what other processes made since. Returns ``{schema folder: reason}`` left out."""
        return self.catalog.register()

    def ship(self, to: str, follow: bool = False) -> ShipReport | Shipper:
        """Copy this master's published batches and snapshots to ``to`` (see :mod:`wlcore.ship`).

        Args:
            to: another local folder or mount, or ``s3://bucket/path`` (endpoint and keys from
                ``storage.s3`` in config); replicas read it with ``wlr.replicate(master, logs=to)``.
            follow: False: one pass, after a flush when this process captures. True: one pass now,
                then keep shipping whenever a batch is published, until :meth:`ship_stop` or :meth:`close`.

        Returns:
            ShipReport (one pass: batches, snapshots, bytes, seconds), or, following, the Shipper (report, stop()).

        Raises:
            ShipError: the destination holds another database's copy, or a batch did not verify there."""
        if self.running:
            self.flush()
        return self.shipping.ship(to, follow)

    def ship_stop(self, to: str | None = None) -> None:
        """Stop following shippers: the one to ``to`` (a destination folder or URL), or all (None)."""
        self.shipping.stop(to)

    def __repr__(self) -> str:
        return f"<wlc.Master {self.dbname!r} at {self.path} state={self.state} tick={self.tick()}>"


class MasterSetup:
    """The set-up of one master: :meth:`validate`, the capture lock, :meth:`create` and :meth:`initialise`
    (a new master), :meth:`restore` (a resumed one).

    Args:
        record (MasterRecord): the master's ``wlc.config`` and ``wlc.log`` (set and saved here).
        notes (TableNotes): the master's notes on its tables (tables not replicated, held).
        dbfarm (str): the dbfarm folder (in messages).
        logs (str | None): the log folder asked for (None: the default ``<db>/wlc_logs``, or what
            ``wlc.config`` names).
        spark (LateSession): the master's Spark session (called only when the new
            master holds tables to copy).
    """

    def __init__(self, record: MasterRecord, notes: TableNotes, dbfarm: str, logs: str | None, spark: LateSession):
        self.record = record
        self.notes = notes
        self.storage = record.storage
        self.path = record.path
        self.dbname = record.dbname  # the database's name (a promoted master's folder has another)
        self.folder = posixpath.basename(self.path.rstrip("/"))
        self.dbfarm = dbfarm
        self.logs_arg = logs
        self.spark = spark
        self.lockfile: HeldLock | None = None  # <db>/wlc.lock while this object holds it
        self.made_logs: str | None = None  # the log folder initialise() made outside the database folder
        self._made_top: str | None = None  # the outermost folder initialise() made for the logs

    def check_started(self) -> None:
        """Check that this object holds the capture lock of a master still logging.

        Raises:
            MasterStateError: it is not capturing (closed, or never started), or the master
                stopped logging (state=2).
        """
        if self.lockfile is None:
            raise MasterStateError(
                f"this wlc.Master of {self.dbname!r} is not capturing (closed, or never started): "
                "call wlc.master() again"
            )
        if self.record.config.state != STARTED:
            raise MasterStateError(f"database {self.dbname!r} has stopped logging (state=2)")

    def attach(self) -> None:
        """Read ``wlc.config`` of a master another process may capture (see :meth:`wlc.Master.attach`).

        Raises:
            MasterStateError: the database is not a master, or it stopped logging.
        """
        dbs = Dbfarm(self.dbfarm)
        dbs.require_master(self.folder)  # names what it is and the nearest masters
        existing = read_master_state(self.storage, self.path)
        if existing is None:  # its wlc.config went away since
            raise MasterStateError(
                f"database {self.dbname!r} in {self.dbfarm} lost its wlc.config while being attached; check the folder"
            )
        self.record.config = existing
        self.record.check_current(existing)  # writes to a fenced or superseded folder are lost
        if existing.state != STARTED:
            raise MasterStateError(
                f"database {self.dbname!r} has stopped logging (state=2): writes to it are "
                "not captured any more; take a new snapshot with wlc.master() on a new database",
                cli=f"database {self.dbname!r} has stopped logging (state=2): writes to it are "
                "not captured any more; take a new snapshot with: wlc capture "
                f"{self.dbfarm} <new database>",
            )

    def take_lock(self) -> None:
        """Hold ``<db>/wlc.lock`` (:meth:`wlcore.logstore.LogStore.lock`) for as long as this process
        captures the database.

        Raises:
            MasterStateError: another process holds it; nothing was changed.
            LockUnsupportedError: the storage can hold no lock.
        """
        lock_path = Storage.join(self.path, LOCK_FILE)
        try:
            self.lockfile = self.record.store.lock(f"capture of {self.path}")
        except LockHeldError:
            raise MasterStateError(
                f"another process is capturing {self.path} (it holds {lock_path}); stop it or use that process"
            ) from None

    def release_lock(self) -> None:
        """Let go of ``<db>/wlc.lock`` (nothing when it is not held)."""
        if self.lockfile is not None:
            self.lockfile.release()
            self.lockfile = None

    def create(self, beat: float | None = None) -> int:
        """Put the database in master mode without capturing (see :meth:`wlc.Master.create`).

        Args:
            beat: the beat in seconds to record (None: ``master.beat`` of config).

        Returns:
            int: the number of tables in the first snapshot.

        Raises:
            MasterStateError: the database is already a master or a replica, or another
                process holds its capture lock.
            ConfigError: ``logs`` or ``beat`` is malformed, or the database folder is a file.
        """
        value = number(beat, "beat") if beat is not None else None
        if self.validate() is not None:
            raise MasterStateError(
                f"database {self.dbname!r} is already a master; capture it with wlc.master({self.dbname!r})",
                cli=f"database {self.dbname!r} is already a master; capture "
                f"it with: wlc capture {self.dbfarm} {self.dbname}",
            )
        created = not self.storage.exists(self.path)
        self.take_lock()
        try:
            if read_master_state(self.storage, self.path) is not None:  # made by another process meanwhile
                raise MasterStateError(f"database {self.dbname!r} became a master meanwhile (another process)")
            state = self.initialise()
            if value is not None:
                self.record.config.beat = value
                self.record.save()
            return len(state.tables)
        except BaseException:
            self.undo(created)
            raise
        finally:
            self.release_lock()

    def undo(self, created: bool) -> None:
        """Remove what a new master's set-up made when it failed before writing ``wlc.config``:
        the database folder when ``created`` (bool: it did not exist before), and the log folder
        made for it (with the folders made above it)."""
        if read_master_state(self.storage, self.path) is not None:
            return
        if created:
            self.storage.rm(self.path)  # nothing of a refused new master stays behind
        if self._made_top is not None and self.storage.exists(self._made_top):
            self.storage.rm(self._made_top)
        self._made_top = self.made_logs = None

    def validate(self) -> MasterState | None:
        """Check, without changing anything, that ``start()`` may proceed; returns the existing wlc.config.

        Raises:
            ConfigError: ``logs`` is empty, or the database or log folder is a file.
            MasterStateError: the database is a replica, or a stopped master, or logs elsewhere.
        """
        if self.logs_arg is not None and not str(self.logs_arg).strip():
            raise ConfigError(
                "logs='' is not a folder: pass a folder path for the logs, or leave logs out "
                "to log into <dbfarm>/<dbname>/wlc_logs",
                cli="--logs '' is not a folder: give a folder for the logs, or leave --logs out "
                "to log into <dbfarm>/<dbname>/wlc_logs",
            )
        if self.storage.exists(self.path) and not self.storage.isdir(self.path):
            raise ConfigError(f"{self.path} is a file, not a database folder; choose another database name")
        if self.storage.exists(Storage.join(self.path, REPLICA_CONFIG_FILE)):
            raise MasterStateError(
                f"database {self.dbname!r} is a replica (it has {REPLICA_CONFIG_FILE}); a replica cannot become a "
                "master: write to its master, or make a new database for a new master"
            )
        existing = read_master_state(self.storage, self.path)
        if existing is not None:
            if existing.stopped:
                msg = (
                    f"database {self.dbname!r} stopped logging (wlc.config state=2); a stopped master can only "
                    "return to master mode from a fresh snapshot: move wlc.config and wlc_logs aside, then "
                )
                raise MasterStateError(
                    msg + "call master() again", cli=msg + f"run wlc master {self.dbfarm} {self.dbname} again"
                )
            check_paths(self.storage, self.path, existing)  # a folder moved with absolute paths in it
            logs = logs_of(existing, self.path)
            self.check_writable(logs, "the log folder")
            if self.logs_arg is not None and os.path.abspath(str(self.logs_arg)) != os.path.abspath(logs):
                raise MasterStateError(
                    f"database {self.dbname!r} already logs to {logs}, not {self.logs_arg}; "
                    "call master() without logs=",
                    cli=f"database {self.dbname!r} already logs to {logs}, not "
                    f"{self.logs_arg}; run wlc capture without --logs",
                )
        elif (
            self.logs_arg is not None
            and self.storage.exists(str(self.logs_arg))
            and not self.storage.isdir(str(self.logs_arg))
        ):
            raise ConfigError(
                f"logs={self.logs_arg!r} is a file, not a folder; pass a folder for the logs",
                cli=f"--logs {self.logs_arg!r} is a file, not a folder; give a folder for the logs",
            )
        else:
            self.check_writable(self.path, "the database folder")
            if self.logs_arg is not None:
                self.check_writable(str(self.logs_arg), "the log folder")
        return existing

    def check_writable(self, folder: str, what: str) -> None:
        """Check that ``folder`` can be written, or made where it is missing (local folders; an
        object store says so at the first write).

        Args:
            folder (str): the folder.
            what (str): what it is, in the message (``the log folder``).

        Raises:
            NotWritableError: the folder, or the nearest folder above it that exists, is read-only
                for this process, or is a file; nothing was changed.
        """
        local = self.storage.os_path(folder)
        if local is None:
            return
        probe = local
        while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
            probe = os.path.dirname(probe)
        if os.path.isdir(probe):
            effective = os.access in os.supports_effective_ids
            if os.access(probe, os.W_OK | os.X_OK, effective_ids=effective):
                return
            fix = f"make {probe} writable (chmod u+w {probe})"
            problem = (
                f"{what} {local} is read-only for this user"
                if probe == local
                else f"{what} {local} cannot be made: {probe}, the nearest folder above it, is read-only for this user"
            )
        else:
            fix = f"move the file {probe} aside"
            problem = (
                f"{what} {local} is a file, not a folder"
                if probe == local
                else f"{what} {local} cannot be made: {probe} is a file, not a folder"
            )
        if what == "the log folder" and self.logs_arg is not None:
            raise NotWritableError(
                f"{problem}; {fix}, or pass logs= a folder you can write",
                cli=f"{problem}; {fix}, or give --logs a folder you can write",
            )
        raise NotWritableError(
            f"{problem}; {fix}, or pass dbfarm= a folder you can write",
            cli=f"{problem}; {fix}, or name a dbfarm you can write",
        )

    def begin(self) -> tuple[CaptureState, TxnRecord | None]:
        """Under the capture lock: resume the master (warning that nothing changed) or make it,
        start a capture session (:func:`wlcore.epochs.start_session`), clear stale staging.

        Returns:
            ``(where capture starts, the last transaction published or None)``.

        Raises:
            MasterStateError, ConfigError: as :meth:`validate`, :meth:`restore`.
        """
        existing = read_master_state(self.storage, self.path)  # again, now that the lock is ours
        self.record.check_current(existing)  # fenced, or a promotion it missed
        if existing is not None:
            self.record.config = existing
            self.validate()
            warnings.warn(
                f"database {self.dbname!r} is already in master mode; nothing changed "
                "(capture resumes where it stopped)",
                stacklevel=4,
            )  # the caller of wlc.master() or Master.start()
            state, last = self.restore()
        else:
            state, last = self.initialise(), None
        self.record.note(epochs.start_session(self.record.config))  # a restored copy writes in an epoch of its own
        self.record.save()
        self.record.store.clear_staging()  # ours alone: we hold the lock
        return state, last

    def capture_parts(
        self, spark: Any, timing: CaptureTiming, state: CaptureState, last: TxnRecord | None
    ) -> tuple[Capture, Publisher]:
        """Capture and its publisher, from where :meth:`begin` says capture starts.

        Args:
            spark (SparkSession): the session capture reads change rows with.
            timing (CaptureTiming): capture's timing (seconds); its poll interval and
                ``retry_max`` are the backoff of held tables (:class:`wlc.capture.Holds`).
            state (CaptureState): capture's cursors (:meth:`begin`).
            last (TxnRecord | None): the last transaction published (None: none).

        Returns:
            tuple[Capture, Publisher]: the scanner and the open batch it stages into.
        """
        capture = Capture(spark, self.record, state, Holds(timing.poll_interval, timing.retry_max))
        return capture, Publisher(capture, self.record, self.notes, timing, last)

    def initialise(self) -> CaptureState:
        """Make a new master: its log folder, its id, the first snapshot of the tables it holds,
        ``wlc.config``; the Delta tables capture cannot carry are noted (``not_replicated``).

        Returns:
            CaptureState: where capture starts.
        """
        logs = str(self.logs_arg) if self.logs_arg is not None else Storage.join(self.path, "wlc_logs")
        logs = self.storage.absolute(logs)
        probe = self.storage.os_path(logs)  # local folders: the outermost one made is removed on failure
        while probe is not None and not os.path.lexists(probe):
            self._made_top, probe = probe, os.path.dirname(probe)
        self.storage.makedirs(logs)
        if self._made_top is not None and self.logs_arg is not None:
            self.made_logs = logs
        dbid = uuid.uuid4().hex
        refused: dict[str, str] = {}
        tables = discover_tables(self.storage, self.path, {os.path.basename(logs)}, refused)
        snapshot = ""
        state = CaptureState()
        if tables:
            snapshot = snap.folder_of(self.path, -1)
            capture = Capture(self.spark(), self.record, state)  # a new master: no watermark yet
            # what capture switches on is on before the snapshot: its versions need no image later
            capture.enable_capture_properties({n: capture.start_cursor(p)[0] for n, p in tables.items()})
            starts = {n: capture.start_cursor(p) for n, p in tables.items()}
            versions = {n: c.version for n, (c, _meta) in starts.items()}
            metas = {n: meta for n, (_c, meta) in starts.items()}
            state.tables = snap.take(
                snap.copy_session(self.spark()), self.storage, self.path, snapshot, tables, versions, metas, dbid
            )
            for n, (c, _meta) in starts.items():
                state.tables[n].time = c.time
            self.storage.mark_published(snapshot)  # written in place: its commit marker where stores need one
        self.record.config = MasterState.of(
            snapshot=snapshot,
            logs=logs,
            state=STARTED,
            batches=0,
            beat=self.record.default_beat,
            write=None,
            dbid=dbid,
            format=batchfmt.FORMAT_VERSION,
            tick=-1,
            watermark=None,
            created=utcnow(),
            not_replicated={},
        )
        self.record.save()
        if self.made_logs is not None:
            self.record.note(f"made the log folder {self.made_logs}")
        self.notes.refused(refused)
        return state

    def restore(self) -> tuple[CaptureState, TxnRecord | None]:
        """Where capture of a master that captured before resumes: the cursors of its newest
        published batch (or of its snapshot), and the last transaction published (None: none).

        Raises:
            MasterStateError: the newest batch in the log folder is unreadable or another master's.
        """
        cfg = self.record.config
        published = self.record.store.batches()
        promoted = resume_point(read_start(self.storage, self.path), published[-1].number if published else None)
        if promoted is not None:  # a promoted replica: its tables' versions, not the old master's cursors
            return promoted, None
        if published:
            number, path = published[-1].number, published[-1].path
            try:
                manifest = self.record.store.manifest(published[-1])
            except BatchError as exc:
                raise MasterStateError(
                    f"capture resumes from the newest batch, and {path} is not a readable batch "
                    f"({exc}); move it out of {self.record.logs} if it is not this master's, or "
                    "restore it from a copy, then start capture again"
                ) from None
            if (manifest.database, manifest.batch, manifest.dbid) != (self.dbname, number, cfg.dbid):
                raise MasterStateError(
                    f"capture resumes from the newest batch, and {path} holds batch {manifest.batch} of database "
                    f"{manifest.database!r} (id {manifest.dbid}), not batch {number} of this master (id "
                    f"{cfg.dbid}); move that folder out of {self.record.logs}, then start capture again"
                )
            state = manifest.cursors.copy()
            state.next_batch = number + 1
            last = manifest.txns[-1] if manifest.txns else None
            cfg.batches, cfg.tick = number + 1, manifest.last_txn
            cfg.write = manifest.txns[-1].time if manifest.txns else cfg.write
            self.record.save()
            return state, last
        if cfg.snapshot:
            return CaptureState(snap.read(self.storage, cfg.snapshot).tables, 0, 0), None
        return CaptureState(), None


catalog_log = logging.getLogger("wlc.catalog")


class MasterCatalog:
    """The catalog calls of one :class:`wlc.Master`: its schema folders in the Spark session catalog.

    Args:
        spark: the master's Spark session (made when a catalog call needs it: Spark starts late).
        record: the master's ``wlc.config`` (its folder, and its log folder: not a schema).
        timing: capture's timing: its poll interval is the seconds between two looks at Spark's
            warehouse folder (at least 1).
    """

    def __init__(self, spark: LateSession, record: MasterRecord, timing: CaptureTiming):
        self._spark = spark
        self.record = record
        self.storage = record.storage
        self.path = record.path
        self.dbname = posixpath.basename(record.path.rstrip("/"))  # the folder's name (in warnings)
        self._timing = timing
        self._known_schemas: set[str] | None = None  # schemas in Spark's warehouse folder already seen
        self._warehouse: str | None = None
        self._schemas_checked = float("-inf")  # time.monotonic() of that look

    def create_schema(self, schema: str) -> str:
        """Register SQL schema ``schema`` located at ``<db>/<schema>`` in the session catalog.

        Tables made with ``CREATE TABLE <schema>.<t>`` then live in the master's layout
        and ``DROP TABLE`` removes their folder (which capture records as a drop).

        Args:
            schema (str): the schema's name, a plain identifier.

        Returns:
            str: ``schema``.

        Raises:
            ConfigError: ``schema`` is not a plain identifier, or this session's catalog
                has a schema of that name elsewhere.
        """
        return create_schema(self._spark(), self.storage, self.path, schema)

    def register(self) -> dict[str, str]:
        """Register every schema folder of the database, and the Delta tables in them, in
        this process's session catalog (:mod:`wlcore.catalog`); :func:`wlc.master` and
        :func:`wlc.attach` call it. Call it again to see schemas and tables other
        processes made since. Returns ``{schema folder: reason}`` for folders left out, and
        ``{"schema.table": reason}`` for tables whose names the session catalog does not take.
        """
        spark = self._spark()
        left_out = register(spark, self.storage, self.path, self.record.skip_schemas())
        self._warehouse = warehouse_folder(spark)
        self._known_schemas = warehouse_schemas(self._warehouse)
        return left_out

    def check_schemas(self) -> None:
        """Warn, once each, about schemas made in Spark's own warehouse while capturing (a
        ``CREATE SCHEMA`` without a location: its tables would not be captured)."""
        if (
            self._known_schemas is None
            or self._warehouse is None
            or time.monotonic() - self._schemas_checked < max(self._timing.poll_interval, 1.0)
        ):
            return
        self._schemas_checked = time.monotonic()
        found = warehouse_schemas(self._warehouse)
        for name in sorted(found - self._known_schemas):
            text = (
                f"schema {name!r} was made at {os.path.join(self._warehouse, name + '.db')}, outside master "
                f"{self.dbname!r}: its tables are not captured; make master schemas with "
                f"Master.create_schema({name!r}) (e.g. wlc.current().create_schema({name!r})) or "
                f"CREATE SCHEMA ... LOCATION '<db>/{name}'"
            )
            catalog_log.warning(text)
            warnings.warn(text, stacklevel=2)
        self._known_schemas |= found


class MasterShipping:
    """The shippers of one :class:`wlc.Master` (MonetDB's log-shipping agent): one pass, or
    following shippers kept by destination until :meth:`stop`.

    Args:
        storage: the storage of the dbfarm.
        path: the database folder.
        dbname: the database name.
    """

    def __init__(self, storage: Storage, path: str, dbname: str):
        self.storage = storage
        self.path = path
        self.dbname = dbname
        self._shippers: dict[str, Shipper] = {}  # {destination root: its following shipper}

    def ship(self, to: str, follow: bool = False) -> ShipReport | Shipper:
        """Copy the master's published batches and snapshots to ``to`` (see :meth:`wlc.Master.ship`).

        Args:
            to: destination folder or URL (another folder or mount, or ``s3://bucket/path``).
            follow: False: one pass; True: one pass now, then keep shipping in a background
                thread whenever a batch is published, until :meth:`stop`.

        The destination is noted in ``<db>/wlc.copies``: ``wlc prune`` prunes it by its own retention.

        Returns:
            ShipReport (one pass), or, following, the :class:`Shipper`.

        Raises:
            ShipError: the destination holds another database's copy, or a batch did not
                verify there (nothing unverified is published; ship again).
        """
        shipper = Shipper(self.storage, self.path, self.dbname, to)
        report = shipper.once()
        add_copy(self.storage, self.path, to)  # wlc prune prunes it too
        if not follow:
            return report
        if shipper.to in self._shippers:
            self._shippers.pop(shipper.to).stop()
        self._shippers[shipper.to] = shipper.follow()
        return shipper

    def stop(self, to: str | None = None) -> None:
        """Stop following shippers (each after the pass under way).

        Args:
            to (str | None): the destination of the one to stop (None: all).
        """
        for url in [u for u in self._shippers if to is None or u == dest_root(to)]:
            self._shippers.pop(url).stop()


log = logging.getLogger("wlc.master")
# seconds between two scans that read every table's log although the database folder's watcher
# saw no change (the operating system may drop events when its queue overflows)
FULL_SCAN = 30.0


def retry_wait(attempt: int, interval: float, most: float) -> float:
    """Seconds capture waits after its ``attempt``-th failed scan in a row: the poll interval
    doubled at every attempt, at most ``most`` (``capture.retry_max``; by default 1, 2, 4 ... 60 s),
    as a held table's reads and a follower's retries back off.

    Args:
        attempt (int): failed scans in a row (1: the first).
        interval (float): ``capture.poll_interval``.
        most (float): ``capture.retry_max``.
    """
    first = max(0.01, float(interval))
    return min(max(first, float(most)), first * 2.0 ** max(0, attempt - 1))


class CaptureThread:
    """The capture thread of one master (a daemon), from :meth:`start` until :meth:`stop`.

    Args:
        publisher: the master's open batch (stages and publishes).
        catalog: the master's catalog calls (warns about schemas made outside the master).
        record: the master's ``wlc.config`` (the thread ends once its ``state`` is not started).
        timing: capture's timing (settle, polling, poll interval; seconds).
        lock: the master's lock, held during each scan.
    """

    def __init__(
        self,
        publisher: Publisher,
        catalog: MasterCatalog,
        record: MasterRecord,
        timing: CaptureTiming,
        lock: threading.RLock,
    ):
        self.publisher = publisher
        self.catalog = catalog
        self.record = record
        self.timing = timing
        self.lock = lock
        self.path = record.path
        self._stop = threading.Event()
        self._watch: FolderWatch | None = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None  # what the last scan raised (None: it went well)
        self.metrics = CaptureMetrics(publisher, record)  # Prometheus, while capturing

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Watch the database folder where the storage can (:meth:`Storage.watcher`; else
        scans are polled) and start the thread."""
        self._watch = self.record.storage.watcher(
            self.path,
            recursive=True,
            polling=self.timing.polling,
            interval=self.timing.poll_interval,
            accept=self.relevant_event,
            skip=tuple(RESERVED),  # batches and snapshots: capture's own, thousands of folders
        )
        # local folders watched by events: a log folder's modification time tells whether it changed
        self.publisher.capture.quiet.on = self._watch is not None and not self.timing.polling
        for key in ("capture_error", "capture_error_since"):  # an earlier session's: this one says its own
            self.record.config.drop(key)
        self._thread = threading.Thread(target=self._run, name=f"wlc-capture-{self.record.dbname}", daemon=True)
        self.metrics.start(self._thread)
        self._thread.start()

    def wake(self) -> None:
        """Scan now rather than at the end of the current wait."""
        if self._watch is not None:
            self._watch.wake()

    def stop(self) -> None:
        """End the thread (its current scan ends first) and stop watching."""
        self._stop.set()
        self.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()  # its current scan ends first: the capture lock must outlive it
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self.metrics.stop()

    def relevant_event(self, path: str) -> bool:
        """True for a commit, or a schema or table folder made or removed; never capture's own files.

        Args:
            path (str): the path a folder event names.
        """
        if "_delta_log" in path:
            return True
        if path.rstrip(os.sep) == self.path.rstrip(os.sep):
            return False  # the folder itself "modified": a file in it was, and that file's own event decides
        if path.count(os.sep) > self.path.count(os.sep) + 2:
            return False  # data files: their commit wakes us
        name = os.path.basename(path)
        return not (
            os.path.dirname(path) == self.path.rstrip(os.sep)
            and (name in (CONFIG_FILE, LOCK_FILE, LOG_FILE) or name.startswith(f".{CONFIG_FILE}."))
        )

    def _failed(self, exc: BaseException) -> None:
        """Say in ``wlc.config`` why capture fails (``capture_error``, ``capture_error_since``),
        with a heartbeat: capture is alive, and ``wlc status`` shows the failure. A
        ``wlc.config`` that cannot be written either is left as it is (the log has the line)."""
        cfg = self.record.config
        try:
            with self.lock:
                cfg.capture_error = " ".join(f"{type(exc).__name__}: {exc}".split())
                if cfg.capture_error_since is None:
                    cfg.capture_error_since = utcnow()
                cfg.heartbeat = utcnow()
                cfg.drop("capture_stopped")
                self.record.save()
        except Exception:
            log.debug("wlc.config of %s could not say why capture fails", self.record.dbname, exc_info=True)

    def _recovered(self, failures: int) -> None:
        """A scan went well after ``failures`` failed ones: ``wlc.log`` says so and
        ``wlc.config`` no longer names the failure."""
        with self.lock:
            self.record.note(f"capture works again after {failures} failed attempts")
            self.record.config.drop("capture_error")
            self.record.config.drop("capture_error_since")
            self.record.save()

    def _run(self) -> None:
        look, looked = True, time.monotonic()
        failures = 0  # scans failed in a row
        while not self._stop.is_set():
            timeout = self.timing.poll_interval
            deferred = False
            try:
                with self.lock:
                    if self.record.config.state != STARTED:
                        return
                    deferred = self.publisher.step(take_all=False, look=look)
                    looked = time.monotonic() if look else looked
                    due = self.publisher.due_in()
                    self.publisher.heartbeat()
                self.catalog.check_schemas()
                if deferred:
                    timeout = min(timeout, self.timing.settle)
                if due is not None:
                    timeout = min(timeout, max(due, 0.0))
                self.error = None
                if failures:
                    self._recovered(failures)
                    failures = 0
            except Exception as exc:  # keep capturing; the next scan retries from the same cursors
                self.error = exc
                self.metrics.error(type(exc).__name__)
                failures += 1
                timeout = retry_wait(failures, self.timing.poll_interval, self.timing.retry_max)
                log.error(
                    "capture of %s failed (attempt %d; tried again in %g s)",
                    self.record.dbname,
                    failures,
                    timeout,
                    exc_info=True,
                )
                self._failed(exc)
            if self.error is not None or self._watch is None:
                changed = self._stop.wait(timeout)  # a failure's backoff holds whatever the folder does
            else:
                changed = self._watch.wait(timeout)
            # the logs are read again after an event, a scan that left commits for later, a failed
            # or held read, and at least every FULL_SCAN seconds (an event the OS dropped)
            look = (
                changed
                or deferred
                or self.error is not None
                or bool(self.publisher.capture.holds.held)
                or self._watch is None
                or not self._watch.live
                or time.monotonic() - looked >= FULL_SCAN
            )


class Background:
    """The threads of a capturing master, from :meth:`start` (:meth:`wlc.Master.start`) until
    :meth:`stop` (:meth:`wlc.Master.close`): the capture thread and, when the settings ask for
    one, the background life cycle (:class:`wlc.lifecycle.AutoLifecycle`)."""

    def __init__(self) -> None:
        self.capture: CaptureThread | None = None  # from start() on
        self.auto: AutoLifecycle | None = None  # while running, when the settings ask for one

    @property
    def alive(self) -> bool:
        """True while the capture thread runs."""
        return self.capture is not None and self.capture.alive

    def start(self, capture: CaptureThread, auto: AutoLifecycle) -> None:
        """Start ``capture``, then ``auto`` when the settings ask for it (:attr:`AutoLifecycle.wanted`)."""
        self.capture = capture
        capture.start()
        if auto.wanted:
            self.auto = auto
            auto.start()

    def wake(self) -> None:
        """Have the capture thread scan now (nothing when none was started)."""
        if self.capture is not None:
            self.capture.wake()

    def stop(self) -> bool:
        """Stop the background life cycle, then the capture thread (its current scan ends first).

        Returns:
            bool: True when a capture thread was started (its stop is a clean stop to record).
        """
        if self.auto is not None:
            self.auto.stop()
            self.auto = None
        if self.capture is not None:
            self.capture.stop()
        return self.capture is not None
