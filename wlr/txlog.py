"""The transaction log viewer: a master's published transactions, to find a recovery target.

``wlr log <dbfarm> <master>`` and :func:`wlr.transactions` list what capture published
(txn id, GTID, commit time, table, operation, change rows by type, batch), filtered by
table, operation and a range of transaction ids or instants, so a user can find the
transaction just before a mistake (e.g. a ``DROP TABLE``) and replicate ``until`` it.
Only manifests are read (no Spark): the cost grows with the number of batches.
"""
from __future__ import annotations

from datetime import datetime
from typing import Iterable

from wlc import batch as batchfmt
from wlc.batch import TxnRecord, utc_iso
from wlc.config import dbfarm as resolve_dbfarm
from wlc.master import logs_of, read_config as read_master_config
from wlc.storage import Storage

from .errors import ReplicaStateError
from .plan import Target, parse_until

COLUMNS = ("txn", "gtid", "time", "table", "operation", "rows", "batch")


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
    if since is not None and (rec.txn < since.txn if since.kind == "txn" else rec.time < since.time):
        return False
    if until is not None and (rec.txn > until.txn if until.kind == "txn" else rec.time > until.time):
        return False
    return True


def transactions(master: str, dbfarm: str | None = None, *, table: str | None = None,
                 operation: str | None = None, since=None, until=None) -> list[dict]:
    """The published transactions of master ``master``, oldest first.

    Args:
        master: the master database's name.
        dbfarm: folder holding it; default ``$WLC_DBFARM`` or ``dbfarm`` in config.
        table: only this table (``"schema.table"``, case-insensitive).
        operation: only operations starting with this text, case-insensitive (``"DROP"``
            finds ``DROP TABLE``; Delta's names otherwise: ``WRITE``, ``MERGE``, ``DELETE``...).
        since, until: inclusive bounds, each a transaction id (int or digits) or an instant
            (datetime, naive meaning UTC, or an ISO-8601 string), as ``replicate(until=...)``.

    Returns:
        ``[{"txn": int, "gtid": str, "time": ISO-8601 UTC str, "table": str, "operation":
        str, "rows": {change type: count}, "batch": int}]``.

    Raises:
        ReplicaStateError: the database is not a master.
        TargetError: a bound is neither a transaction id nor an instant.
        wlc.BatchError: a published batch is damaged.
    """
    lo, hi = _bound(since), _bound(until)
    farm = resolve_dbfarm(dbfarm)
    storage = Storage.of(farm)
    path = Storage.join(farm, master)
    cfg = read_master_config(storage, path)
    if cfg is None:
        raise ReplicaStateError(f"{path} is not a master (no wlc.config); check the dbfarm and the master's name")
    logs = logs_of(cfg, path)
    out = []
    for number, batch_path in batchfmt.list_batches(storage, logs, master):
        for rec in batchfmt.read_manifest(storage, batch_path).txns:
            if table is not None and rec.table.lower() != table.lower():
                continue
            if operation is not None and not rec.operation.upper().startswith(operation.upper()):
                continue
            if _within(rec, lo, hi):
                out.append({"txn": rec.txn, "gtid": rec.gtid, "time": utc_iso(rec.time), "table": rec.table,
                            "operation": rec.operation, "rows": {k: v for k, v in rec.counts.items() if v},
                            "batch": number})
    return out


def format_table(rows: Iterable[dict]) -> str:
    """``rows`` of :func:`transactions` as aligned text columns with a header line."""
    def cell(row: dict, col: str) -> str:
        value = row[col]
        if col == "rows":
            return " ".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
        return value.isoformat() if isinstance(value, datetime) else str(value)
    cells = [[cell(r, c) for c in COLUMNS] for r in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in cells]
    return "\n".join(lines)
