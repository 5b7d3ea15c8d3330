"""Replica tables opened by delta-rs, kept between segments.

Opening a table with delta-rs (``DeltaTable(path)``) reads its last checkpoint and every JSON
commit after it: about 5 ms of CPU on a small table, paid by every segment a follower lands,
round after round. A table kept from the previous segment is brought up to date instead
(``update_incremental``: only the commits made since, about 0.5 ms), provided it is still the
same table: the commit file of the version it was kept at must be the very file it was then (the
same inode, size and modification time). A table dropped and made again by DDL, whose log begins
anew, fails that check and is opened afresh; commits Spark made since (a segment delta-rs could
not land, DDL that kept the table) are read by the update.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

log = logging.getLogger("wlr.deltars")


def open_table(path: str):
    """delta-rs's DeltaTable at local ``path``, or None when delta-rs cannot read its log (a
    reader feature it lacks)."""
    from deltalake import DeltaTable

    try:
        return DeltaTable(path)
    except Exception as exc:  # deltalake's errors for unknown features and versions have no common base
        log.debug("%s: delta-rs cannot read it (%s)", path, exc)
        return None


def _stamp(path: str, version: int) -> tuple[int, int, int] | None:
    """(inode, size, modification time in ns) of the commit file of ``version`` of the table at
    ``path``; None when it is not there."""
    try:
        st = os.stat(os.path.join(path, "_delta_log", f"{version:020d}.json"))
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class OpenTables:
    """The DeltaTable of each replica table a segment used last, by local folder; shared by the
    threads of a replay (a table's segments run one at a time, and a table is taken out while used)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Any, int, tuple[int, int, int]]] = {}
        self._lock = threading.Lock()

    def take(self, path: str):
        """The table at local ``path`` at its latest version: the one kept, brought up to date
        when it is still the same table, else opened afresh (None: delta-rs cannot read it).
        Give it back with :meth:`keep` once the segment is done."""
        with self._lock:
            kept = self._kept.pop(path, None)
        if kept is not None:
            dt, version, stamp = kept
            if _stamp(path, version) == stamp:
                try:
                    dt.update_incremental()
                    return dt
                except Exception as exc:  # deltalake's errors have no common base
                    log.debug("%s: opened again (%s)", path, exc)
        return open_table(path)

    def keep(self, path: str, dt) -> None:
        """Keep ``dt`` (the table at ``path``, after the segment) for the table's next segment."""
        if dt is None:
            return
        version = dt.version()
        stamp = _stamp(path, version)
        if stamp is not None:
            with self._lock:
                self._kept[path] = (dt, version, stamp)

    def drop(self, path: str | None) -> None:
        """Forget the table at local ``path`` (dropped or made again; None: not a local table)."""
        if path is not None:
            with self._lock:
                self._kept.pop(path, None)
