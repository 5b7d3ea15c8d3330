"""Compaction: runs of published batches merged into coarser batches (levels 1 and 2).

A level-1 batch merges a run of consecutive level-0 batches (for example those of one hour),
a level-2 batch a run of level-1 batches (one day): MusicBrainz's hourly, daily and weekly
packets, compacted as MusicBrainz wished they were, and Litestream's levels. For each table,
each run of its change-feed transactions between two barriers (DDL, full images, ALTERs that
add columns, transactions whose rows were lost) becomes one *piece*: the net change of the
run, in one file at the run's last master version (keyed: each key's state before and after,
nothing for a key whose state did not change, :func:`wlcore.collapse.compact_by_key`; unkeyed:
each row image's net count, :func:`wlcore.collapse.compact_by_image`). Barriers are
kept as they are, with their files. The manifest records the range of level-0 batches and
transactions, the watermark at its end, and checksums as every batch; the batch is built in
``<logs>/.compact-<db>-...`` and published by one rename beside the level-0 batches, which
stay until retention prunes them.

Cost: one Spark read, aggregation and write per piece of more than one transaction
(O(change rows of the run)); a one-transaction piece is copied as files.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from wlcore import batch as batchfmt
from wlcore.batch import Manifest, TxnRecord
from wlcore.deltalog import TableMeta
from wlcore.errors import BatchError
from wlcore.faults import crash_point
from wlcore.levels import Span, runs_to_merge
from wlcore.names import batch_folder
from wlcore.settings import Every
from wlcore.storage import Storage

from .capture import CHANGE_TYPE, CHANGE_TYPES, VERSION_COLUMN

log = logging.getLogger("wlc.compaction")

STAGING = ".compact-"


def spans(storage: Storage, logs: str, dbname: str, level: int, after_batch: int = -1, span_of=None) -> list[Span]:
    """The published batches of ``level`` whose first level-0 batch is after ``after_batch``, as spans.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder (``<master>/wlc_logs`` or a shipped copy).
        dbname (str): the master database's name (the batches' name prefix).
        level (int): 0, 1 or 2.
        after_batch (int): the last level-0 batch number to skip (-1: none).
        span_of (Callable[[str], Span] | None): ``f(batch path)`` -> its span, a caller's cache of
            the manifests (which never change); None reads each manifest.

    Returns:
        list[Span]: ascending by first level-0 batch.

    Raises:
        BatchError: a manifest is missing or damaged.
    """
    if level == 0:
        found = batchfmt.list_batches(storage, logs, dbname, after_batch + 1)
    else:
        found = [
            (first, path)
            for lv, first, _last, path in batchfmt.list_compacted(storage, logs, dbname)
            if lv == level and first > after_batch
        ]
    if span_of is None:
        return [Span.of(batchfmt.read_manifest(storage, path), path) for _n, path in found]
    return [span_of(path) for _n, path in found]


def last_batch_of(storage: Storage, logs: str, dbname: str, level: int) -> int:
    """The last level-0 batch held by the newest batch of ``level``.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        dbname (str): the master database's name.
        level (int): a compacted level (1 or 2).

    Returns:
        int: a level-0 batch number; -1 when the level has no batch.
    """
    return max((last for lv, _f, last, _p in batchfmt.list_compacted(storage, logs, dbname) if lv == level), default=-1)


def _level_inputs(storage: Storage, logs: str, dbname: str, level: int, span_of=None) -> tuple[list[Span], list[Span]]:
    """``(lower, upper)`` for :func:`wlcore.levels.runs_to_merge` at ``level``: the batches of the level
    below after the newest batch of ``level``, and that newest batch (none: empty)."""
    upper_last = last_batch_of(storage, logs, dbname, level)
    lower = spans(storage, logs, dbname, level - 1, upper_last, span_of)
    return lower, ([Span(level, upper_last, upper_last, -1, -1, None)] if upper_last >= 0 else [])


def compact(
    spark,
    storage: Storage,
    logs: str,
    dbname: str,
    dbid: str,
    every: dict[int, Every],
    watermark: datetime,
    metas_before,
    progress=None,
    span_of=None,
) -> list[Span]:
    """Make every level-1 and level-2 batch that is due (:func:`wlcore.levels.runs_to_merge`).

    Args:
        spark (SparkSession): the session that reads, merges and writes the change rows.
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder (``<master>/wlc_logs``).
        dbname (str): the master database's name.
        dbid (str): the database id (written into the new manifests, as in every GTID).
        every (dict[int, Every]): ``{1: Every, 2: Every}`` (``master.compact.level1`` /
            ``level2``); a level missing or None is not made.
        watermark (datetime): the master's watermark (UTC): time windows ending after it stay open.
        metas_before (Callable[[int], dict[str, TableMeta]]): ``f(level-0 batch number)`` ->
            ``{table: TableMeta}`` in force before that batch (which tables are keyed, and by what).
        progress (Callable[[str], None] | None): called with a line per batch made (None: silent).
        span_of (Callable[[str], Span] | None): ``f(batch path)`` -> its span, passed to
            :func:`spans` (a caller's cache of manifests).

    Returns:
        list[Span]: the batches made, in order (level 1 first).

    Raises:
        BatchError: an input batch is damaged (nothing of that run is published).
    """
    from tqdm.auto import tqdm

    made = []
    for level in (1, 2):
        if every.get(level) is None:
            continue
        lower, upper = _level_inputs(storage, logs, dbname, level, span_of)
        runs = runs_to_merge(lower, upper, every[level], watermark)
        # a bar when it takes over 2 s, on a terminal or in a notebook only
        for run in tqdm(runs, desc=f"compact level {level}", unit="batch", delay=2.0, disable=None, leave=False):
            span = merge(spark, storage, logs, dbname, dbid, level, run, metas_before)
            made.append(span)
            if progress is not None:
                progress(
                    f"compacted {len(run)} level-{level - 1} batches into {span.name}: "
                    f"transactions {span.first_txn}..{span.last_txn}"
                )
    return made


def next_due(
    storage: Storage, logs: str, dbname: str, every: dict[int, Every], watermark: datetime, span_of=None
) -> list[str]:
    """A line per level saying when its next compacted batch is due (:func:`wlcore.levels.next_due`);
    reads manifests only (no Spark).

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        dbname (str): the master database's name.
        every (dict[int, Every]): ``{1: Every, 2: Every}`` as for :func:`compact`.
        watermark (datetime): the master's watermark (UTC).
        span_of (Callable[[str], Span] | None): ``f(batch path)`` -> its span (None: read each manifest).

    Returns:
        list[str]: one line for each level with a setting, level 1 first.

    Raises:
        BatchError: a manifest is missing or damaged.
    """
    from wlcore.levels import next_due as due

    out = []
    for level in (1, 2):
        if every.get(level) is None:
            continue
        lower, upper = _level_inputs(storage, logs, dbname, level, span_of)
        out.append(due(lower, upper, every[level], watermark, level))
    return out


def merge(
    spark, storage: Storage, logs: str, dbname: str, dbid: str, level: int, run: list[Span], metas_before
) -> Span:
    """Merge the batches of ``run`` into one batch of ``level``, published beside them.

    Every input file is verified against its checksum first.

    Args:
        spark (SparkSession): the session that merges the change rows.
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        dbname (str): the master database's name.
        dbid (str): the database id (written into the manifest).
        level (int): the level to make (1 or 2).
        run (list[Span]): consecutive batches of the level below, ascending.
        metas_before (Callable[[int], dict[str, TableMeta]]): ``f(level-0 batch number)`` ->
            ``{table: TableMeta}`` in force before that batch.

    Returns:
        Span: the new batch.

    Raises:
        BatchError: an input file fails its checksum or a manifest is damaged; nothing is
            published (the staging folder is removed).
    """
    manifests = []
    for s in run:
        m = batchfmt.read_manifest(storage, s.path)
        problems = batchfmt.verify_files(storage, s.path, m)
        if problems:
            raise BatchError(
                f"cannot compact {s.name}: "
                + "; ".join(f"{f}: {p}" for f, p in sorted(problems.items())[:3])
                + "; restore it from a copy, then compact again"
            )
        manifests.append((s.path, m))
    staging = Storage.join(logs, f"{STAGING}{dbname}-L{level}-{run[0].first_batch:012d}-{uuid.uuid4().hex[:8]}")
    storage.makedirs(staging)
    try:
        metas = dict(metas_before(run[0].first_batch))
        records: list[TxnRecord] = []
        open_runs: dict[str, list[tuple[str, TxnRecord]]] = {}

        def close(table: str) -> None:
            items = open_runs.pop(table, None)
            if items:
                records.append(_piece(spark, storage, staging, items, metas.get(table)))

        for path, m in manifests:
            for rec in m.txns:
                if rec.change == "cdf" and rec.ddl is None and not rec.lost:
                    open_runs.setdefault(rec.table, []).append((path, rec))
                    continue
                close(rec.table)
                records.append(_barrier(storage, staging, path, rec))
                if rec.ddl == "drop":
                    metas.pop(rec.table, None)
                elif rec.meta:
                    metas[rec.table] = TableMeta.from_json(rec.meta)
        for table in list(open_runs):
            close(table)
        records.sort(key=lambda r: r.txn)
        last = manifests[-1][1]
        crash_point("compact.staged")
        manifest = Manifest(
            database=dbname,
            dbid=dbid,
            batch=run[0].first_batch,
            watermark=last.watermark,
            txns=records,
            cursors=last.cursors,
            level=level,
            last_batch=run[-1].last_batch,
            span=(run[0].first_txn, run[-1].last_txn),
            epochs=last.epochs,
        )
        final = batchfmt.publish(storage, logs, staging, manifest)
    except BaseException:
        storage.rm(staging)
        raise
    return Span.of(manifest, final)


def _barrier(storage: Storage, staging: str, path: str, rec: TxnRecord) -> TxnRecord:
    """``rec`` as it is, its files copied under ``txn/<txn>/``."""
    out = TxnRecord.from_json(rec.to_json())
    if rec.rows:
        out.rows = f"txn/{rec.txn}/{rec.rows}"
        storage.copy_tree(Storage.join(path, rec.rows), Storage.join(staging, out.rows))
    return out


def _piece(
    spark, storage: Storage, staging: str, items: list[tuple[str, TxnRecord]], meta: TableMeta | None
) -> TxnRecord:
    """The net change of one table's run of change-feed transactions ``items`` as one record."""
    first, last = items[0][1], items[-1][1]
    with_rows = [(p, r, rows) for p, r in items if (rows := r.rows) and any(r.counts.values())]
    rel = f"rows/{batch_folder(last.table)}/{first.start}-{last.txn}"
    out = TxnRecord(
        txn=last.txn,
        gtid=last.gtid,
        time=last.time,
        table=last.table,
        version=last.version,
        operation=last.operation
        if len(items) == 1 and first.first is None
        else f"NET OF {last.txn - first.start + 1} TRANSACTIONS",
        change="cdf",
        user=last.user,
        first=first.start if first.start != last.txn else None,
    )
    if not with_rows:
        return out
    out.rows = rel
    if len(with_rows) == 1:  # one transaction's (or one piece's) rows: already net, copied as files
        p, r, rows_path = with_rows[0]
        src = Storage.join(p, rows_path)
        dst = Storage.join(staging, rel)
        if rows_path.rsplit("/", 1)[-1].startswith(f"{VERSION_COLUMN}="):
            dst = Storage.join(dst, rows_path.rsplit("/", 1)[-1])
        storage.copy_tree(src, dst)
        out.counts = dict(r.counts)
        return out
    from pyspark.sql import Observation, functions as F

    from wlcore import collapse  # imports pyspark, as here: `wlc status` and `wlc prune` start without it

    rows = collapse.read_rows(spark, [storage.uri(Storage.join(p, rows_path)) for p, _r, rows_path in with_rows])
    assert last.version is not None  # a change-feed record names the master version it read
    keys = [k for k in (meta.key_columns if meta else []) if k in rows.columns]
    net = collapse.compact_by_key(rows, keys, last.version) if keys else collapse.compact_by_image(rows, last.version)
    seen = Observation()
    tallies = [F.count_if(F.col(CHANGE_TYPE) == t).alias(t) for t in CHANGE_TYPES]
    # every row at the piece's last version: one folder, one file (coalesce: one writer task)
    (
        net.observe(seen, *tallies)
        .coalesce(1)
        .write.mode("overwrite")
        .partitionBy(VERSION_COLUMN)
        .parquet(storage.uri(Storage.join(staging, rel)))
    )
    out.counts = {t: int(n) for t, n in seen.get.items() if n}
    return out
