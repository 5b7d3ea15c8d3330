"""Putting a database in master mode: the checks made before anything is written, the capture
lock (``<db>/wlc.lock``), the first snapshot of a new master, and where capture resumes in one
that was capturing before.

MonetDB's ``CALL wlc.master()``: a database that holds tables gets a snapshot first (each
table copied at its current Delta version), and capture starts after it; a master that
captured before resumes from the cursors of its newest published batch.
"""

from __future__ import annotations

import logging
import os
import posixpath
import uuid
import warnings
from typing import Any, Callable

from wlcore import batch as batchfmt, epochs, snapshots as snap
from wlcore.batch import TxnRecord
from wlcore.databases import Dbfarm
from wlcore.errors import BatchError, ConfigError, LockHeldError, MasterStateError, NotWritableError
from wlcore.master_state import LOCK_FILE, STARTED, MasterState, check_paths, logs_of, read_master_state
from wlcore.promotion import read_start, resume_point
from wlcore.replica_state import CONFIG_FILE as REPLICA_CONFIG_FILE
from wlcore.settings import number
from wlcore.storage import HeldLock, Storage
from wlcore.utc import utcnow

from .capture import Capture, CaptureState, Holds, discover_tables
from .master_record import MasterRecord, TableNotes
from .publisher import CaptureTiming, Publisher

log = logging.getLogger("wlc.master")


class MasterSetup:
    """The set-up of one master: :meth:`validate`, the capture lock, :meth:`create` and :meth:`initialise`
    (a new master), :meth:`restore` (a resumed one).

    Args:
        record (MasterRecord): the master's ``wlc.config`` and ``wlc.log`` (set and saved here).
        notes (TableNotes): the master's notes on its tables (tables not replicated, held).
        dbfarm (str): the dbfarm folder (in messages).
        logs (str | None): the log folder asked for (None: the default ``<db>/wlc_logs``, or what
            ``wlc.config`` names).
        spark (Callable[[], SparkSession]): returns the Spark session (called only when the new
            master holds tables to copy).
    """

    def __init__(
        self, record: MasterRecord, notes: TableNotes, dbfarm: str, logs: str | None, spark: Callable[[], Any]
    ):
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
        """Hold ``<db>/wlc.lock`` (:meth:`Storage.lock`) for as long as this process captures the database.

        Raises:
            MasterStateError: another process holds it; nothing was changed.
            LockUnsupportedError: the storage can hold no lock.
        """
        lock_path = Storage.join(self.path, LOCK_FILE)
        try:
            self.lockfile = self.storage.lock(lock_path, blocking=False, what=f"capture of {self.path}")
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
        batchfmt.clear_staging(self.storage, self.record.logs, self.dbname)  # ours alone: we hold the lock
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
        capture = Capture(
            spark,
            self.storage,
            self.path,
            self.dbname,
            self.record.config.dbid,
            state,
            skip_schemas=self.skip_schemas(),
            floor=self.record.config.watermark_time,
            holds=Holds(timing.poll_interval, timing.retry_max),
        )
        return capture, Publisher(capture, self.record, self.notes, timing, last)

    def skip_schemas(self) -> set[str]:
        """The folders of the database that are not schemas: the log folder when it sits inside the database."""
        logs = os.path.abspath(self.record.logs)
        parent = os.path.dirname(logs)
        return {os.path.basename(logs)} if os.path.abspath(self.path) == parent else set()

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
            capture = Capture(self.spark(), self.storage, self.path, self.dbname, dbid, state)
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
        published = batchfmt.list_batches(self.storage, self.record.logs, self.dbname)
        promoted = resume_point(read_start(self.storage, self.path), published[-1][0] if published else None)
        if promoted is not None:  # a promoted replica: its tables' versions, not the old master's cursors
            return promoted, None
        if published:
            number, path = published[-1]
            try:
                manifest = batchfmt.read_manifest(self.storage, path)
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
