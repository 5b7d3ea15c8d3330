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


# inotify also reports files being opened and closed unwritten: reads, not changes
_READS = {
    getattr(events, name) for name in ("EVENT_TYPE_OPENED", "EVENT_TYPE_CLOSED_NO_WRITE") if hasattr(events, name)
}


class _Wake(FileSystemEventHandler):
    def __init__(self, event: threading.Event, accept):
        self.event = event
        self.accept = accept

    def on_any_event(self, event):
        if event.event_type in _READS:
            return  # reading a file changes nothing (and our own scans read the logs)
        dest = getattr(event, "dest_path", "") or ""
        if self.accept(event.src_path) or (dest and self.accept(dest)):
            self.event.set()


class FolderWatch:
    """Watch ``path`` (recursively when asked); ``wait(timeout)`` returns early on a change.

    Args:
        path: local folder to watch; created if missing.
        recursive: watch sub-folders too.
        polling: use watchdog's PollingObserver (for network filesystems) instead of native events.
        interval: seconds between polls of the polling observer.
        accept: predicate on event paths; only accepted paths wake waiters.
    """

    def __init__(
        self, path: str, recursive: bool = True, polling: bool = False, interval: float = 1.0, accept=lambda p: True
    ):
        self.changed = threading.Event()
        self.path = path
        os.makedirs(path, exist_ok=True)
        self._observer = PollingObserver(timeout=interval) if polling else Observer()
        self._observer.schedule(_Wake(self.changed, accept), path, recursive=recursive)
        self._observer.daemon = True
        try:
            self._observer.start()
        except OSError as exc:  # e.g. inotify limits: fall back to timeouts only
            log.warning("cannot watch %s (%s); falling back to polling by timeout", path, exc)
            self._observer = None

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
