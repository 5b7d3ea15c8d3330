"""Waking up when files change: watchdog events on local folders, its polling observer on
network filesystems (NFS, SMB, FUSE), and a timeout in every wait as a safety net."""

from __future__ import annotations

import logging
import os
import threading
import warnings

from watchdog import events
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

log = logging.getLogger("wlcore.watch")
# watchdog's inotify observer warns (with every watched folder in the message) when a folder
# is made again under the same path, as Spark's _temporary folders are; it is harmless.
warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)


class _StopRace(logging.Filter):
    """watchdog 7.1's inotify emitter logs an ERROR when an event arrives while its thread
    stops (``queue_events() called when the thread is inactive``): a race inside
    ``Observer.stop()`` that loses nothing we need (we are closing), so it is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


logging.getLogger("watchdog.observers.inotify").addFilter(_StopRace())


# what wakes a waiter: files and folders made, moved, written or removed. Reads (inotify's
# IN_OPEN, IN_CLOSE_NOWRITE) are not even asked of the kernel: a scan reading every log, or
# watchdog's own walk of the tree after the kernel's queue overflowed, would otherwise fill that
# queue with reads and overflow it again, over and over (a full core, with thousands of folders)
CHANGES = [
    events.FileCreatedEvent,
    events.DirCreatedEvent,
    events.FileMovedEvent,
    events.DirMovedEvent,
    events.FileModifiedEvent,
    events.FileDeletedEvent,
    events.DirDeletedEvent,
    events.FileClosedEvent,
]


class _Wake(FileSystemEventHandler):
    def __init__(self, event: threading.Event, accept, on_folder=None):
        self.event = event
        self.accept = accept
        self.on_folder = on_folder

    def on_any_event(self, event):
        dest = getattr(event, "dest_path", "") or ""
        if event.is_directory and self.on_folder is not None and event.event_type in ("created", "moved", "deleted"):
            self.on_folder(event.src_path, dest or None, event.event_type)
        if self.accept(event.src_path) or (dest and self.accept(dest)):
            self.event.set()


class FolderWatch:
    """Watch ``path`` (recursively when asked, but for the sub-folders named in ``skip``);
    ``wait(timeout)`` returns early on a change.

    Args:
        path: local folder to watch; created if missing.
        recursive: watch sub-folders too.
        polling: use watchdog's PollingObserver (for network filesystems) instead of native events.
        interval: seconds between polls of the polling observer.
        accept: predicate on event paths; only accepted paths wake waiters.
        skip: names of ``path``'s own sub-folders not watched (with ``recursive``), made now or
            later: a master's batches and snapshots, thousands of folders that only capture
            writes, would each hold a watch of the OS's limited number.
    """

    def __init__(
        self,
        path: str,
        recursive: bool = True,
        polling: bool = False,
        interval: float = 1.0,
        accept=lambda p: True,
        skip: tuple[str, ...] = (),
    ):
        self.changed = threading.Event()
        self.path = path
        self._skip = set(skip)
        self._watched: dict = {}  # sub-folder: its watchdog watch (with skip)
        os.makedirs(path, exist_ok=True)
        self._observer = PollingObserver(timeout=interval) if polling else Observer()
        split = recursive and bool(skip)
        self._wake = _Wake(self.changed, accept, self._folder_event if split else None)
        self._observer.schedule(self._wake, path, recursive=recursive and not split, event_filter=CHANGES)
        if split:
            for entry in os.scandir(path):
                if entry.is_dir():
                    self._watch_folder(entry.path)
        self._observer.daemon = True
        try:
            self._observer.start()
        except OSError as exc:  # e.g. inotify limits: fall back to timeouts only
            log.warning("cannot watch %s (%s); falling back to polling by timeout", path, exc)
            self._observer = None

    def _folder_event(self, src: str, dest: str | None, kind: str) -> None:
        """A folder was made, moved or removed: watch a new sub-folder of :attr:`path`, stop
        watching one that went away (so that a folder made again under its name is watched)."""
        if kind in ("moved", "deleted"):
            watch = self._watched.pop(src.rstrip(os.sep), None)
            if watch is not None and self._observer is not None:
                try:
                    self._observer.unschedule(watch)
                except (KeyError, OSError):  # its emitter already ended with the folder
                    pass
        if kind != "deleted":
            self._watch_folder(dest or src)

    def _watch_folder(self, folder: str) -> None:
        """Watch ``folder``, a sub-folder of :attr:`path`, with everything under it (not one
        named in ``skip``, nor a deeper folder: its top sub-folder's watch covers it)."""
        folder = folder.rstrip(os.sep)
        if os.path.dirname(folder) != self.path.rstrip(os.sep) or os.path.basename(folder) in self._skip:
            return
        if folder in self._watched or self._observer is None or not os.path.isdir(folder):
            return
        try:
            self._watched[folder] = self._observer.schedule(self._wake, folder, recursive=True, event_filter=CHANGES)
        except OSError as exc:  # gone again, or inotify limits: the scans' timeout still finds it
            log.warning("cannot watch %s (%s)", folder, exc)

    @property
    def live(self) -> bool:
        """True while an observer delivers the folder's events (False: it could not start, and
        :meth:`wait` returns only at its timeout or a :meth:`wake`)."""
        return self._observer is not None

    def wait(self, timeout: float) -> bool:
        """Block until a change arrives or ``timeout`` runs out; clears the flag.

        Args:
            timeout (float): seconds to wait at most (negative: 0).

        Returns:
            bool: True when a change (or :meth:`wake`) arrived.
        """
        hit = self.changed.wait(max(0.0, timeout))
        self.changed.clear()
        return hit

    def wake(self) -> None:
        """Wake the waiter now, as a change would (a stop request)."""
        self.changed.set()

    def close(self) -> None:
        """Stop watching (waits up to 5 s for the observer thread); safe to call twice."""
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
