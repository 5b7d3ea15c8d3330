"""The transaction log viewer: a master's published transactions, to find a recovery target.

``wlr log <dbfarm> <master>`` and :func:`wlr.transactions` list what capture published
(txn id, GTID, commit time, table, operation, change rows by type, batch), filtered by
table, operation and a range of transaction ids or instants, so a user can find the
transaction just before a mistake (e.g. a ``DROP TABLE``) and replicate ``until`` it.
Where retention pruned level 0, the compacted batches that remain are listed instead: a
piece of such a batch (the net change of a table's transactions ``first``..``txn``) shows
as one row with ``first`` set. ``wlr log --snapshots`` (:func:`snapshots`) lists the
snapshots a new replica can start from. Only manifests are read (no Spark): a listing with a
lower bound (``since``) finds its first batch by bisection, so the newest transactions of a log of
n batches cost O(log n) manifest reads plus the batches shown; without one, every batch is read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable

from wlcore.batch import TxnRecord
from wlcore.logstore import BatchRef, LogStore
from wlcore.promotion import database_of
from wlcore.settings import dbfarm as resolve_dbfarm
from wlcore.state import MasterState, logs_of, read_master_state as read_master_config
from wlcore.storage import Storage
from wlcore.utc import utc_iso

from .errors import ReplicaStateError
from .planner import Target, parse_until

COLUMNS = ("txn", "gtid", "time", "table", "operation", "rows", "batch")
SNAPSHOT_COLUMNS = ("txn", "time", "batch", "path")


def _bound(value) -> Target | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    target = parse_until(value)
    if target.kind == "all":
        return None
    return target


def _within(rec: TxnRecord, since: Target | None, until: Target | None) -> bool:
    if since is not None and since.precedes(rec.txn, rec.time):
        return False
    if until is not None and not until.admits(rec.txn, rec.time):
        return False
    return True


def _master(master: str, dbfarm: str | None, logs: str | None = None) -> tuple[Storage, str, MasterState]:
    """``(storage, database folder, wlc.config)`` of master ``master``, or of its shipped
    copy at ``logs`` (a folder or URL made by ``wlc ship``).

    Raises:
        ReplicaStateError: the database is not a master; ``logs`` holds no shipped copy of it.
    """
    if logs is not None:
        from wlcore.ship import read_config as read_shipped_config

        storage, path = Storage.of(logs), str(logs).rstrip("/")
        cfg = read_shipped_config(storage, path)
        if cfg is None or cfg.database != master:
            raise ReplicaStateError(
                f"{path} holds no shipped copy of master {master!r} (its wlc.config names "
                f"{cfg.database if cfg is not None else None!r}); check the URL, or ship there first"
            )
        return storage, path, cfg
    from wlcore.databases import Dbfarm

    farm = resolve_dbfarm(dbfarm)
    storage = Storage.of(farm)
    # a promoted master by its folder or its database's name; what it is instead, the nearest masters
    path = Storage.join(farm, Dbfarm(farm).require_master(master, ReplicaStateError))
    cfg = read_master_config(storage, path)
    if cfg is None:
        raise ReplicaStateError(f"{path} is not a master (no wlc.config); check the dbfarm and the master's name")
    return storage, path, cfg


def _snapshot_tables(storage: Storage, snapshot: str) -> set[str]:
    """The tables the snapshot folder ``snapshot`` holds (none for ``""`` or a damaged snapshot:
    the log's tables are still named)."""
    from wlcore import snapshots as snap

    if not snapshot:
        return set()
    try:
        return set(snap.read(storage, snapshot).tables)
    except (OSError, ValueError, KeyError):
        return set()


def known_tables(store: LogStore, snapshot: str = "") -> set[str]:
    """Every table named by a published batch (any level) in the log store or held by the
    snapshot folder ``snapshot``: the names a user may ask for. Reads manifests only.

    Args:
        store (LogStore): the master's log folder (its storage holds the snapshot too).
        snapshot (str): a snapshot's folder ("": none).

    Returns:
        set[str]: qualified table names.

    Raises:
        BatchError: a manifest is missing or damaged.
    """
    out = _snapshot_tables(store.storage, snapshot)
    for batch in store.batches() + store.compacted():
        out |= {rec.table for rec in store.manifest(batch).txns}
    return out


def check_tables(asked: Iterable[str], known: set[str], where: str) -> None:
    """Refuse the first of ``asked`` that matches none of ``known``, naming the nearest
    (``events`` finds ``app.events``; as PostgreSQL's CREATE PUBLICATION refuses an unknown table).

    Args:
        asked (Iterable[str]): names or ``fnmatch`` patterns, case-insensitive.
        known (set[str]): the tables that exist (:func:`known_tables`).
        where (str): where they were looked for, for the message (``in master 'm' (...)``).

    Raises:
        NotFoundError: a name or pattern matches no table.
    """
    import fnmatch

    from wlcore.databases import did_you_mean
    from wlcore.errors import NotFoundError

    low = {t.lower() for t in known}
    for name in asked:
        if not fnmatch.filter(low, name.lower()):
            raise NotFoundError(
                f"no table {name!r} {where}" + did_you_mean(name, sorted(known), "tables") + " (write schema.table)"
            )


def _check_table(table: str, seen: set[str], storage: Storage, cfg: MasterState, master: str) -> None:
    """Raise NotFoundError when ``table`` is in no published transaction (``seen``) and not in
    the newest snapshot, naming the nearest tables."""
    if table.lower() in {t.lower() for t in seen}:
        return  # a published transaction names it: the snapshot need not be read
    known = set(seen) | _snapshot_tables(storage, cfg.snapshot)
    check_tables([table], known, f"in the published transactions of master {master!r}")


def _sources(store: LogStore) -> list[BatchRef]:
    """The batches to read, in batch order: every level-0 batch, and where level 0 was pruned the
    finest compacted batch that remains."""
    sources = store.batches()
    covered = {b.number for b in sources}
    compacted = store.compacted()
    for level in (1, 2):
        for b in compacted:
            if b.level == level and not covered & set(range(b.first, b.last + 1)):
                sources.append(b)
                covered |= set(range(b.first, b.last + 1))
    return sorted(sources)


def _label(batch: BatchRef) -> str:
    """How a row names its batch: a level-0 batch's number, a compacted batch's folder name."""
    return str(batch.number) if batch.level == 0 else batch.name


class _Sources:
    """The batches :func:`transactions` reads, each manifest read at most once: a lower bound is
    found by bisection (transaction ids follow commit time, as capture orders them), so a query
    of the newest transactions reads a few manifests, not the whole log."""

    def __init__(self, store: LogStore, listed: list[BatchRef]):
        self.store, self.listed = store, listed
        self._read: dict[int, list[TxnRecord]] = {}

    def records(self, index: int) -> list[TxnRecord]:
        """The records of the ``index``-th batch. Raises wlc.BatchError when it is damaged."""
        if index not in self._read:
            self._read[index] = self.store.manifest(self.listed[index]).txns
        return self._read[index]

    def _reaches(self, index: int, lo: Target) -> bool:
        """True when a transaction at or after ``lo`` is in the batches up to ``index`` (monotonic)."""
        for i in range(index, -1, -1):  # a batch without transactions: the one before it decides
            records = self.records(i)
            if records:
                return any(not lo.precedes(rec.txn, rec.time) for rec in records)
        return False

    def first_not_before(self, lo: Target | None) -> int:
        """The index of the first batch that may hold a transaction at or after ``lo`` (0: none given)."""
        if lo is None:
            return 0
        low, high = 0, len(self.listed)
        while low < high:
            mid = (low + high) // 2
            if self._reaches(mid, lo):
                high = mid
            else:
                low = mid + 1
        return max(0, low - 1)  # one batch earlier: a commit-time tie across tables stays inside


def _row(rec: TxnRecord, batch: str) -> dict:
    """One row of :func:`transactions`: the record ``rec`` of the batch named ``batch``."""
    row = {
        "txn": rec.txn,
        "gtid": rec.gtid,
        "time": utc_iso(rec.time),
        "table": rec.table,
        "operation": rec.operation,
        "rows": {k: v for k, v in rec.counts.items() if v},
        "batch": int(batch) if batch.isdigit() else batch,
    }
    if rec.first is not None:
        row["first"] = rec.first
    return row


def last_published(master: str, dbfarm: str | None = None, logs: str | None = None) -> int:
    """The last transaction master ``master`` published (its ``tick``; -1: none yet), as its
    ``wlc.config`` (or that of its shipped copy at ``logs``) says.

    Raises:
        ReplicaStateError: the database is not a master; ``logs`` holds no shipped copy of it.
    """
    return _master(master, dbfarm, logs)[2].tick


def transactions(
    master: str,
    dbfarm: str | None = None,
    *,
    table: str | None = None,
    operation: str | None = None,
    since: int | str | datetime | None = None,
    until: int | str | datetime | None = None,
    logs: str | None = None,
) -> list[dict]:
    """The published transactions of master ``master``, oldest first.

    Args:
        master: the master database's name.
        dbfarm: folder holding it; default ``$WLC_DBFARM`` or ``dbfarm`` in config.
        table: only this table (``"schema.table"``, case-insensitive).
        operation: only operations starting with this text, case-insensitive (``"DROP"``
            finds ``DROP TABLE``; Delta's names otherwise: ``WRITE``, ``MERGE``, ``DELETE``...).
        since: inclusive lower bound: a transaction id (int or digits) or an instant
            (datetime, naive meaning UTC, or an ISO-8601 string), as ``replicate(until=...)``.
        until: inclusive upper bound, of the same kinds as ``since``.
        logs: read a shipped copy of the logs at this folder or URL (``wlc ship``) instead.

    Returns:
        ``[{"txn": int, "gtid": str, "time": ISO-8601 UTC str, "table": str, "operation":
        str, "rows": {change type: count}, "batch": int}]``.

    Raises:
        ReplicaStateError: the database is not a master.
        wlc.NotFoundError: no such database, or ``table`` is in no published transaction and not in
            the newest snapshot (the nearest tables are named).
        TargetError: a bound is neither a transaction id nor an instant.
        wlc.BatchError: a published batch is damaged.
    """
    lo, hi = _bound(since), _bound(until)
    storage, path, cfg = _master(master, dbfarm, logs)
    store = LogStore(storage, path, logs_of(cfg, path), database_of(cfg, master))
    sources = _Sources(store, _sources(store))
    out, seen = [], set()
    for index in range(sources.first_not_before(lo), len(sources.listed)):
        name = _label(sources.listed[index])
        records = sources.records(index)
        for rec in records:
            seen.add(rec.table)
            if table is not None and rec.table.lower() != table.lower():
                continue
            if operation is not None and not rec.operation.upper().startswith(operation.upper()):
                continue
            if _within(rec, lo, hi):
                out.append(_row(rec, name))
        if hi is not None and records and not any(hi.admits(rec.txn, rec.time) for rec in records):
            break  # transaction ids follow commit time (wlc.capture): every later batch is past ``until`` too
    if table is not None and table.lower() not in {t.lower() for t in seen}:
        seen = known_tables(store)  # the range read did not name it: every batch
    if table is not None:
        _check_table(table, seen, storage, cfg, master)
    return out


def snapshots(master: str, dbfarm: str | None = None, logs: str | None = None) -> list[dict]:
    """The snapshots of master ``master`` a new replica can start from, oldest first.

    Args:
        master (str): the master's name.
        dbfarm (str | None): the master's dbfarm (None: ``$WLC_DBFARM`` or config).
        logs (str | None): a shipped copy to read instead of the master's folder (folder or URL).

    Returns:
        list[dict]: ``[{"txn": int (-1: the start of master mode), "time": ISO-8601 UTC str or
        None, "batch": last level-0 batch held, "path": str ("" for an empty start)}]``.

    Raises:
        ReplicaStateError: the database is not a master.
    """
    from wlcore.snapshots import list_snapshots

    storage, path, cfg = _master(master, dbfarm, logs)
    return [
        {"txn": s.txn, "time": utc_iso(s.time) if s.time else None, "batch": s.batch, "path": s.path}
        for s in list_snapshots(
            storage, path, cfg.snapshot, LogStore(storage, path, logs_of(cfg, path), database_of(cfg, master))
        )
    ]


def format_table(rows: Iterable[dict], columns: tuple[str, ...] = COLUMNS) -> str:
    """Rows as aligned text columns with a header line; a piece's txn shows as ``first-txn``.

    Args:
        rows (Iterable[dict]): rows of :func:`transactions` (or of :func:`snapshots`).
        columns (tuple[str, ...]): the keys to show, in order (``SNAPSHOT_COLUMNS`` for snapshots).

    Returns:
        str: the lines joined by newlines.
    """

    def cell(row: dict, col: str) -> str:
        value = row[col]
        if col == "rows":
            return " ".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
        if col == "txn" and row.get("first") is not None:
            return f"{row['first']}-{value}"
        if col == "path" and not value:
            return "empty start (the master had no table: replicas start empty)"
        if col == "batch" and value == -1:
            return "-"
        if value is None or value == "":
            return "-"
        return value.isoformat() if isinstance(value, datetime) else str(value)

    cells = [[cell(r, c) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in cells]
    return "\n".join(lines)
