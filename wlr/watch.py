"""Waiting for new batches in a master's log folder (watchdog events, polling fallback).

Replay waits here between looks in follow mode and while ``replicate(until=...)`` waits
for its target; the watcher itself is :class:`wlcore.watch.FolderWatch`, shared with capture.
"""

from __future__ import annotations

import os

from wlcore.watch import FolderWatch


def batch_watch(logs: str, polling: bool, interval: float) -> FolderWatch | None:
    """A watcher on the log folder ``logs`` (not recursive: batches appear by one rename).

    Args:
        logs (str): the log folder.
        polling (bool): poll the folder instead of waiting for filesystem events (``capture.polling``).
        interval (float): seconds between two polls.

    Returns:
        FolderWatch | None: None when ``logs`` is not a local folder; callers then wait by timeout only.
    """
    if "://" in logs or not os.path.isdir(logs):
        return None
    return FolderWatch(logs, recursive=False, polling=polling, interval=interval)
