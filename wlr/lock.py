"""The replica's lock, ``<replica>/wlr.lock``: one process replays into a replica at a time
(:meth:`wlcore.storage.Storage.lock`)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from wlcore.errors import LockHeldError
from wlcore.storage import Storage

from .errors import ReplicaStateError

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
