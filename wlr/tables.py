"""What a replica's tables hold, read back from their own Delta logs: their versions, their
definitions, and the replay tags on their commits (:mod:`wlr.tags`), so that replay knows after a
crash which transactions each table holds, and a write made by anyone but replay is seen; and
the tables delta-rs landed segments on, kept open between segments (:class:`OpenTables`).

Opening a table with delta-rs (``DeltaTable(path)``) reads its last checkpoint and every JSON
commit after it: about 5 ms of CPU on a small table, paid by every segment a follower lands,
round after round. A table kept from the previous segment is brought up to date instead
(``update_incremental``: only the commits made since, about 0.5 ms), provided it is still the
same table: the commit file of the version it was kept at must be the very file it was then (the
same inode, size and modification time). A table dropped and made again by DDL, whose log begins
anew, fails that check and is opened afresh; commits Spark made since (a segment delta-rs could
not land, DDL that kept the table) are read by the update. This module loads neither delta-rs
nor pyarrow before a table is opened (:mod:`wlr.deltars`, which lands segments, loads both).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from wlcore.deltalog import TableMeta, list_versions, meta_after, metadata_at, read_commit
from wlcore.names import split_name
from wlcore.storage import Storage

from .tags import parse_span, parse_tag

log = logging.getLogger("wlr.deltars")  # delta-rs's tables, as wlr.deltars logs them


class ReplicaTables:
    """The tables of one replica, as replay of master ``dbid`` left them.

    Args:
        storage (Storage): the storage holding the replica.
        replica_path (str): the replica's folder (path or URL).
        dbid (str): the master's database id (its replay tags are the ones read).
    """

    def __init__(self, storage: Storage, replica_path: str, dbid: str):
        self.storage = storage
        self.replica_path = replica_path
        self.dbid = dbid
        self._meta: dict[str, tuple[int, TableMeta | None]] = {}
        self.opened = OpenTables()  # the tables delta-rs landed segments on, kept open between segments

    def forget(self, name: str) -> None:
        """Drop what is cached of table ``name`` (it is dropped or made again: its versions start anew).

        Args:
            name (str): the replica table, ``schema.table``.
        """
        self._meta.pop(name, None)
        self.opened.drop(self.storage.os_path(self.table_path(name)))

    def table_path(self, name: str) -> str:
        """The folder (path or URL) of replica table ``name``: ``<replica>/<schema>/<table>``.

        Args:
            name (str): ``schema.table``.
        """
        schema, table = split_name(name)
        return Storage.join(self.replica_path, schema, table)

    def last_final_txn(self, name: str, since_version: int = -1) -> int:
        """The highest transaction whose final replay commit is in the table's log after
        ``since_version``; -1 when there is none.

        Args:
            name (str): the replica table, ``schema.table``.
            since_version (int): the Delta version to look after (-1: every version).
        """
        path = self.table_path(name)
        best = -1
        for v in reversed(list_versions(self.storage, path)):
            if v <= since_version:
                break
            found = self.tag_at(path, v)
            if found and found[1]:
                best = max(best, found[0])
                break
        return best

    def tag_at(self, path: str, version: int) -> tuple[int, bool] | None:
        """``(txn, final)`` of the replay tag on commit ``version`` of the table at ``path``, or None."""
        return parse_tag(read_commit(self.storage, path, version).user_metadata, self.dbid)

    def version_at(self, name: str, txn: int) -> int | None:
        """The table's Delta version holding exactly the transactions <= ``txn``.

        Args:
            name (str): the replica table, ``schema.table``.
            txn (int): a transaction id.

        Returns:
            int | None: the version; -1 when the table did not exist then; None when one commit
            spans ``txn`` (a segment from before it to after it: no version holds exactly that point).
        """
        path = self.table_path(name)
        for v in reversed(list_versions(self.storage, path)):
            commit = read_commit(self.storage, path, v)
            span = parse_span(commit.user_metadata, self.dbid)
            if span is None:  # the snapshot copy's commits precede replay; OPTIMIZE and such change no data
                if commit.data_change or commit.metadata is not None:
                    return v
                continue
            first, last, final = span
            if first > txn:
                continue
            return v if (last <= txn and final) else None
        return -1

    def resuming(self, name: str, txn: int) -> bool:
        """True when the table's newest commit is a part commit of ``txn``: an attempt was cut short.

        Args:
            name (str): the replica table, ``schema.table``.
            txn (int): the transaction about to be applied.
        """
        path = self.table_path(name)
        versions = list_versions(self.storage, path)
        return bool(versions) and self.tag_at(path, versions[-1]) == (txn, False)

    def foreign_writes(self, name: str, since_version: int) -> list[str]:
        """Commits after ``since_version`` that change data or shape and were not made by replay.

        Args:
            name (str): the replica table, ``schema.table``.
            since_version (int): the last Delta version replay knows.

        Returns:
            list[str]: ``"version <v> (<operation>)"`` for each; ``[]`` when none.
        """
        path = self.table_path(name)
        out = []
        for v in list_versions(self.storage, path):
            if v <= since_version:
                continue
            commit = read_commit(self.storage, path, v)
            if parse_tag(commit.user_metadata, self.dbid) is not None:
                continue
            if commit.data_change or commit.metadata is not None:
                out.append(f"version {v} ({commit.operation})")
        return out

    def current_version(self, name: str) -> int:
        """The replica table's latest Delta version; -1 when it has no commit (no table yet).

        Args:
            name (str): the replica table, ``schema.table``.
        """
        versions = list_versions(self.storage, self.table_path(name))
        return versions[-1] if versions else -1

    def current_meta(self, name: str) -> TableMeta | None:
        """The replica table's metadata now; reads only the commits since the last call (cached).

        Args:
            name (str): the replica table, ``schema.table``.

        Returns:
            TableMeta | None: None when the table has no commit.
        """
        path = self.table_path(name)
        v = self.current_version(name)
        if v < 0:
            self._meta.pop(name, None)
            return None
        cached = self._meta.get(name)
        meta = None
        if cached is not None and cached[0] <= v:
            meta = cached[1]
            for ver in range(cached[0] + 1, v + 1):
                meta = meta_after(meta, read_commit(self.storage, path, ver))
        else:
            meta = metadata_at(self.storage, path, v)
        self._meta[name] = (v, meta)
        return meta

    def created_by_replay(self, name: str) -> bool:
        """True when the replica table's first commit was made by replay of this master.

        Args:
            name (str): the replica table, ``schema.table``.
        """
        path = self.table_path(name)
        versions = list_versions(self.storage, path)
        return bool(versions) and self.tag_at(path, versions[0]) is not None


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
