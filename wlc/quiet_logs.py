"""Tables whose Delta log has not changed since capture last read it, told by one look at the log
folder instead of a listing of it.

An idle master's capture scans every table at every wake-up; listing each ``_delta_log`` costs
more the more tables and commit files there are. On local folders a folder's modification time
changes whenever a file is made, renamed or removed in it, so a table whose log folder has the
stat it had when it was listed, and whose cursor is at the last version that listing found, has
nothing new. A folder modified less than two seconds before it was listed is listed again, as git
treats "racily clean" index entries (a file made within the same clock tick leaves the time as it
was). Used only where capture is woken by the operating system's events (local folders, not
``capture.polling``): on network filesystems and object stores every scan lists every log.
"""

from __future__ import annotations

import time

from wlcore.deltalog import log_path
from wlcore.storage import FileStat, Storage

RACY_MS = 2000  # a log folder modified less than this before its listing is listed again


class QuietLogs:
    """Which tables' logs are unchanged since capture read them up to their cursor.

    Args:
        storage (Storage): the storage holding the master.
    """

    def __init__(self, storage: Storage):
        self.storage = storage
        self.on = False  # set by the owner: the log folders' modification times can be trusted
        self._seen: dict[str, tuple[FileStat, int]] = {}  # {table: (its log folder's stat, the last version then)}
        self._looked: dict[str, tuple[FileStat, float]] = {}  # {table: (the stat just taken, when, ms)}

    def unchanged(self, name: str, path: str, version: int) -> bool:
        """True when table ``name``'s log is as it was when a listing found ``version`` its last.

        Args:
            name (str): the table (``schema.table``).
            path (str): its folder.
            version (int): its cursor (the last version capture has read).

        Returns:
            bool: True: nothing to list; False: list its log (then call :meth:`listed`).
        """
        if not self.on:
            return False
        try:
            stamp = self.storage.stat(log_path(path))
        except OSError:
            self._seen.pop(name, None)
            return False
        if self._seen.get(name) == (stamp, version):
            return True
        self._looked[name] = (stamp, time.time() * 1000)
        return False

    def listed(self, name: str, versions: list[int]) -> None:
        """Record what a listing of table ``name``'s log found, after :meth:`unchanged` said False.

        Args:
            name (str): the table.
            versions (list[int]): the versions the listing found, ascending.
        """
        stamp, when = self._looked.pop(name, (None, 0.0))
        if stamp is not None and stamp.mtime_ms is not None and versions and stamp.mtime_ms < when - RACY_MS:
            self._seen[name] = (stamp, versions[-1])
        else:
            self._seen.pop(name, None)
