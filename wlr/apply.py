"""Applying master transactions to a replica's Delta tables (net change -> Delta).

A DML segment (a run of change-feed transactions of one table, see :func:`wlr.planner.segments`)
lands as exactly one Delta commit: its change rows are collapsed (:mod:`wlr.collapse`) and
applied by one MERGE, or one append when only inserts remain. The commit is tagged in
``commitInfo.userMetadata`` with ``wlr:<master dbid>:<first>-<last>`` (``...:<txn>`` for
one transaction) and carries Delta's idempotent-write marker (``txnAppId=wlc:<master
dbid>``, ``txnVersion=<last txn>``), so replaying it twice changes nothing.

A barrier (DDL or a full image) is one transaction; when it needs several commits the
intermediate ones are tagged ``...:<txn>:part`` and a tagged final commit ends it. A
transaction counts as applied only when a final commit covering it exists, and the final
commit is always its last (a crash before it repeats the idempotent steps, one after it
repeats nothing). Rows are found by the key columns of the ``wlc.key`` table property
when declared, else by the full row image with exact duplicate counts.

What a transaction record (:class:`wlcore.batch.TxnRecord`) must carry for its kind (the table
definition of a create, alter or image: :func:`definition`; the folder of its change rows or
image: :func:`rows_of`) is read here; a record that lacks it comes from a damaged batch and is
refused by name.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any, TypedDict

from pyspark.sql import DataFrame, functions as F

from wlcore import collapse
from wlcore.batch import TxnRecord
from wlcore.deltalog import TableMeta, checksum_size, is_delta_table, read_commit
from wlcore.discovery import delta_ref
from wlcore.names import quote_ident
from wlcore.storage import Storage
from wlcore.tabledef import IDENTITY_START, exact_session

from .ddl import TableDDL
from .merge import ApplyError, Merger, key_range
from .rewrite import Rewriter
from .select import Selection
from .tables import ReplicaTables
from .tags import FINAL_PROPERTY, tag

log = logging.getLogger("wlr.apply")


class Landed(TypedDict, total=False):
    """How a segment landed (:meth:`Applier.apply_segment`)."""

    rows_in: int  # change rows read
    rows_out: int  # rows after collapse (-1: not known)
    how: str  # "append", "merge", "rewrite" (:mod:`wlr.rewrite`) or "commit" (no rows)
    engine: str  # "spark", or "delta-rs" (:mod:`wlr.deltars`)


def replay_session(base):
    """A child session of ``base`` for replay: its own SQL settings (tags, idempotent
    markers), so threads applying different tables never see each other's settings.

    Args:
        base (SparkSession): the replica's session.

    Returns:
        SparkSession: ``base.newSession()`` with the replica tables' exact definition settings.
    """
    session = base.newSession()
    # replica tables carry the master's definition (change feed, deletion vectors...), nothing else
    exact_session(session)
    # a replica table's log is read once per catch-up and holds few commits: one partition
    # rebuilds its state with the least scheduling (Delta's default is 50)
    session.conf.set("spark.databricks.delta.snapshotPartitions", "1")
    return session


def definition(rec: TxnRecord) -> TableMeta:
    """The table definition a create, alter or image record carries.

    Args:
        rec (TxnRecord): the transaction record.

    Returns:
        TableMeta: the definition after the transaction.

    Raises:
        ApplyError: the record carries none (its batch was written wrong or damaged).
    """
    if not rec.meta:
        raise ApplyError(
            f"transaction {rec.txn} ({rec.ddl or rec.change} of {rec.table}) carries no table "
            "definition: its batch is damaged; restore the batch, or skip the transaction with wlr.accept()"
        )
    return TableMeta.from_json(rec.meta)


def rows_of(rec: TxnRecord) -> str:
    """The folder, inside its batch, of the change rows or image a record carries.

    Args:
        rec (TxnRecord): the transaction record.

    Returns:
        str: the folder relative to the batch (``rows/<schema.table>/...``).

    Raises:
        ApplyError: the record has none (its batch was written wrong or damaged).
    """
    if not rec.rows:
        raise ApplyError(
            f"transaction {rec.txn} ({rec.change} of {rec.table}) carries no rows: its batch is "
            "damaged; restore the batch, or skip the transaction with wlr.accept()"
        )
    return rec.rows


# a keyed MERGE on a table of more bytes than this (and more than one file) skips the files that
# cannot hold the segment's keys; a smaller table is read whole in less than the job finding them
SKIP_FILES_FROM = 16 * 1024 * 1024


class Applier:
    """Applies transaction records of master ``dbid`` to the replica database at ``replica_path``.

    Args:
        spark (Callable[[], SparkSession]): returns the session to apply with, called once, at the
            first Spark use (checks that read only Delta logs need no session).
        storage (Storage): the storage holding the replica.
        replica_path (str): the replica's folder (path or URL).
        dbid (str): the master's database id (in every replay tag and idempotent marker).
        logs_storage (Storage | None): the storage the batches' change rows are read from
            (None: ``storage``).
    """

    def __init__(
        self,
        spark: Callable[[], Any],
        storage: Storage,
        replica_path: str,
        dbid: str,
        logs_storage: Storage | None = None,
    ):
        self._make_spark = spark
        self._spark: Any = None
        self._job_properties: dict[str, str] = {}  # Spark's local properties of this applier's thread
        self.storage = storage
        self.logs_storage = logs_storage or storage  # where the batches' change rows are read
        self.replica_path = replica_path
        self.dbid = dbid
        self.app_id = f"wlc:{dbid}"
        self.tables = ReplicaTables(storage, replica_path, dbid)
        self.selection: Selection | None = None  # the replica's tables and rows (None: every table, every row)
        self.ddl = TableDDL(self)
        self.merger = Merger(lambda: self.spark, self.tagged)
        self.rewriter = Rewriter(lambda: self.spark, self.tagged, self.app_id)
        self.deltars_limit = 0  # bytes up to which a table takes a segment through delta-rs; set by replay
        self._deltars: Any = None

    @property
    def spark(self):
        """The applier's SparkSession, made on first use (with the job properties set inside
        :meth:`job_property`)."""
        if self._spark is None:
            self._spark = self._make_spark()
            for key, value in self._job_properties.items():
                self._spark.sparkContext.setLocalProperty(key, value)
        return self._spark

    @contextmanager
    def job_property(self, key: str, value: str):
        """Spark's thread-local property ``key`` (e.g. ``spark.job.description``) set to ``value``
        for the jobs this thread runs inside: now when the session exists, else when a job first
        needs it (a segment delta-rs lands starts no session and makes no call to the JVM)."""
        self._job_properties[key] = value
        if self._spark is not None:
            self._spark.sparkContext.setLocalProperty(key, value)
        try:
            yield
        finally:
            del self._job_properties[key]
            if self._spark is not None:
                self._spark.sparkContext.setLocalProperty(key, None)

    @property
    def deltars(self):
        """The applier's :class:`wlr.deltars.DeltaRs`, made on first use (delta-rs and pyarrow are
        imported by the first segment, not by a replica's set-up or ``wlr status``)."""
        if self._deltars is None:
            from . import deltars

            opened = self.tables.opened
            self._deltars = deltars.DeltaRs(
                self.app_id, lambda: self.deltars_limit, lambda: self.rewriter.limit, opened
            )
        return self._deltars

    def fork(self) -> "Applier":
        """An Applier on the same replica with its own Spark session (for another thread)."""
        out = Applier(lambda: replay_session(self.spark), self.storage, self.replica_path, self.dbid, self.logs_storage)
        out.selection = self.selection
        out.rewriter.limit = self.rewriter.limit
        out.deltars_limit = self.deltars_limit
        out.tables.opened = self.tables.opened  # delta-rs's tables kept open, shared by the threads
        return out

    # ------------------------------------------------------------------ applying
    @contextmanager
    def tagged(self, text: str, version: int | None = None):
        """Commits made inside carry the replay tag ``text``; with ``version``, also Delta's
        idempotent marker (SQL commands; DataFrame writes pass it as options)."""
        conf = self.spark.conf
        conf.set("spark.databricks.delta.commitInfo.userMetadata", text)
        if version is not None:
            conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
            conf.set("spark.databricks.delta.write.txnVersion", str(version))
        try:
            yield
        finally:
            conf.unset("spark.databricks.delta.commitInfo.userMetadata")
            if version is not None:
                conf.unset("spark.databricks.delta.write.txnAppId")
                conf.unset("spark.databricks.delta.write.txnVersion")

    def row_filter(self, table: str):
        """The replica's row filter of ``table`` (:mod:`wlr.select`) as a Column (NULL counts as false), or None."""
        pred = self.selection.predicate(table) if self.selection is not None else None
        return None if pred is None else F.coalesce(F.expr(pred), F.lit(False))

    def part(self, rec: TxnRecord) -> str:
        """The tag of a part commit of ``rec`` (every commit of a transaction but its last)."""
        return tag(self.dbid, rec.txn, part=True)

    def apply(self, batch_path: str, rec: TxnRecord) -> Landed | None:
        """Apply ``rec`` (its rows under ``batch_path``). Returns how its change rows landed
        (:meth:`apply_segment`; None: a DDL or image transaction). Raises ApplyError with the cause."""
        path = self.tables.table_path(rec.table)
        uri = self.storage.uri(path)
        exists = self.tables.current_version(rec.table) >= 0  # a Delta table with at least one commit
        if rec.ddl in ("drop", "create"):
            self.tables.forget(rec.table)  # a table made again starts its versions anew: the cache is stale
        if rec.ddl == "drop":
            if is_delta_table(self.storage, path):
                self.storage.rm(path)
            return None
        if rec.ddl == "create":
            if exists and self.tables.last_final_txn(rec.table) < 0 and not self.tables.created_by_replay(rec.table):
                raise ApplyError(f"table {rec.table} already exists on the replica and was not made by replay")
            if not exists and self.storage.exists(path):
                self.storage.rm(path)  # left by a CREATE killed before its first commit: nothing in it is visible
            self.ddl.create(rec.table, delta_ref(uri), definition(rec), self.part(rec))
        elif not exists:
            raise ApplyError(f"table {rec.table} does not exist on the replica")
        elif rec.ddl == "alter" and rec.change != "image":
            self.ddl.alter(rec.table, delta_ref(uri), definition(rec), rec.ops, self.part(rec))
        if rec.change == "cdf":
            return self.apply_segment([(batch_path, rec)])
        if rec.change == "image":
            rows = self.spark.read.parquet(self.logs_storage.uri(Storage.join(batch_path, rows_of(rec))))
            keep = self.row_filter(rec.table)
            self._replace(rec, uri, rows if keep is None else rows.filter(keep), definition(rec))
            return None
        # DDL only: one tagged commit records the transaction
        self._mark_final(tag(self.dbid, rec.txn), rec.txn, uri)
        return None

    def _mark_final(self, text: str, txn: int, uri: str) -> None:
        """The final commit (tag ``text``) when the last step was not one: a property commit."""
        with self.tagged(text):
            self.spark.sql(f"ALTER TABLE {delta_ref(uri)} SET TBLPROPERTIES ('{FINAL_PROPERTY}' = '{txn}')")

    def _replace(self, rec: TxnRecord, uri: str, rows: DataFrame, meta: TableMeta) -> None:
        """Replace the table's content (and definition, where it changed) by the image
        (:meth:`wlr.ddl.TableDDL.replace`). The rows land in one idempotent commit (Delta
        skips it when its txnVersion is already in the log); a final commit ends the
        transaction unless that write was the last step, so a crash anywhere repeats only
        what is missing and never skips a constraint."""
        from pyspark.sql.types import StructType

        schema = StructType.fromJson(meta.schema)

        def write_rows(df: DataFrame, final: bool) -> None:
            out = df.select(*[F.col(quote_ident(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields])
            with self.tagged(tag(self.dbid, rec.txn, part=not final)):
                (
                    out.write.format("delta")
                    .mode("overwrite")
                    .option("txnAppId", self.app_id)
                    .option("txnVersion", rec.txn)
                    .save(uri)
                )

        if not self.ddl.replace(rec.table, delta_ref(uri), rec, rows, meta, write_rows):
            self._mark_final(tag(self.dbid, rec.txn), rec.txn, uri)

    # ------------------------------------------------------------------ DML
    def _detail(self, name: str, uri: str) -> tuple[int, int]:
        """The size in bytes and the number of data files of replica table ``name`` (at ``uri``):
        from its current version's checksum file, else its log read by delta-rs (local folders),
        else Delta's ``DESCRIBE DETAIL`` (which rebuilds the table's state: three Spark jobs on a
        small table)."""
        path = self.tables.table_path(name)
        found = checksum_size(self.storage, path, self.tables.current_version(name))
        local = self.storage.os_path(path)
        if found is None and local is not None:  # a commit delta-rs made has no checksum
            from .deltars import size_of

            found = size_of(local)
        if found is not None:
            return found
        row = self.spark.sql(f"DESCRIBE DETAIL {delta_ref(uri)}").select("sizeInBytes", "numFiles").first()
        return (int(row[0] or 0), int(row[1] or 0)) if row is not None else (0, 0)

    def _append(self, text: str, txn: int, uri: str, rows: DataFrame, evolve: bool) -> None:
        """Append ``rows`` to the table at ``uri`` in one commit tagged ``text``, idempotent for
        ``txn`` (Delta's txnAppId/txnVersion); ``evolve``: the rows add columns."""
        with self.tagged(text):
            (
                rows.write.format("delta")
                .mode("append")
                .option("txnAppId", self.app_id)
                .option("txnVersion", txn)
                .option("mergeSchema", str(evolve).lower())
                .save(uri)
            )

    def apply_segment(self, items: list[tuple[str, TxnRecord]]) -> Landed:
        """Apply a DML segment as one commit: ``items`` are ``(batch path, record)`` of one
        table, ascending: change-feed transactions and ALTERs that only add nullable columns
        (``TxnRecord.adds``; the commit adds them, by MERGE schema evolution).

        Returns :class:`Landed`: the change rows read, the rows after collapse and how the segment
        landed (an append, a MERGE, a whole rewrite of a small table, or a commit without rows).

        Raises:
            ApplyError: the table is missing, or rows to delete or update are not on the
                replica (it has diverged from the master).
        """
        from pyspark.sql.types import StructType

        first, last = items[0][1], items[-1][1]
        name = first.table
        uri = self.storage.uri(self.tables.table_path(name))
        if self.tables.current_version(name) < 0:
            raise ApplyError(f"table {name} does not exist on the replica")
        text = tag(self.dbid, last.txn, first=first.start)
        alters = [r for _, r in items if r.ddl == "alter"]
        shape = definition(alters[-1]) if alters else None
        meta = self.tables.current_meta(name)
        evolve = shape is not None and bool(set(shape.columns) - set(meta.columns if meta else []))
        with_rows = [(p, r) for p, r in items if r.change == "cdf" and any(r.counts.values())]
        rows_in = sum(sum(r.counts.values()) for _, r in with_rows)
        if not with_rows:  # no change rows: the columns (when added) and one tagged final commit
            for alter in alters:
                part = tag(self.dbid, last.txn, part=True, first=first.txn)
                self.ddl.alter(name, delta_ref(uri), definition(alter), alter.ops, part)
            self._mark_final(text, last.txn, uri)
            return {"rows_in": 0, "rows_out": 0, "how": "commit"}
        landed = self._land_deltars(name, meta, shape, with_rows, text, first.txn, last.txn)
        if landed is not None:
            return {"rows_in": rows_in, "rows_out": landed[0], "how": landed[1], "engine": "delta-rs"}
        # the files' own schema unless the segment adds columns: a file that lacked a column of
        # an imposed schema would read NULL there without a word
        rows = collapse.read_rows(
            self.spark,
            [self.logs_storage.uri(Storage.join(p, rows_of(r))) for p, r in with_rows],
            StructType.fromJson(shape.schema) if shape is not None else None,
        )
        cols = collapse.data_columns(rows)
        have = set(meta.columns if meta else cols)
        keys = [k for k in (meta.key_columns if meta else []) if k in cols and k in have]
        kinds = {k for _, r in with_rows for k, v in r.counts.items() if v}
        keep = self.row_filter(name)  # selective replication: the rows the replica carries
        schema = StructType.fromJson(meta.schema) if meta else None  # the table's, as its log says
        how = "append" if kinds <= {"insert"} else "merge"
        if how == "append":
            out = rows.select(*[quote_ident(c) for c in cols])
            self._append(text, last.txn, uri, out if keep is None else out.filter(keep), evolve)
        elif keys:
            how = self._by_key(name, uri, text, last.txn, rows, meta, keys, evolve, keep)
        else:
            net = collapse.net_by_image(rows)
            net = net if keep is None else net.filter(keep)
            self.merger.by_image(text, last.txn, uri, net, cols, have, evolve, schema)
        newest = read_commit(self.storage, self.tables.table_path(name), self.tables.current_version(name))
        rows_out = rows_in if how == "append" else int(newest.metrics.get("numSourceRows", -1))
        log.debug("txns %d-%d on %s: %d change rows, %d after collapse", first.txn, last.txn, name, rows_in, rows_out)
        return {"rows_in": rows_in, "rows_out": rows_out, "how": how, "engine": "spark"}

    def _by_key(
        self, name: str, uri: str, text: str, txn: int, rows: DataFrame, meta, keys: list[str], evolve: bool, keep
    ) -> str:
        """Land keyed change ``rows`` by Spark: one whole rewrite of a small table, else one MERGE
        (reading only the files that may hold the segment's keys, on a big table). Returns how."""
        from pyspark.sql.types import StructType

        cols = collapse.data_columns(rows)
        identity = tuple(
            f["name"]
            for f in (meta.schema.get("fields", []) if meta else [])
            if (f.get("metadata") or {}).get(IDENTITY_START) is not None
        )
        net = collapse.net_by_key(rows, keys)
        size, files = self._detail(name, uri)
        table = None if identity or evolve else self.rewriter.fits(uri, size, net, cols)
        if table is not None:  # a small table: one rewrite costs less than a MERGE's two passes
            self.rewriter.by_key(text, txn, uri, table, net, keys, keep)
            return "rewrite"
        prune = key_range(rows, keys) if files > 1 and size > SKIP_FILES_FROM else None
        schema = StructType.fromJson(meta.schema) if meta else None  # the table's, as its log says
        self.merger.by_key(text, txn, uri, net, cols, keys, evolve, keep, identity, schema, prune)
        return "merge"

    def _land_deltars(
        self,
        name: str,
        meta: TableMeta | None,
        shape: TableMeta | None,
        with_rows: list[tuple[str, TxnRecord]],
        text: str,
        first: int,
        txn: int,
    ) -> tuple[int, str] | None:
        """The segment (transactions ``first`` to ``txn``) landed through delta-rs (:mod:`wlr.deltars`)
        when it may be: no row filter, local folders, and a table, change rows and added columns
        (``shape``: the definition after the segment's ALTERs, None: none) delta-rs writes
        exactly; None: Spark lands it."""
        path = self.storage.os_path(self.tables.table_path(name))
        filtered = self.selection is not None and self.selection.predicate(name) is not None
        if self.deltars_limit <= 0 or meta is None or filtered or path is None:
            return None
        files = []
        for p, r in with_rows:
            folder = self.logs_storage.os_path(Storage.join(p, rows_of(r)))
            if folder is None:
                return None
            for rel in self.logs_storage.walk_files(folder):
                # Spark's reader leaves out files and folders whose names start with "_" or "."
                if rel.endswith(".parquet") and not any(part[:1] in "_." for part in rel.split("/")):
                    files.append(os.path.join(folder, rel))
        kinds = {k for _, r in with_rows for k, v in r.counts.items() if v}
        part = tag(self.dbid, txn, part=True, first=first)
        return self.deltars.land(path, meta, files, meta.key_columns, kinds <= {"insert"}, text, txn, shape, part)
