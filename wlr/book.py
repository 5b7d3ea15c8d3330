"""A replica's files in its folder: ``wlr.config`` (:mod:`wlcore.state`), the event log
``wlr.log`` beside it (:class:`StateBook`, its state in memory and on disk), the lock
``wlr.lock`` (:class:`ReplicaLock`: one process replays into a replica at a time) and the applier
that writes its tables (:class:`ReplicaApplier`); shared by the replica's set-up, replay rounds,
follower, relay and consistent view."""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator

from wlcore.errors import LockHeldError
from wlcore.state import ReplicaState, read_replica_state, write_replica_state
from wlcore.storage import Storage
from wlcore.utc import utc_iso

from .errors import ReplicaStateError, ReplicationError

if TYPE_CHECKING:
    from wlcore.session import LateSession

    from .apply import Applier
    from .select import Selection
    from .source import CurrentSource

LOG_FILE = "wlr.log"


log = logging.getLogger("wlr.replica")


class StateBook:
    """The replica's ``wlr.config`` values as replay last read or set them, their file and its log.

    Args:
        storage: the storage holding the replica (its dbfarm's).
        path: the replica's folder (path or URL).
        name: the replica's name (in log lines).

    Attributes:
        state: the values in memory, typed (:class:`wlcore.state.ReplicaState`; empty
            when the folder is not a replica yet); the caller saves with :meth:`save`.
        lock: held while replay's worker threads write ``state`` (a re-entrant lock).
        last_error: the failure replay raised last in this process (None: none, or resolved).
    """

    def __init__(self, storage: Storage, path: str, name: str) -> None:
        self.storage = storage
        self.path = path
        self.name = name
        self.lock = threading.RLock()
        self.last_error: ReplicationError | None = None
        self.state: ReplicaState = self.load() or ReplicaState()

    def load(self) -> ReplicaState | None:
        """The file's values, or None when the folder is not a replica (yet): no ``wlr.config``.

        Raises:
            ConfigError: the file is malformed (the message names the key).
        """
        return read_replica_state(self.storage, self.path)

    def reload(self) -> ReplicaState:
        """Read the file again into :attr:`state` (empty when there is none) and return it."""
        self.state = self.load() or ReplicaState()
        return self.state

    def current(self) -> ReplicaState:
        """The file's values, or the ones in memory when there is no file (or it holds no key)."""
        st = self.load()
        return st if st is not None and not st.empty else self.state

    def save(self) -> None:
        """Write :attr:`state` to ``wlr.config`` (atomically)."""
        write_replica_state(self.storage, self.path, self.state)

    def log(self, message: str, level: int = logging.INFO) -> None:
        """Say ``message`` to the ``wlr.replica`` logger and append it to ``wlr.log``
        (:meth:`Storage.append_text`; UTC instant first).

        Args:
            message (str): the line, without the instant.
            level (int): the logging level of the logger's record (``logging.INFO``, ``logging.WARNING``).
        """
        line = f"{utc_iso(datetime.now(timezone.utc))} {message}\n"
        log.log(level, "%s: %s", self.name, message)
        self.storage.append_text(Storage.join(self.path, LOG_FILE), line)


# The replica's lock, ``<replica>/wlr.lock``: one process replays into a replica at a time
# (:meth:`wlcore.storage.Storage.lock`).


LOCK_FILE = "wlr.lock"


class ReplicaLock:
    """``wlr.lock`` of a replica (:meth:`wlcore.storage.Storage.lock`: a file lock, or a lease on S3).

    The lock is not re-entrant across objects: a second :class:`ReplicaLock` on the same
    folder is refused while this one holds it.

    Args:
        storage (Storage): the storage holding the replica.
        path (str): the replica's folder (path or URL).
    """

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path
        self.held: Any = None  # the storage's lock object while held

    def probe(self) -> None:
        """Raise ReplicaStateError when another process holds ``wlr.lock`` (creates nothing)."""
        path = Storage.join(self.path, LOCK_FILE)
        if self.held is not None or not self.storage.exists(path):
            return
        self._take(path).release()

    def acquire(self) -> None:
        """Take the lock (nothing when held already).

        Raises:
            ReplicaStateError: another process holds it.
        """
        if self.held is not None:
            return
        self.held = self._take(Storage.join(self.path, LOCK_FILE))

    def release(self) -> None:
        """Release the lock when held."""
        if self.held is not None:
            self.held.release()
            self.held = None

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the lock for the ``with`` block (:meth:`acquire`, then :meth:`release`)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def _take(self, path: str) -> Any:
        try:
            return self.storage.lock(path, blocking=False, what=f"replay into {self.path}")
        except LockHeldError:
            raise ReplicaStateError(f"another process is replaying into {self.path}; stop it first") from None


class ReplicaApplier:
    """The applier of one replica, shared by its parts (set-up, rounds, consistent view): made at
    the first use and again when the replica's master database id changes, reading change rows
    from where the replica reads now, with the replica's selection.

    Args:
        spark (LateSession): the replica's replay session (made when a segment first needs Spark).
        book (StateBook): the replica's state (its folder, storage and master's database id).
        source (CurrentSource): where the replica reads now.

    Attributes:
        selection: the replica's tables and rows (None: every table, every row), as its set-up settles them.
    """

    def __init__(self, spark: LateSession, book: StateBook, source: CurrentSource) -> None:
        self.spark = spark
        self.book = book
        self.source = source
        self.selection: Selection | None = None
        self._applier: Applier | None = None

    def current(self) -> Applier:
        """The applier for the replica's master database id now (made again when it changed).

        Returns:
            Applier: reading from the current source, with :attr:`selection`.
        """
        dbid = self.book.state.dbid
        storage = self.source.source.storage
        if self._applier is None or self._applier.dbid != dbid:
            from .apply import Applier

            self._applier = Applier(self.spark, self.book.storage, self.book.path, dbid, storage)
        self._applier.logs_storage = storage
        self._applier.selection = self.selection
        return self._applier
