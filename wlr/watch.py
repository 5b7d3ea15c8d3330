"""Waiting for new batches in a master's log folder (watchdog events, polling fallback).

Replay waits here between looks in follow mode and while ``replicate(until=...)`` waits
for its target; the watcher itself is :class:`wlcore.watch.FolderWatch`, shared with capture.
"""

from __future__ import annotations

from wlcore.storage import Storage
from wlcore.watch import FolderWatch


def batch_watch(storage: Storage, logs: str, polling: bool, interval: float) -> FolderWatch | None:
    """A watcher on the log folder ``logs`` (not recursive: batches appear by one rename).

    Args:
        storage (Storage): the storage holding ``logs``.
        logs (str): the log folder.
        polling (bool): poll the folder instead of waiting for filesystem events (``capture.polling``).
        interval (float): seconds between two polls.

    Returns:
        FolderWatch | None: None when ``logs`` is missing or on a storage that cannot be
        watched (an object store: :meth:`Storage.watcher`); callers then wait by timeout only.
    """
    return storage.watcher(logs, recursive=False, polling=polling, interval=interval, create=False)
