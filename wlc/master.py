"""Master mode: ``wlc.config``, the capture thread, the heartbeat and the module-level state.

The master's state file ``<db>/wlc.config`` has MonetDB's keys (``snapshot``, ``logs``,
``state`` 1 started / 2 stopped, ``batches`` next batch number, ``beat`` seconds,
``write`` time of the last transaction recorded) plus ``dbid`` (the database id in every
GTID), ``format`` (batch format version), ``tick`` (last transaction id published) and
``watermark`` (every master commit at or before it is in a published batch), ``epoch``
(this capture session's random id) and ``epochs`` (the epoch history, :mod:`wlcore.epochs`).
"""
from __future__ import annotations

import logging
import os
import threading
import uuid
import warnings
from datetime import datetime

from wlcore import batch as batchfmt
from wlcore import epochs
from .master_catalog import MasterCatalog
from wlcore import snapshots as snap
from wlcore.batch import TxnRecord, utc_iso
from .capture import Capture, CaptureState, Cursor, discover_tables, utcnow
from wlcore.databases import Dbfarm
from wlcore.settings import check_name, dbfarm as resolve_dbfarm, number, settings
from wlcore.errors import BatchError, ConfigError, LockHeldError, MasterStateError
from .heartbeat import Heartbeat
from .holds import Holds
from .table_notes import TableNotes
from .lifecycle import AutoLifecycle, MasterLifecycle
from wlcore.names import split_name
from wlcore.session import active_session
from .shipping import MasterShipping
from wlcore.master_state import (CONFIG_FILE, LOCK_FILE, LOG_FILE, REPLICA_CONFIG_FILE, STARTED, STOPPED,
                                 WATERMARK_STOPPED, MasterState, logs_of, read_config, write_master_state)
from wlcore.storage import Storage
from wlcore.watch import FolderWatch

log = logging.getLogger("wlc.master")

