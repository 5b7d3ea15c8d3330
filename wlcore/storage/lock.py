"""What :meth:`wlcore.storage.Storage.lock` returns: a held lock, released once."""

from __future__ import annotations

from typing import Callable


class HeldLock:
    """An exclusive lock this process holds, until :meth:`release` or the end of its ``with``
    block; releasing twice is harmless.

    Args:
        path (str): the lock's file or object.
        release (Callable[[], None]): lets go of it (called once).
    """

    def __init__(self, path: str, release: Callable[[], None]):
        self.path = path
        self._release: Callable[[], None] | None = release

    @property
    def held(self) -> bool:
        """True until :meth:`release`."""
        return self._release is not None

    def release(self) -> None:
        """Let go of the lock (nothing when already released)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> "HeldLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()