class Master(Heartbeat, MasterLifecycle, MasterCatalog, MasterShipping):
    """A database in master mode and the capture that feeds its logs.

    Create it with :func:`wlc.master` (or ``Master(...).start()``). A program may hold
    several. Capture runs in a daemon thread woken by filesystem events (or polling) and
    publishes the open batch ``beat`` seconds after its first record.
    """

    def __init__(self, dbname: str, dbfarm: str | None = None, logs: str | None = None, spark=None,
                 capture: bool = True):
        self.dbname = check_name(dbname, "database")
        self.dbfarm = resolve_dbfarm(dbfarm)
        self.storage = Storage.of(self.dbfarm)
        self.path = Storage.join(self.dbfarm, self.dbname)
        Dbfarm(self.dbfarm)  # a dbfarm that does not exist is refused: it is never made by accident
        self._logs_arg = logs
        self._spark = spark
        self._want_capture = capture
        cfg = settings()
        self.settle = cfg.capture.settle
        self.polling = cfg.capture.polling
        self.poll_interval = cfg.capture.poll_interval
        self.stage_within = cfg.capture.stage_within
        self.retry_max = cfg.capture.retry_max
        self._default_beat = cfg.master.beat
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: FolderWatch | None = None
        self._lockfile = None
        self.capture: Capture | None = None
        self.config = MasterState()
        self._pending: list[TxnRecord] = []
        self._staging: str | None = None
        self._unwritten: list[tuple] = []  # (record, planned) staged without their change rows yet
        self._unwritten_since: float | None = None  # time.monotonic() of the oldest of them
        self._open_since: float | None = None
        self._last_logged: TxnRecord | None = None
        self._last_published: TxnRecord | None = None
        self._opening: dict[str, Cursor | None] = {}  # {table: its cursor before the open batch}
        self._error: BaseException | None = None
        self._saved_config = ""  # the text of wlc.config as this object last wrote it
        self._watermark_saved = float("-inf")  # time.monotonic() of the last watermark or heartbeat write
        self._known_schemas: set[str] | None = None  # schemas in Spark's warehouse folder already seen
        self._warehouse: str | None = None
        self._schemas_checked = float("-inf")  # time.monotonic() of that look
        self.notes = TableNotes(lambda: self.config, self._save_config, self._note)

    # ------------------------------------------------------------------ properties
    @property
    def spark(self):
        if self._spark is None:
            self._spark = active_session()
        return self._spark

    @property
    def logs(self) -> str:
        return logs_of(self.config, self.path)

    @property
    def state(self) -> int:
        return self.config.state

    def table_path(self, name: str) -> str:
        """Folder of master table ``"schema.table"`` (for ``df.write.save(...)``)."""
        schema, table = split_name(name)
        return self.storage.uri(Storage.join(self.path, schema, table))

    def attach(self) -> "Master":
        """Use this master's tables by name in this process without capturing here
        (a writer application; the capturing process may be another one).

        Raises:
            MasterStateError: the database is not a master (call :func:`wlc.master` first)
                or it stopped logging (its new writes would not be captured).
        """
        existing = read_config(self.storage, self.path)
        if existing is None:
            Dbfarm(self.dbfarm).require_master(self.dbname)  # names what it is and the nearest masters
        self.config = existing
        if self.state != STARTED:
            raise MasterStateError(f"database {self.dbname!r} has stopped logging (state=2): writes to it are "
                                   "not captured any more; take a new snapshot with wlc.master() on a new database",
                                   cli=f"database {self.dbname!r} has stopped logging (state=2): writes to it are "
                                       "not captured any more; take a new snapshot with: wlc capture "
                                       f"{self.dbfarm} <new database>")
        self.register_catalog()
        return self

    # ------------------------------------------------------------------ life cycle
    def validate(self) -> MasterState | None:
        """Check, without changing anything, that ``start()`` may proceed; returns the existing wlc.config.

        Raises:
            ConfigError: ``logs`` is empty, or the database or log folder is a file.
            MasterStateError: the database is a replica, or a stopped master, or logs elsewhere.
        """
        if self._logs_arg is not None and not str(self._logs_arg).strip():
            raise ConfigError("logs='' is not a folder: pass a folder path for the logs, or leave logs out "
                              "to log into <dbfarm>/<dbname>/wlc_logs",
                              cli="--logs '' is not a folder: give a folder for the logs, or leave --logs out "
                                  "to log into <dbfarm>/<dbname>/wlc_logs")
        if self.storage.exists(self.path) and not self.storage.isdir(self.path):
            raise ConfigError(f"{self.path} is a file, not a database folder; choose another database name")
        if self.storage.exists(Storage.join(self.path, REPLICA_CONFIG_FILE)):
            raise MasterStateError(
                f"database {self.dbname!r} is a replica (it has {REPLICA_CONFIG_FILE}); a replica cannot become a "
                "master: write to its master, or make a new database for a new master")
        existing = read_config(self.storage, self.path)
        if existing is not None:
            if existing.stopped:
                msg = (f"database {self.dbname!r} stopped logging (wlc.config state=2); a stopped master can only "
                       "return to master mode from a fresh snapshot: move wlc.config and wlc_logs aside, then ")
                raise MasterStateError(msg + "call master() again",
                                       cli=msg + f"run wlc master {self.dbfarm} {self.dbname} again")
            logs = logs_of(existing, self.path)
            if self._logs_arg is not None and os.path.abspath(str(self._logs_arg)) != os.path.abspath(logs):
                raise MasterStateError(f"database {self.dbname!r} already logs to {logs}, not {self._logs_arg}; "
                                       "call master() without logs=",
                                       cli=f"database {self.dbname!r} already logs to {logs}, not "
                                           f"{self._logs_arg}; run wlc capture without --logs")
        elif self._logs_arg is not None and self.storage.exists(str(self._logs_arg)) \
                and not self.storage.isdir(str(self._logs_arg)):
            raise ConfigError(f"logs={self._logs_arg!r} is a file, not a folder; pass a folder for the logs",
                              cli=f"--logs {self._logs_arg!r} is a file, not a folder; give a folder for the logs")
        return existing

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
        created = not self.storage.exists(self.path)
        self._take_lock()
        try:
            existing = read_config(self.storage, self.path)  # again, now that the lock is ours
            if existing is not None:
                self.config = existing
                self.validate()
                warnings.warn(f"database {self.dbname!r} is already in master mode; nothing changed "
                              "(capture resumes where it stopped)", stacklevel=3)
                state = self._restore_state()
            else:
                state = self._initialise()
            self._note(epochs.start_session(self.config))  # a restored copy writes in an epoch of its own
            self._save_config()
            batchfmt.clear_staging(self.storage, self.logs, self.dbname)  # ours alone: we hold the lock
            floor = self.config.watermark_time
            self.capture = Capture(self.spark, self.storage, self.path, self.dbname, self.config.dbid, state,
                                   skip_schemas=self._skip_schemas(), floor=floor,
                                   holds=Holds(self.poll_interval, self.retry_max))
            self.register_catalog()
            if self._want_capture:
                self._start_thread()
        except BaseException:
            self._release_lock()
            if created and read_config(self.storage, self.path) is None:
                self.storage.rm(self.path)  # nothing of a refused new master stays behind
            raise
        return self

    def create(self, beat: float | None = None) -> int:
        """Put the database in master mode without capturing: ``wlc master`` on the command
        line, MonetDB's ``CALL wlc.master()``. A deliberate step, done once; :meth:`start`
        (``wlc capture``) then captures. Spark starts only when the database holds tables
        (they are copied into the first snapshot).

        Args:
            beat: the heartbeat in seconds to record (default ``master.beat`` of config).

        Returns:
            int: the number of tables in the first snapshot (0: replicas start empty).

        Raises:
            NotFoundError: the dbfarm does not exist.
            MasterStateError: the database is already a master or a replica, or another
                process holds its capture lock.
            ConfigError: ``logs`` or ``beat`` is malformed, or the database folder is a file.
        """
        value = number(beat, "beat") if beat is not None else None
        if self.validate() is not None:
            raise MasterStateError(f"database {self.dbname!r} is already a master; capture it with wlc.master("
                                   f"{self.dbname!r})", cli=f"database {self.dbname!r} is already a master; capture "
                                                            f"it with: wlc capture {self.dbfarm} {self.dbname}")
        created = not self.storage.exists(self.path)
        self._take_lock()
        try:
            if read_config(self.storage, self.path) is not None:  # made by another process meanwhile
                raise MasterStateError(f"database {self.dbname!r} became a master meanwhile (another process)")
            state = self._initialise()
            if value is not None:
                self.config.beat = value
                self._save_config()
            return len(state.tables)
        except BaseException:
            if created and read_config(self.storage, self.path) is None:
                self.storage.rm(self.path)  # nothing of a refused new master stays behind
            raise
        finally:
            self._release_lock()

    def _take_lock(self) -> None:
        """Hold ``<db>/wlc.lock`` (:meth:`Storage.lock`) for as long as this process captures the database.

        Raises:
            MasterStateError: another process holds it; nothing was changed.
            LockUnsupportedError: the storage can hold no lock.
        """
        lock_path = Storage.join(self.path, LOCK_FILE)
        try:
            self._lockfile = self.storage.lock(lock_path, blocking=False, what=f"capture of {self.path}")
        except LockHeldError:
            raise MasterStateError(f"another process is capturing {self.path} (it holds {lock_path}); "
                                   "stop it or use that process") from None

    def _release_lock(self) -> None:
        if self._lockfile is not None:
            self._lockfile.release()
            self._lockfile = None

    @property
    def running(self) -> bool:
        """True from start() until close(): this object holds the capture lock (or its thread runs)."""
        return self._lockfile is not None or (self._thread is not None and self._thread.is_alive())

    def _skip_schemas(self) -> set[str]:
        logs = os.path.abspath(self.logs)
        parent = os.path.dirname(logs)
        return {os.path.basename(logs)} if os.path.abspath(self.path) == parent else set()

    def _initialise(self) -> CaptureState:
        logs = str(self._logs_arg) if self._logs_arg is not None else Storage.join(self.path, "wlc_logs")
        if "://" not in logs:
            logs = os.path.abspath(logs)
        self.storage.makedirs(logs)
        dbid = uuid.uuid4().hex
        refused: dict[str, str] = {}
        tables = discover_tables(self.storage, self.path, {os.path.basename(logs)}, refused)
        snapshot = ""
        state = CaptureState()
        if tables:
            snapshot = snap.folder_of(self.path, -1)
            capture = Capture(self.spark, self.storage, self.path, self.dbname, dbid, state)
            # what capture switches on is on before the snapshot: its versions need no image later
            capture.enable_capture_properties({n: capture.start_cursor(p) for n, p in tables.items()})
            starts = {n: capture.start_cursor(p) for n, p in tables.items()}
            versions = {n: c.version for n, c in starts.items()}
            metas = {n: c.meta for n, c in starts.items()}
            state.tables = snap.take(snap.copy_session(self.spark), self.storage, self.path, snapshot, tables, versions, metas, dbid)
            for n, c in starts.items():
                state.tables[n].time = c.time
            if not self.storage.local:  # visible on an object store by its commit marker
                self.storage.publish_dir(snapshot, snapshot)
        self.config = MasterState.of(
            snapshot=snapshot, logs=logs, state=STARTED, batches=0,
            beat=self._default_beat, write=None, dbid=dbid,
            format=batchfmt.FORMAT_VERSION, tick=-1, watermark=None,
            created=utcnow(),
            not_replicated={},
        )
        self._save_config()
        self._note_refused(refused)
        return state

    def _restore_state(self) -> CaptureState:
        published = batchfmt.list_batches(self.storage, self.logs, self.dbname)
        if published:
            number, path = published[-1]
            try:
                manifest = batchfmt.read_manifest(self.storage, path)
            except BatchError as exc:
                raise MasterStateError(f"capture resumes from the newest batch, and {path} is not a readable batch "
                                       f"({exc}); move it out of {self.logs} if it is not this master's, or restore "
                                       "it from a copy, then start capture again") from None
            if (manifest.database, manifest.batch, manifest.dbid) != (self.dbname, number, self.config.dbid):
                raise MasterStateError(
                    f"capture resumes from the newest batch, and {path} holds batch {manifest.batch} of database "
                    f"{manifest.database!r} (id {manifest.dbid}), not batch {number} of this master (id "
                    f"{self.config.dbid}); move that folder out of {self.logs}, then start capture again")
            state = CaptureState.from_json(manifest.cursors)
            state.next_batch = number + 1
            if manifest.txns:
                self._last_logged = self._last_published = manifest.txns[-1]
            self.config.batches, self.config.tick = number + 1, manifest.last_txn
            self.config.write = manifest.txns[-1].time if manifest.txns else self.config.write
            self._save_config()
            return state
        if self.config.snapshot:
            return CaptureState(snap.read(self.storage, self.config.snapshot).tables, 0, 0)
        return CaptureState()

    def _save_config(self) -> None:
        """Write ``wlc.config`` when its text changed (an unchanged file is not rewritten).

        ``snapshot`` is brought to the newest snapshot first (``wlc snapshot`` of another
        process, or the background, may have taken one); ``wlc.log`` names it then."""
        newest = snap.newest_folder(self.storage, self.path)
        if newest and newest != self.config.snapshot:
            self._adopt_snapshot(newest, snap.txn_of(newest))
        if self.config.to_text() != self._saved_config:
            self._saved_config = write_master_state(self.storage, self.path, self.config)

    def _start_thread(self) -> None:
        if self.storage.local:
            self._watch = FolderWatch(self.path, recursive=True, polling=self.polling,
                                      interval=self.poll_interval, accept=self._relevant_event)
        self._thread = threading.Thread(target=self._run, name=f"wlc-capture-{self.dbname}", daemon=True)
        self._thread.start()
        auto = AutoLifecycle(self, max(5 * self.poll_interval, 1.0))
        if auto.wanted:
            self._auto = auto
            auto.start()

    def _relevant_event(self, path: str) -> bool:
        """A commit, or a schema or table folder made or removed; never capture's own files."""
        if "_delta_log" in path:
            return True
        if path.count(os.sep) > self.path.count(os.sep) + 2:
            return False  # data files: their commit wakes us
        name = os.path.basename(path)
        return not (os.path.dirname(path) == self.path.rstrip(os.sep)
                    and (name in (CONFIG_FILE, LOCK_FILE, LOG_FILE) or name.startswith(f".{CONFIG_FILE}.")))

    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = self.poll_interval
            try:
                with self._lock:
                    if self.state != STARTED:
                        return
                    deferred = self._step(take_all=False)
                    due = self._due_in()
                    self._heartbeat()
                self._check_schemas()
                if deferred:
                    timeout = min(timeout, self.settle)
                if due is not None:
                    timeout = min(timeout, max(due, 0.0))
                self._error = None
            except Exception as exc:  # keep capturing; the next scan retries from the same cursors
                self._error = exc
                log.exception("capture of %s failed; retrying", self.dbname)
                timeout = max(timeout, 1.0)
            if self._watch is not None:
                self._watch.wait(timeout)
            else:
                self._stop.wait(timeout)

    def _adopt_snapshot(self, path: str, txn: int) -> None:
        """Make ``path`` the newest snapshot in ``wlc.config`` and name it in ``wlc.log``
        (once: whichever of the background and a publication sees it first)."""
        self.config.snapshot = path
        self._note(f"snapshot at transaction {txn}: {path}")

    def _note(self, message: str) -> None:
        """A line in ``<db>/wlc.log`` (UTC instant first) and in the ``wlc.master`` log."""
        log.info("%s: %s", self.dbname, message)
        if self.storage.local:
            with open(os.path.join(self.path, LOG_FILE), "a", encoding="utf-8") as fh:
                fh.write(f"{utc_iso(utcnow())} {message}\n")

    def _note_refused(self, refused: dict[str, str]) -> None:
        """Keep the Delta tables capture cannot carry in wlc.config (``not_replicated``) and the log."""
        self.notes.refused(refused)

    def not_replicated(self) -> dict[str, str]:
        """Delta tables in the database that capture cannot carry: ``{path: reason}`` (empty: none)."""
        return self.notes.get("not_replicated")

    # ------------------------------------------------------------------ public API
    @property
    def beat_seconds(self) -> float:
        return self.config.beat if self.config.beat is not None else self._default_beat

    def beat(self, seconds: float) -> None:
        """Set the heartbeat: a batch is published ``seconds`` after its first record (0: one batch per transaction).

        Raises:
            ConfigError: ``seconds`` is negative or not a number.
        """
        value = number(seconds, "beat")
        with self._lock:
            self._check_started()
            self.config.beat = value
            self._save_config()
        if self._watch is not None:
            self._watch.wake()

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
            self._check_started()
            self._step(take_all=True)
            if self.capture.switched:  # capture's own commits (a feature switched on) are captured too
                self._step(take_all=True)
            tick = self.config.tick
        self.notes.warn()
        return tick

    def stop(self) -> None:
        """Flush, then stop logging for good (state=2). MonetDB: the end of life of the snapshot."""
        with self._lock:
            if self.state == STOPPED:
                return
            self._check_started()
            self._step(take_all=True)
            self.config.state = STOPPED
            self.config.watermark = WATERMARK_STOPPED
            self._save_config()
        self.close()

    def close(self) -> None:
        """Stop this process's capture thread and shippers (the database stays in master mode)."""
        self.ship_stop()
        if getattr(self, "_auto", None) is not None:
            self._auto.stop()
            self._auto = None
        self._stop.set()
        if self._watch is not None:
            self._watch.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()  # its current scan ends first: the lock must outlive it
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._thread is not None and self._lockfile is not None:  # a clean stop: status shows "stopped"
            with self._lock:
                self.config.capture_stopped = utcnow()
                self._save_config()
        self._release_lock()

    def clock(self) -> datetime | None:
        """Commit time (UTC) of the last logged transaction, or None when none was logged."""
        with self._lock:
            return self._last_logged.time if self._last_logged else None

    def last_logged(self) -> int:
        """Id of the last *logged* transaction (captured into a batch, published or open), -1 when none."""
        with self._lock:
            return self._last_logged.txn if self._last_logged else -1

    def tick(self) -> int:
        """Id of the last logged transaction (captured into a batch, published or open), -1 when none
        (MonetDB's ``wlc.tick()``, the id of the last transaction it logged).

        This is :meth:`last_logged`; it may run ahead of ``wlc.config``'s ``tick``
        (``self.config.tick``), the last *published* transaction, which is what replicas
        (whose own ``tick`` is the last applied one) and status compare against.
        """
        return self.last_logged()

    def _check_started(self) -> None:
        if self._lockfile is None:
            raise MasterStateError(f"this wlc.Master of {self.dbname!r} is not capturing (closed, or never started): "
                                   "call wlc.master() again")
        if self.state != STARTED:
            raise MasterStateError(f"database {self.dbname!r} has stopped logging (state=2)")

    def __repr__(self) -> str:
        return f"<wlc.Master {self.dbname!r} at {self.path} state={self.state} tick={self.last_logged()}>"
