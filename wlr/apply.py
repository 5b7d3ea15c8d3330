"""The applier: master transactions applied to a replica's Delta tables (net change -> Delta).

One module for the whole of it: the :class:`Applier` (a segment or a barrier to its commits),
the keyed and unkeyed MERGE (:class:`Merger`), the file rewrite of a table whose change touches
most of it (:class:`Rewriter`), DDL and images (:class:`TableDDL`), the replay tags on each commit
(:func:`tag`, :func:`parse_tag`), the conformance of change rows to the replica's columns
(:func:`conformed`), the replica's tables read back from their Delta logs
(:class:`ReplicaTables`) and the Arrow engine for small segments (:class:`ArrowEngine`; delta-rs
and pyarrow are imported by its functions, so importing this module loads neither).

A DML segment (a run of change-feed transactions of one table, see :func:`wlr.planner.segments`)
lands as exactly one Delta commit: its change rows are collapsed (:mod:`wlcore.collapse`) and
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

import errno
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypedDict

from pyspark.sql import Column, DataFrame, functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    NumericType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from wlcore import __version__, collapse, tabledef
from wlcore.batch import TxnRecord
from wlcore.collapse import FIRST, OP, all_same, canon
from wlcore.deltalog import (
    Snapshot,
    TableMeta,
    checksum_size,
    commit_stamp,
    delta_ref,
    delta_rs_refusal,
    file_stats,
    is_delta_table,
    latest_version,
    list_versions,
    meta_after,
    metadata_at,
    read_commit,
    read_snapshot,
    versions_after,
    versions_newest_first,
    write_checksum,
    write_commit,
)
from wlcore.faults import crash_point
from wlcore.names import quote_ident, split_name
from wlcore.session import LateSession
from wlcore.storage import Storage
from wlcore.tabledef import IDENTITY_START, create_sql, definition as table_definition, exact_session, sql_string

from .errors import ApplyError
from .planner import Item, Limits, is_barrier, span_text
from .select import Selection

if TYPE_CHECKING:
    import pyarrow as pa


# MERGE source columns given the replica table's required (NOT NULL) nested fields.
#
# Change rows come back from Parquet with every field nullable. A Delta MERGE casts each assigned
# source column to the target column's type, and Spark refuses to cast ``STRUCT<a: INT>`` to
# ``STRUCT<a: INT NOT NULL>`` (a nested field, an array element or a map value that may be NULL
# into one that may not), although an append of the same rows is accepted and checked row by row.
# :func:`conformed` rebuilds such a column with the target's nullability: each struct by
# ``named_struct`` (never NULL itself), each array and map by ``transform``/``transform_values``,
# and each required value as ``coalesce(value, raise_error(...), <a constant of its type>)``: a NULL
# there (which the master's own NOT NULL check never lets in) fails the MERGE's job naming the
# field, and the constant, never reached, only tells Spark the value cannot be NULL.


_NULL_IN_REQUIRED = "wlr-null-in-required-field: "


def required_inside(t: DataType) -> bool:
    """True when ``t`` holds a field, element or value that may not be NULL.

    Args:
        t (DataType): a column's type.
    """
    if isinstance(t, StructType):
        return any(not f.nullable or required_inside(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return not t.containsNull or required_inside(t.elementType)
    if isinstance(t, MapType):
        return not t.valueContainsNull or required_inside(t.valueType) or required_inside(t.keyType)
    return False


def conformed(ref: str, t: DataType, required: bool = False) -> str:
    """SQL for the value ``ref`` with the nested nullability of ``t`` (``ref`` itself when ``t``
    requires nothing inside and ``required`` is False).

    Args:
        ref (str): a SQL expression of the value (e.g. ``s.`col```), of ``t`` with nullable insides.
        t (DataType): the target column's type.
        required (bool): the value itself may not be NULL (False for a top-level column: Delta
            checks those row by row).

    Returns:
        str: the SQL expression.

    Raises:
        NotImplementedError: a required value of a type without a constant here (the MERGE then
            reports Spark's own error).
    """
    if not required and not required_inside(t):
        return ref
    if isinstance(t, StructType):
        parts = ", ".join(
            f"{sql_string(f.name)}, {conformed(f'{ref}.{quote_ident(f.name)}', f.dataType, not f.nullable)}"
            for f in t.fields
        )
        built = f"named_struct({parts})"  # never NULL itself
        return built if required else f"CASE WHEN {ref} IS NULL THEN NULL ELSE {built} END"
    if isinstance(t, ArrayType):
        out = f"transform({ref}, e -> {conformed('e', t.elementType, not t.containsNull)})"
    elif isinstance(t, MapType):
        out = f"transform_values({ref}, (k, v) -> {conformed('v', t.valueType, not t.valueContainsNull)})"
    else:
        out = ref
    if not required:
        return out
    fail = f"cast(raise_error({sql_string(_NULL_IN_REQUIRED + 'NULL in a NOT NULL field')}) as {t.simpleString()})"
    return f"coalesce({out}, {fail}, {_constant(t)})"


# a constant of each atomic type a required value may have (never NULL)
_CONSTANTS = (
    (StringType, "''"),
    (BinaryType, "X''"),
    (BooleanType, "false"),
    (DateType, "DATE'1970-01-01'"),
    (TimestampNTZType, "TIMESTAMP_NTZ'1970-01-01 00:00:00'"),
    (TimestampType, "TIMESTAMP'1970-01-01 00:00:00Z'"),
)


def _constant(t: DataType) -> str:
    """A constant of type ``t`` (never NULL)."""
    if isinstance(t, (ArrayType, MapType)):
        return f"cast({'array()' if isinstance(t, ArrayType) else 'map()'} as {t.simpleString()})"
    if isinstance(t, NumericType):
        return f"cast(0 as {t.simpleString()})"
    for kind, constant in _CONSTANTS:
        if isinstance(t, kind):
            return constant
    raise NotImplementedError(f"no constant of type {t.simpleString()}")


# The MERGEs that land a collapsed segment on a replica table, and selective replication's
# row filter (:mod:`wlr.select`) on the way in.
#
# A part of :class:`wlr.apply.Applier`, which gives it its Spark session and the context that
# tags a replay commit.


_DIVERGED = "wlr-diverged: "  # marks the error a keyed MERGE raises for a key missing on the replica


_KIND = "__wlr_kind"  # unkeyed MERGE source: "del" (match every copy), "ins" (a copy to insert), "bad"


_CK = "__wlr_ck"  # a row image's canonical form (wlcore.collapse): what unkeyed matching compares


# key types whose order Delta's file statistics (min, max) keep exactly enough to skip files by a range
_RANGED = (ByteType, ShortType, IntegerType, LongType, DecimalType, DateType, StringType)


def key_range(rows: DataFrame, keys: list[str]) -> Column | None:
    """A condition on the target ``t`` that every row holding one of ``rows``' keys meets: each
    key column of an ordered type between the least and the greatest value the change rows
    hold (or NULL, when they hold NULL there). A MERGE that adds it to its ON condition reads
    only the files whose statistics overlap the range (Delta's data skipping of target-only
    predicates), without changing which rows match, since every source key is in the range.
    Changes to a table laid out by its key (keys growing with time, refresh sets of TPC-H) then
    touch a few files, not all of them.

    Args:
        rows (DataFrame): the segment's change rows (one job reads their key columns).
        keys (list[str]): the key columns (``wlc.key``).

    Returns:
        Column | None: the condition, or None when no key column has an ordered type.
    """
    fields = [rows.schema[k] for k in keys if isinstance(rows.schema[k].dataType, _RANGED)]
    if not fields:
        return None
    aggs = []
    for i, f in enumerate(fields):
        c = F.col(quote_ident(f.name))
        aggs += [F.min(c).alias(f"lo{i}"), F.max(c).alias(f"hi{i}"), F.max(c.isNull()).alias(f"null{i}")]
    found = rows.agg(*aggs).first()
    cond = F.lit(True)
    for i, f in enumerate(fields):
        t = F.col(f"t.{quote_ident(f.name)}")
        lo, hi = found[f"lo{i}"], found[f"hi{i}"]
        part = t.between(F.lit(lo).cast(f.dataType), F.lit(hi).cast(f.dataType)) if lo is not None else F.lit(False)
        cond = cond & ((part | t.isNull()) if found[f"null{i}"] else part)
    return cond


def _image_key(df: DataFrame, cols: list[str]):
    """The canonical form of ``df``'s row image over ``cols`` as one comparable struct."""
    types = {f.name: f.dataType for f in df.schema.fields}
    return F.struct(*[canon(F.col(quote_ident(c)), types[c]).alias(f"c{i}") for i, c in enumerate(cols)])


class Merger:
    """The MERGEs of :class:`wlr.apply.Applier`.

    Args:
        spark (LateSession): the applier's Spark session (the one of the thread applying; made at its first use).
        tagged: ``tagged(text, version)``, the context in which a commit carries the replay tag
            ``text`` and Delta's idempotent marker ``version`` (:meth:`wlr.apply.Applier.tagged`).
    """

    def __init__(self, spark: LateSession, tagged: Callable[[str, int], AbstractContextManager]):
        self._session = spark
        self._tagged = tagged

    @property
    def spark(self):
        """The applier's Spark session."""
        return self._session()

    def by_key(
        self,
        text: str,
        version: int,
        uri: str,
        net: DataFrame,
        cols: list[str],
        keys: list[str],
        evolve: bool = False,
        keep=None,
        fixed: tuple[str, ...] = (),
        schema: StructType | None = None,
        prune: Column | None = None,
    ) -> None:
        """Apply a keyed net change by one MERGE: last state per key, upsert where the key exists
        after the segment, else delete.

        A key whose first change was a delete or a pre-image must be on the replica: the
        MERGE's own join checks it (a not-matched such key fails the job, nothing is committed).
        An update sets every column but the keys (equal by the match) and ``fixed``.

        Args:
            text (str): the replay tag of the commit.
            version (int): the segment's last transaction (Delta's idempotent ``txnVersion``).
            uri (str): the replica table's URI.
            net (DataFrame): the net change, one row per key (:func:`wlcore.collapse.net_by_key`).
            cols (list[str]): the table's data columns.
            keys (list[str]): the key columns (``wlc.key``).
            evolve (bool): the commit adds columns (MERGE schema evolution).
            keep (Column | None): the replica's row filter; a key whose state after fails it is
                deleted (moved out), one that passes is upserted (moved in), and a key may be
                missing on the replica. None: every row.
            fixed (tuple[str, ...]): identity columns: never updated (Delta refuses to, and the
                master could not change them either).
            schema (StructType | None): the table's schema now (its nested NOT NULL fields shape
                the assignments, :mod:`wlr.apply`); None: every column assigned as it is.
            prune (Column | None): a condition on the target that every row with one of the
                segment's keys meets (:func:`key_range`), added to the ON condition so that Delta
                reads only the files that may hold them; None: every file is read.

        Raises:
            ApplyError: a key to delete or update is not on the replica (it has diverged).
        """
        qk = [quote_ident(k) for k in keys]
        on = all_same("t", "s", [net.schema[k] for k in keys])
        if prune is not None:
            on = on & prune
        source = _source_values(cols, schema)
        values = {quote_ident(c): source[c] for c in cols}
        updates = {quote_ident(c): source[c] for c in cols if c not in keys and c not in fixed}
        check = [("insert", f"s.{collapse.FIRST} = 0", {qk[0]: diverged(qk)})]
        if keep is not None:
            net, check = net.withColumn(collapse.OP, F.col(collapse.OP) & keep), []
        self._merge(
            text,
            version,
            uri,
            net,
            on,
            evolve,
            [
                *([("update", f"s.{collapse.OP}", updates)] if updates else []),
                ("delete", f"NOT s.{collapse.OP}", None),
                *check,
                ("insert", f"s.{collapse.OP}", values),
            ],
            materialize=False,
        )

    def by_image(
        self,
        text: str,
        version: int,
        uri: str,
        net: DataFrame,
        cols: list[str],
        have_cols: set[str],
        evolve: bool = False,
        schema: StructType | None = None,
    ) -> None:
        """Apply an unkeyed net change by one MERGE, with multiset semantics: deleting one of two
        identical rows leaves one.

        Every copy of an image whose count drops is deleted and the copies that remain are
        inserted again; images whose count grows get the new copies. An image with fewer copies
        on the replica than the segment deletes fails the MERGE's own job (nothing is committed).

        Args:
            text (str): the replay tag of the commit.
            version (int): the segment's last transaction (Delta's idempotent ``txnVersion``).
            uri (str): the replica table's URI.
            net (DataFrame): each image's net count (:func:`wlcore.collapse.net_by_image`).
            cols (list[str]): the table's data columns after the segment.
            have_cols (set[str]): the table's columns now; the others are added by this commit
                (``evolve``) and are NULL in every row the table has.
            evolve (bool): the commit adds columns (MERGE schema evolution).
            schema (StructType | None): the table's schema now (as :meth:`by_key` takes it).

        Raises:
            ApplyError: the replica has fewer copies of an image than the segment deletes (it has diverged).
        """
        qc = [quote_ident(c) for c in cols]
        old = [c for c in cols if c in have_cols]
        new = [quote_ident(c) for c in cols if c not in have_cols]
        n = collapse.COUNT
        pos = net.filter(F.col(n) > 0)
        neg = net.filter(F.col(n) < 0)
        neg_k = neg.withColumn(_CK, _image_key(neg, cols))
        target = self.spark.read.format("delta").load(uri)
        target = target.select(
            *[
                F.col(q) if c in have_cols else F.lit(None).cast(net.schema[c].dataType).alias(c)
                for c, q in zip(cols, qc)
            ]
        )
        target = target.select(_image_key(target, cols).alias(_CK))
        have = (
            target.alias("t")
            .join(
                F.broadcast(neg_k.select(_CK)).alias("n"),
                on=F.col(f"t.{_CK}").eqNullSafe(F.col(f"n.{_CK}")),
                how="left_semi",
            )
            .groupBy(_CK)
            .count()
        )
        left = (
            neg_k.alias("n")
            .join(have.alias("h"), on=F.col(f"n.{_CK}").eqNullSafe(F.col(f"h.{_CK}")), how="left")
            .select(
                *[F.col(f"n.{q}").alias(c) for c, q in zip(cols, qc)],
                (F.coalesce(F.col("h.count"), F.lit(0)) + F.col(f"n.{n}")).alias(n),
            )
        )
        # "del" rows match every copy of their image; "bad" rows (more deleted than there
        # are) never match and reach the raise_error clause
        source = (
            left.select(*qc, F.when(F.col(n) < 0, F.lit("bad")).otherwise(F.lit("del")).alias(_KIND))
            .unionByName(
                collapse.repeat(left.filter(F.col(n) > 0), F.col(n)).select(*qc).withColumn(_KIND, F.lit("ins"))
            )
            .unionByName(collapse.repeat(pos, F.col(n)).select(*qc).withColumn(_KIND, F.lit("ins")))
        )
        on = all_same("t", "s", [net.schema[c] for c in old])
        for q in new:
            on = on & F.col(f"s.{q}").isNull()
        on = on & (F.col(f"s.{_KIND}") == F.lit("del"))
        values = dict(zip(qc, _source_values(cols, schema).values()))  # in the order of cols
        self._merge(
            text,
            version,
            uri,
            source,
            on,
            evolve,
            [
                ("delete", None, None),
                ("insert", f"s.{_KIND} = 'bad'", {qc[0]: diverged(qc)}),
                ("insert", f"s.{_KIND} = 'ins'", values),
            ],
        )

    def _merge(
        self,
        text: str,
        version: int,
        uri: str,
        source: DataFrame,
        on,
        evolve: bool,
        clauses: list[tuple[str, str | None, dict | None]],
        materialize: bool = True,
    ) -> None:
        """One tagged, idempotent MERGE of ``source`` into the table at ``uri``.

        ``clauses``: ``("update" | "delete", condition, set)`` for matched rows, ``("insert",
        condition, values)`` for not-matched source rows, in order. ``evolve``: the source
        has columns the table lacks (an ADD COLUMNS inside the segment); the commit adds them.
        ``materialize`` False: MERGE reads ``source`` again instead of copying it first (right
        when the source is immutable published Parquet and cheap to read twice).

        Raises ApplyError when a ``raise_error`` clause fired (the replica has diverged).
        """
        from delta.tables import DeltaTable

        conf = self.spark.conf
        builder = DeltaTable.forPath(self.spark, uri).alias("t").merge(source.alias("s"), on)
        for kind, cond, assign in clauses:
            if kind == "update":
                builder = builder.whenMatchedUpdate(condition=cond, set=assign)
            elif kind == "delete":
                builder = builder.whenMatchedDelete(condition=cond)
            else:
                builder = builder.whenNotMatchedInsert(condition=cond, values=assign)
        if evolve:
            builder = builder.withSchemaEvolution()
        with self._tagged(text, version):
            if not materialize:  # the source is immutable published Parquet: MERGE need not copy it
                conf.set("spark.databricks.delta.merge.materializeSource", "none")
            try:
                with raise_diverged():
                    builder.execute()
            finally:
                if not materialize:
                    conf.unset("spark.databricks.delta.merge.materializeSource")


def _source_values(cols: list[str], schema: StructType | None) -> dict[str, str]:
    """The SQL assigning each of ``cols`` from source ``s``: ``s.<col>``, rebuilt with the nested
    NOT NULL fields of the table's ``schema`` where it has any (:mod:`wlr.apply`)."""
    types = {f.name: f.dataType for f in schema.fields} if schema is not None else {}
    out = {}
    for c in cols:
        ref = f"s.{quote_ident(c)}"
        try:
            out[c] = conformed(ref, types[c]) if c in types else ref
        except NotImplementedError:  # Spark then names the type it cannot cast
            out[c] = ref
    return out


@contextmanager
def raise_diverged() -> Iterator[None]:
    """Inside, a Spark job failed by :func:`diverged`'s expression raises :class:`ApplyError`
    naming the row (any other error goes on as it is).

    Raises:
        ApplyError: the replica has diverged from the master.
    """
    try:
        yield
    except Exception as exc:
        # the error raise_error threw names the row as JSON; an error about the plan (a type
        # mismatch, say) quotes the expression itself, which is not a divergence
        found = re.search(re.escape(_DIVERGED) + r"(\{.*\})", str(exc))
        if found is None:
            raise
        raise ApplyError(
            f"rows to delete or update are not on the replica (e.g. {found.group(1)}); "
            "the replica has diverged from the master"
        ) from None


def diverged(quoted: list[str]) -> str:
    """The SQL expression that fails a MERGE job naming the source row ``s`` (columns ``quoted``)."""
    return f"raise_error(concat('{_DIVERGED}', to_json(struct({', '.join(f's.{q}' for q in quoted)}))))"


# A keyed segment landed on a small replica table by rewriting the whole table in one commit.
#
# A Delta MERGE pays a fixed cost before it touches data: a join of the source with the target to
# find the files that hold matched rows, then a second pass that rewrites those files. On a table of
# a few files that is the whole table twice. Reading the table once, leaving out the keys the segment
# changes, adding their states after it and overwriting the table in one commit lands the same rows
# for less (``bench/small_apply.py``: 0.71x a MERGE on 1,000-row tables), with the same replay tag
# and Delta idempotent marker, so a crash repeats nothing. Divergence is refused inside the same job:
# a key whose first change in the segment was a delete or an update and that the table lacks makes
# the write's own tasks fail (``raise_error``), so nothing is committed.
#
# Used only with collapse on (``replicate(collapse=False)`` keeps one MERGE per master transaction
# for jobs that read the replica's change feed: a rewrite shows there as every row deleted and
# inserted again), for tables at most ``replica.rewrite_bytes`` big, without identity columns or
# deletion vectors (where the master marks a few rows deleted in a vector, the replica's MERGE does
# the same rather than writing every file again), when the segment adds no columns and its change
# rows have the table's columns and types.
#
# A part of :class:`wlr.apply.Applier`, which gives it its Spark session and the context that tags a
# replay commit.


class Rewriter:
    """Whole-table rewrites of :class:`wlr.apply.Applier`.

    Args:
        spark (LateSession): the applier's Spark session (the one of the thread applying; made at its first use).
        tagged: ``tagged(text, version)``, the context in which a commit carries the replay tag
            ``text`` and Delta's idempotent marker ``version`` (:meth:`wlr.apply.Applier.tagged`).
        app_id (str): Delta's ``txnAppId`` of this master's replay (``wlc:<master dbid>``).
    """

    def __init__(self, spark: LateSession, tagged: Callable[..., AbstractContextManager], app_id: str):
        self._session = spark
        self._tagged = tagged
        self._app_id = app_id

    def fits(self, uri: str, size: int, net: DataFrame, cols: list[str], limit: int) -> DataFrame | None:
        """The table at ``uri`` read for a rewrite, or None when a MERGE must land the segment.

        A rewrite fits a table of at most ``limit`` bytes whose columns and types are the
        segment's.

        Args:
            uri (str): the replica table's URI.
            size (int): the table's size in bytes (Delta's ``DESCRIBE DETAIL`` ``sizeInBytes``).
            net (DataFrame): the segment's net change (:func:`wlcore.collapse.net_by_key`).
            cols (list[str]): the segment's data columns.
            limit (int): the size in bytes up to which a table is rewritten (0: never;
                ``replica.rewrite_bytes``).

        Returns:
            DataFrame | None: the table's current rows, or None.
        """
        if limit <= 0 or size > limit:
            return None
        table = self._session().read.format("delta").load(uri)
        have = {f.name: f.dataType.simpleString() for f in table.schema.fields}
        want = {c: net.schema[c].dataType.simpleString() for c in cols}
        return table if have == want else None

    def by_key(
        self,
        text: str,
        version: int,
        uri: str,
        table: DataFrame,
        net: DataFrame,
        keys: list[str],
        keep=None,
    ) -> None:
        """Rewrite the table at ``uri`` with the keyed net change applied, in one commit: the rows
        of keys the segment leaves alone, then the state after the segment of every key that
        exists after it (and, with ``keep``, passes the replica's row filter).

        Args:
            text (str): the replay tag of the commit.
            version (int): the segment's last transaction (Delta's idempotent ``txnVersion``).
            uri (str): the replica table's URI.
            table (DataFrame): the table's current rows (:meth:`fits`).
            net (DataFrame): the net change, one row per key (:func:`wlcore.collapse.net_by_key`).
            keys (list[str]): the key columns (``wlc.key``).
            keep (Column | None): the replica's row filter (a key may then be missing on the
                replica, as in :meth:`wlr.apply.Merger.by_key`). None: every row.

        Raises:
            ApplyError: a key to delete or update is not on the table (the replica has diverged).
        """
        cols = table.columns
        qc = [quote_ident(c) for c in cols]
        on = all_same("t", "s", [net.schema[k] for k in keys])
        stay = table.alias("t").join(net.alias("s"), on, "left_anti").select(*qc)
        upsert = F.col(collapse.OP) if keep is None else F.col(collapse.OP) & keep
        out = stay.unionByName(net.filter(upsert).select(*qc))
        if keep is None:  # a key that must be there and is not fails the write's own tasks
            missing = net.filter(F.col(collapse.FIRST) == 0).alias("s").join(table.alias("t"), on, "left_anti")
            first = table.schema[cols[0]].dataType
            fail = F.expr(diverged([quote_ident(k) for k in keys])).cast(first).alias(cols[0])
            out = out.unionByName(missing.select(fail, *[F.col(f"s.{q}").alias(c) for c, q in zip(cols[1:], qc[1:])]))
        writer = (
            out.write.format("delta")
            .mode("overwrite")
            .option("partitionOverwriteMode", "static")  # every partition, whatever the session says
            .option("txnAppId", self._app_id)
            .option("txnVersion", version)
        )
        with self._tagged(text), raise_diverged():
            writer.save(uri)


# Making and reshaping replica tables as the master's transaction records define them.
#
# A ``create`` makes the table with its whole definition (:func:`wlcore.tabledef.create_sql`); an
# ``alter`` applies the ALTER TABLE operations capture recorded (:mod:`wlcore.tabledef`), each
# skipped when a resumed replay finds it done; a full image that changes the table's columns
# (a replaced table, an ``overwriteSchema`` write) replaces the table by its definition and
# the image's rows. After each, the replica table's definition is compared with the
# master's, so a change Delta would carry out otherwise than on the master stops replay
# loudly instead of leaving a table that looks right and is not.
#
# Every commit of a transaction but its last is a *part* commit (tag ``...:<txn>:part``); the
# caller's final commit ends it (see :mod:`wlr.apply`).


class TableDDL:
    """The DDL side of an :class:`wlr.apply.Applier` (it owns one).

    Args:
        spark (LateSession): the applier's Spark session (the one of the thread applying).
        tagged: ``tagged(text)``, the context in which a commit carries the replay tag ``text``
            (:meth:`wlr.apply.Applier.tagged`).
        tables (ReplicaTables): the replica's tables, read back from their Delta logs.
    """

    def __init__(self, spark: LateSession, tagged: Callable[..., AbstractContextManager], tables: "ReplicaTables"):
        self._session = spark
        self._tagged = tagged
        self.tables = tables
        self.app_id = tables.app_id

    @property
    def spark(self):
        """The applier's SparkSession (the one of the thread this DDL runs in)."""
        return self._session()

    def create(self, name: str, ref: str, meta: TableMeta, part: str) -> None:
        """Create the replica table ``name`` at ``ref`` as ``meta`` defines it (CHECK
        constraints already there, after a resumed create, are not added again).

        Args:
            name (str): the table, ``schema.table``.
            ref (str): the table as SQL names it (``delta.`<uri>```).
            meta (TableMeta): the definition the create record carries.
            part (str): the replay tag of its commits (a part commit: the transaction's final
                commit comes after).
        """
        have = self.tables.current_meta(name)
        with self._tagged(part):
            for stmt in create_sql(ref, meta):
                if (
                    " ADD CONSTRAINT " in stmt
                    and have is not None
                    and _constraint_of(stmt) in {k.lower() for k in have.constraints}
                ):
                    continue
                self.spark.sql(stmt)

    def alter(self, name: str, ref: str, meta: TableMeta, ops: list | None, part: str) -> None:
        """Bring the replica table ``name`` to the definition ``meta`` by ALTER TABLE statements,
        skipping the operations already done (a resumed replay), then check the result.

        Args:
            name (str): the table, ``schema.table``.
            ref (str): the table as SQL names it (``delta.`<uri>```).
            meta (TableMeta): the definition after the change.
            ops (list | None): the recorded ALTER operations (:mod:`wlcore.tabledef`); None: a record of
                an older capture, the change is worked out by name from the replica's definition.
            part (str): the replay tag of its commits (part commits).

        Raises:
            ApplyError: the change has no ALTER TABLE form, or the table is not defined as ``meta`` after it.
        """
        if ops is None:
            ops = tabledef.diff(self.tables.current_meta(name), meta, by_name=True)
            if ops is None:
                raise ApplyError(f"the change of table {name}'s definition has no ALTER TABLE form on the replica")
        # the features a record of an older capture does not list (a record that lists them switches
        # on exactly the master's first: a preview name where the master has one)
        needed = tabledef.features_needed(ops) if meta.features is None else {}
        if needed:
            ops = [{"op": "set_properties", "properties": needed}, *ops]
        with self._tagged(part):
            for op in ops:
                if tabledef.done(op, self.tables.current_meta(name)):
                    continue
                for stmt in tabledef.statements(ref, [op]):
                    self.spark.sql(stmt)
        self.check(name, meta)

    def replace(self, name: str, ref: str, rec, rows, meta: TableMeta, write_rows) -> bool:
        """Replace the replica table's definition and content by ``meta`` and the image ``rows``:
        REPLACE TABLE when its columns change (the rows then land in an idempotent commit of their
        own), else the rows overwrite it and ALTER operations bring the rest of its definition along.

        Args:
            name (str): the table, ``schema.table``.
            ref (str): the table as SQL names it (``delta.`<uri>```).
            rec (TxnRecord): the image's transaction record.
            rows (DataFrame): the image's rows (the replica's row filter applied).
            meta (TableMeta): the definition the image carries.
            write_rows (Callable[[DataFrame, bool], None]): ``write_rows(df, final)`` writes the rows
                with Delta's idempotent marker, as the transaction's final commit or a part commit.

        Returns:
            bool: True when the rows' write was the transaction's final commit (nothing else to
            change); False: the caller makes the final commit.

        Raises:
            ApplyError: the table is not defined as ``meta`` afterwards.
        """
        old = self.tables.current_meta(name)
        ops = tabledef.diff(old, meta, by_name=True) if old is not None else None
        reshape = ops is None or any(op["op"] in tabledef.COLUMN_OPS for op in ops)
        part = tag(self.tables.dbid, rec.txn, part=True)
        if reshape:
            if not self.written(name, rec.txn):
                with self._tagged(part):
                    for stmt in create_sql(ref, meta):
                        if stmt.startswith("CREATE TABLE IF NOT EXISTS "):
                            # REPLACE TABLE: a path's table (CREATE OR REPLACE refuses another schema there)
                            self.spark.sql("REPLACE TABLE " + stmt[len("CREATE TABLE IF NOT EXISTS ") :])
                        break
                crash_point("replay.image_reshaped")
                write_rows(rows, False)
            crash_point("replay.image_overwritten")
            self.alter(
                name,
                ref,
                meta,
                [
                    op
                    for op in tabledef.diff(self.tables.current_meta(name), meta, by_name=True) or []
                    if op["op"] in ("add_constraint", "drop_constraint")
                ],
                part,
            )
            return False
        if not ops and not self.tables.resuming(name, rec.txn):
            write_rows(rows, True)
            return True
        if not self.written(name, rec.txn):
            write_rows(rows, False)
        crash_point("replay.image_overwritten")
        self.alter(name, ref, meta, ops, part)
        return False

    def written(self, name: str, txn: int) -> bool:
        """True when the table's log already holds the rows' commit of ``txn`` (Delta's idempotent
        marker ``txnAppId``/``txnVersion``) after its newest final replay commit.

        Args:
            name (str): the table, ``schema.table``.
            txn (int): the transaction.
        """
        path = self.tables.table_path(name)
        for v in versions_newest_first(self.tables.storage, path):
            commit = read_commit(self.tables.storage, path, v)
            if commit.txns.get(self.app_id) == txn:
                return True
            found = self.tables.tag_at(path, v)
            if found is None or found[0] != txn:
                return False
        return False

    def check(self, name: str, meta: TableMeta) -> None:
        """Raise ApplyError when the replica table ``name`` is not defined as ``meta``
        (:func:`wlcore.tabledef.definition`).

        Args:
            name (str): the table, ``schema.table``.
            meta (TableMeta): the definition it must have.

        Raises:
            ApplyError: the definitions differ; the message names each difference.
        """
        have = self.tables.current_meta(name)
        want, got = table_definition(meta), table_definition(have) if have is not None else None
        if got is not None and "features" not in want:
            got.pop("features", None)  # a record of an older capture does not say the master's features
        if want != got:
            raise ApplyError(
                f"table {name} on the replica is not defined as on the master after its change of "
                f"definition: {_difference(want, got)}"
            )


def _constraint_of(stmt: str) -> str:
    return stmt.split(" ADD CONSTRAINT ", 1)[1].split(" CHECK ", 1)[0].strip("`").replace("``", "`").lower()


def _difference(want: dict, got: dict | None) -> str:
    if got is None:
        return "the table is missing"
    parts = []
    for key in want:
        if want[key] != got.get(key):
            parts.append(
                f"{key}: master {json.dumps(want[key], sort_keys=True)[:300]}, "
                f"replica {json.dumps(got.get(key), sort_keys=True)[:300]}"
            )
    return "; ".join(parts)


# The replay tags: what replay's commits on a replica table say in ``commitInfo.userMetadata``.
#
# ``wlr:<master dbid>:<first>-<last>`` (``...:<txn>`` for one transaction) on the commit that lands
# a segment or a transaction; ``...:part`` on the intermediate commits of a transaction that needs
# several (a barrier: DDL or a full image), whose final commit carries the tag without it. A
# transaction counts as applied only when a final commit covering it is in the table's log: each
# table's progress is read back from its own Delta log (:class:`wlr.apply.Applier`).


TAG_PREFIX = "wlr:"


FINAL_PROPERTY = "wlr.txn"


def tag(dbid: str, txn: int, part: bool = False, first: int | None = None) -> str:
    """The replay tag of a commit of transaction ``txn``.

    Args:
        dbid (str): the master's database id.
        txn (int): the last transaction the commit applies.
        part (bool): the commit does not end the transaction (``...:part``).
        first (int | None): the segment's first transaction (None: ``txn`` alone).

    Returns:
        str: ``wlr:<dbid>:<first>-<txn>`` (``wlr:<dbid>:<txn>`` for one transaction), with
        ``:part`` appended for a part commit.
    """
    return f"{TAG_PREFIX}{dbid}:{span_text(txn if first is None else first, txn)}" + (":part" if part else "")


def parse_span(text: str | None, dbid: str | None) -> tuple[int, int, bool] | None:
    """The transactions a replay tag of master ``dbid`` names (the inverse of :func:`tag`).

    Args:
        text (str | None): a commit's ``commitInfo.userMetadata`` (None: the commit has none).
        dbid (str | None): the master's database id (None: any master's).

    Returns:
        tuple[int, int, bool] | None: ``(first txn, last txn, final)``; None when ``text`` is not
        a replay tag of that master.
    """
    if not text or not text.startswith(TAG_PREFIX):
        return None
    owner, sep, tail = text[len(TAG_PREFIX) :].partition(":")
    if not sep or (dbid is not None and owner != dbid):
        return None
    rest = tail.split(":")
    first, _, last = rest[0].partition("-")
    try:
        return int(first), int(last or first), len(rest) == 1
    except ValueError:
        return None


def made_again_after(storage: Storage, table_path: str, version: int, tick: int) -> int | None:
    """The transaction after ``tick`` that replay's commit ``version`` of the replica table at
    ``table_path`` lands, when there is one: replay dropped the table and made it again since
    ``tick``, and its versions began anew (version ``version`` is another state than at ``tick``).

    Args:
        storage (Storage): the storage holding the replica.
        table_path (str): the replica table's folder.
        version (int): the Delta version read as the table at ``tick``.
        tick (int): a transaction id.

    Returns:
        int | None: the later transaction; None when the commit lands none after ``tick`` (or its
        JSON file is gone: the version is read from a checkpoint as it is).
    """
    try:
        commit = read_commit(storage, table_path, version)
    except FileNotFoundError:
        return None
    span = parse_span(commit.user_metadata, None)
    return span[1] if span is not None and span[1] > tick else None


def parse_tag(text: str | None, dbid: str) -> tuple[int, bool] | None:
    """The last transaction a replay tag of master ``dbid`` names, and whether the commit ends it.

    Args:
        text (str | None): a commit's ``commitInfo.userMetadata`` (None: the commit has none).
        dbid (str): the master's database id.

    Returns:
        tuple[int, bool] | None: ``(last txn, final)``; None when ``text`` is not a replay tag
        of that master.
    """
    span = parse_span(text, dbid)
    return None if span is None else (span[1], span[2])


# What a replica's tables hold, read back from their own Delta logs: their versions, their
# definitions, and the replay tags on their commits (:mod:`wlr.apply`), so that replay knows after a
# crash which transactions each table holds, and a write made by anyone but replay is seen; and
# the tables delta-rs landed segments on, kept open between segments (:class:`OpenTables`).
#
# Opening a table with delta-rs (``DeltaTable(path)``) reads its last checkpoint and every JSON
# commit after it: about 5 ms of CPU on a small table, paid by every segment a follower lands,
# round after round. A table kept from the previous segment is brought up to date instead
# (``update_incremental``: only the commits made since, about 0.5 ms), provided it is still the
# same table: the commit file of the version it was kept at must be the very file it was then (the
# same inode, size and modification time). A table dropped and made again by DDL, whose log begins
# anew, fails that check and is opened afresh; commits Spark made since (a segment delta-rs could
# not land, DDL that kept the table) are read by the update. This module loads neither delta-rs
# nor pyarrow before a table is opened (:mod:`wlr.apply`, which lands segments, loads both).


rs_log = logging.getLogger("wlr.deltars")  # delta-rs's tables and segments


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

    @property
    def app_id(self) -> str:
        """Delta's ``txnAppId`` of this master's replay (``wlc:<master dbid>``)."""
        return f"wlc:{self.dbid}"

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
        for v in versions_newest_first(self.storage, path):
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
        for v in versions_newest_first(self.storage, path):
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
        newest = latest_version(self.storage, path)
        return newest is not None and self.tag_at(path, newest) == (txn, False)

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
        after = (
            versions_after(self.storage, path, since_version)
            if since_version >= 0
            else list_versions(self.storage, path)
        )
        for v in after:
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
        version = latest_version(self.storage, self.table_path(name))
        return -1 if version is None else version

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
        rs_log.debug("%s: delta-rs cannot read it (%s)", path, exc)
        return None


class OpenTables:
    """What this process holds of each replica table a segment landed on in this process, by local
    folder: its state (:class:`wlcore.deltalog.Snapshot`, brought up to date from its log before
    each segment) and delta-rs's DeltaTable where a MERGE opened one; shared by the threads of a
    replay (a table's segments run one at a time, and a DeltaTable is taken out while used)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Any, int, tuple[int, int, int]]] = {}
        self._states: dict[str, Snapshot] = {}
        self._lock = threading.Lock()

    def snapshot(self, path: str) -> Snapshot | None:
        """The state of the table at local ``path`` at its latest version: the one held, brought
        up to date (only the commits since are read) while it is still the same table, else read
        afresh (:func:`wlcore.deltalog.read_snapshot`; None: not readable here).

        Raises:
            OSError: the log cannot be read.
            ValueError: a commit file is not JSON.
        """
        with self._lock:
            since = self._states.get(path)
        snap = read_snapshot(path, since)
        self.hold(path, snap)
        return snap

    def holds(self, path: str) -> bool:
        """True when a state of the table at local ``path`` is held."""
        with self._lock:
            return path in self._states

    def hold(self, path: str, snap: Snapshot | None) -> None:
        """Hold ``snap`` as the state of the table at ``path`` (None: forget it)."""
        with self._lock:
            if snap is None:
                self._states.pop(path, None)
            else:
                self._states[path] = snap

    def take(self, path: str):
        """The table at local ``path`` at its latest version: the one kept, brought up to date
        when it is still the same table, else opened afresh (None: delta-rs cannot read it).
        Give it back with :meth:`keep` once the segment is done."""
        with self._lock:
            kept = self._kept.pop(path, None)
        if kept is not None:
            dt, version, stamp = kept
            if commit_stamp(path, version) == stamp:
                try:
                    dt.update_incremental()
                    return dt
                except Exception as exc:  # deltalake's errors have no common base
                    rs_log.debug("%s: opened again (%s)", path, exc)
        return open_table(path)

    def keep(self, path: str, dt) -> None:
        """Keep ``dt`` (the table at ``path``, after the segment) for the table's next segment."""
        if dt is None:
            return
        version = dt.version()
        stamp = commit_stamp(path, version)
        if stamp is not None:
            with self._lock:
                self._kept[path] = (dt, version, stamp)

    def drop(self, path: str | None) -> None:
        """Forget the table at local ``path`` (dropped or made again; None: not a local table)."""
        if path is not None:
            with self._lock:
                self._kept.pop(path, None)
                self._states.pop(path, None)


# Small segments landed in this process, with no Spark job: the Arrow engine (:class:`ArrowEngine`).
#
# A segment landed by Spark pays about eleven Spark jobs whatever its size (the change rows'
# schema, Delta's state rebuilt, the file listing, the write, the commit's own): about a second
# per table on 2 cores for a handful of rows, which a follower of many quiet tables pays every
# round. In this process the same commit costs milliseconds.
#
# The commit is the one Spark would make: the same net change (the Arrow functions of
# :mod:`wlcore.collapse`, by Spark's rules), with the replay tag in ``commitInfo.userMetadata`` and
# Delta's idempotent ``txn`` action (``appId`` ``wlc:<master dbid>``, ``version`` the segment's last
# transaction). An append (only inserts), and the whole rewrite of a keyed table of at most
# ``replica.rewrite_bytes`` (the rows of untouched keys, then each changed key's state after the
# segment, as :class:`Rewriter` does through Spark) or of an unkeyed one, are committed here: the
# rows in one Parquet file written by pyarrow, with Delta's file statistics computed from them, and
# one JSON commit put in place only where no writer committed that version (:mod:`wlcore.deltalog`),
# from the table's state read from its log (:class:`wlcore.deltalog.Snapshot`): no DeltaTable is
# opened, a fifth of a delta-rs open and overwrite. A bigger keyed table takes one delta-rs MERGE
# (the ``deltalake`` package), with the change-data files a MERGE writes where the table's change
# feed is on. Each commit gets Delta's version checksum (:func:`wlcore.deltalog.write_checksum`),
# which delta-rs does not write, and a checkpoint when its versions pass a multiple of the table's
# interval (:func:`_checkpoint`). A key whose first change in the segment was a delete or an update
# must be on the table: it is checked against the table's version the MERGE or rewrite reads,
# before it, so a diverged replica gets :class:`~wlr.errors.ApplyError` and no commit.
#
# Used only where the commit is exactly Spark's, else :meth:`ArrowEngine.land` answers None and Spark
# lands the segment: local folders; tables of at most ``limit`` bytes (``replica.deltars_bytes``);
# not partitioned; protocol features written here and by delta-rs (append-only, invariants, change
# feed, TIMESTAMP_NTZ; no constraints, generated or identity columns, column mapping, deletion
# vectors, row tracking or In-Commit Timestamps); columns of flat types; for a delta-rs MERGE,
# TIMESTAMP columns whose files' statistics show instants from 1678 to 2261 only (delta-rs reads
# Spark's INT96 timestamps through nanoseconds, and a MERGE copies untouched rows; a rewrite reads
# them here in microseconds); keys of integer, string, decimal or date types, never NULL; change
# rows with the table's columns. A segment whose ALTERs add nullable columns of flat types at the
# end (``ALTER TABLE ADD COLUMNS``) lands through delta-rs in two: the columns added at the end in
# the order the master has them (a part commit, as Spark's replay makes for an ALTER; delta-rs's
# ``merge_schema`` would order them its own way), then the rows; change rows from before the ALTER
# hold NULL there, as when Spark reads them with the segment's final schema.


_WRITER_FEATURES = frozenset({"appendOnly", "invariants", "changeDataFeed", "timestampNtz"})


_WRITER_VERSIONS = frozenset({1, 2, 3, 4, 7})  # 5: column mapping; 6: identity columns


_READER_FEATURES = frozenset({"timestampNtz"})


_KEY_TYPES = {"byte", "short", "integer", "long", "string", "date"}


_FIELD_METADATA = {"comment", "__CHAR_VARCHAR_TYPE_STRING"}  # what a column may carry here


@dataclass(frozen=True)
class Protocol:
    """A ``protocol`` action's versions and features, as :func:`wlcore.deltalog.delta_rs_refusal`
    reads them (delta-rs's ``ProtocolVersions`` has the same attributes)."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None
    writer_features: tuple[str, ...] | None

    @classmethod
    def of(cls, action: dict[str, Any]) -> "Protocol":
        """The protocol of a ``protocol`` action's body."""
        return cls(
            int(action.get("minReaderVersion") or 1),
            int(action.get("minWriterVersion") or 1),
            tuple(action["readerFeatures"]) if action.get("readerFeatures") is not None else None,
            tuple(action["writerFeatures"]) if action.get("writerFeatures") is not None else None,
        )


def why_not(meta: TableMeta, protocol) -> str | None:
    """Why replay may not write this table in this process as Spark would, or None when it may.

    Args:
        meta (TableMeta): the table's metadata now.
        protocol: the table's :class:`Protocol` (or delta-rs's ``ProtocolVersions``).

    Returns:
        str | None: the reason, or None.
    """
    reason = delta_rs_refusal(meta, protocol, _READER_FEATURES, _WRITER_FEATURES, _WRITER_VERSIONS)
    if reason is not None:
        return reason
    if any(k.startswith("delta.constraints.") for k in meta.configuration):
        return "CHECK constraints"
    for f in meta.schema.get("fields", []):
        extra = set(f.get("metadata") or {}) - _FIELD_METADATA
        if extra:
            return f"column {f.get('name')} carries {sorted(extra)}"
    return None


class ArrowEngine:
    """The Arrow engine of :class:`wlr.apply.Applier`: lands a small DML segment in this
    process, with no Spark job, in the one commit Spark would make (see the comment above): an
    append or a whole rewrite committed here (``engine`` ``"arrow"``), a MERGE or a segment that
    adds columns through delta-rs (``"delta-rs"``).

    Args:
        app_id (str): Delta's ``txnAppId`` of this master's replay (``wlc:<master dbid>``).
        tables (OpenTables | None): the tables' states and DeltaTables held between segments
            (shared by the appliers of one replay's threads; None: a new one).
    """

    name = "arrow"

    def __init__(self, app_id: str, tables: OpenTables | None = None):
        self.app_id = app_id
        self.tables = tables if tables is not None else OpenTables()
        self._checked: dict[str, Snapshot] = {}  # the state refusal() accepted, for land()

    def refusal(self, seg: Changes) -> str | None:
        """Why ``seg`` may not land here as Spark would (see the comment above), or None when it
        may. The rest of the rule needs the change rows read and is :meth:`land`'s: Arrow refuses
        ties and NULL keys (:mod:`wlcore.collapse`), and then Spark lands the segment.

        Args:
            seg (Changes): the segment.

        Returns:
            str | None: the reason, or None.
        """
        if seg.limits.deltars_bytes <= 0:
            return "replica.deltars_bytes is 0"
        if seg.meta is None:
            return "the table's definition is not known"
        if seg.keep is not None:
            return "the replica's row filter"
        if seg.local is None or seg.files is None:
            return "not in a local folder"
        if not (seg.insert_only or seg.keys or seg.limits.rewrite_bytes > 0):
            return "an unkeyed table, and whole rewrites are off"
        if not self.tables.holds(seg.local):  # a big table's state is not rebuilt here: its checksum says its size
            storage = Storage.of(seg.local)
            newest = latest_version(storage, seg.local)
            found = checksum_size(storage, seg.local, newest) if newest is not None else None
            if found is not None and found[0] > seg.limits.deltars_bytes:
                return f"{found[0]} bytes"
        try:
            snap = self.tables.snapshot(seg.local)
        except (OSError, ValueError) as exc:
            return f"its log cannot be read here ({exc})"
        reason = _refusal(snap, seg)
        if reason is None and snap is not None:
            self._checked[seg.local] = snap  # land() writes the table at the state this check read
        return reason

    def land(self, seg: Changes) -> Landed | None:
        """Land ``seg``, which :meth:`refusal` accepted, in one commit on its table.

        Args:
            seg (Changes): the segment.

        Returns:
            Landed | None: how it landed (``"append"``, ``"merge"``, or ``"rewrite"``: the table's
            rows after the segment overwrite it, an unkeyed table's or a keyed one of at most
            ``replica.rewrite_bytes``) and the engine that committed it (``"arrow"`` or
            ``"delta-rs"``); None when Arrow refuses its change rows (ties, NULL keys; Spark lands it).

        Raises:
            ApplyError: a key to delete or update is not on the table, an unkeyed segment deletes
                more copies of a row than the table holds (the replica has diverged), a NOT NULL
                column would hold NULL, or another writer committed to the table meanwhile.
        """
        assert seg.local is not None
        snap = self._checked.pop(seg.local, None) or self.tables.snapshot(seg.local)
        if snap is None:
            return None
        try:
            landed = self._land(snap, seg)
        except BaseException:
            self.tables.hold(seg.local, None)  # read afresh by the next segment
            raise
        if landed is None:
            return None
        return {"rows_in": seg.rows_in, "rows_out": landed[0], "how": landed[1], "engine": landed[2]}

    def _land(self, snap: Snapshot, seg: Changes) -> tuple[int, str, str] | None:
        """:meth:`land` on the table at ``seg.local`` at state ``snap``: the rows after collapse,
        how, and which engine committed."""
        import pyarrow as pa
        from deltalake import Schema

        meta, shape, keys = seg.meta, seg.shape, seg.keys
        assert meta is not None and seg.files is not None and seg.local is not None
        added = _added(meta, shape) if shape is not None else []
        if isinstance(added, str):
            return None
        done = snap.txns.get(self.app_id)
        if done is not None and done >= seg.last:  # Delta's idempotent write: already in the log
            return 0, "merge", self.name
        schema_json = shape.schema_json if shape is not None else snap.metadata.get("schemaString", meta.schema_json)
        target = pa.schema(Schema.from_json(schema_json).to_arrow())
        merge = bool(keys) and not seg.insert_only and (bool(added) or snap.size > seg.limits.rewrite_bytes)
        net = None
        try:
            rows = _rows(seg.files, target, added)
            if seg.insert_only:
                data, how, count = rows.select(target.names).cast(target), "append", rows.num_rows
            elif keys:
                net = collapse.net_by_key_arrow(rows, keys)
                data, how, count = net.select(target.names).cast(target), "merge", net.num_rows
                if not merge:  # small: one rewrite, half a MERGE
                    data, how = _rewritten(_table_rows(snap, seg.local, target), net, keys, target), "rewrite"
            else:
                data, short, count = collapse.after_images(_table_rows(snap, seg.local, target), rows)
                how = "rewrite"
                if short.num_rows:
                    _diverged(short.slice(0, 1).to_pylist()[0])
        except (collapse.ArrowUnsupported, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            rs_log.debug("%s: Spark lands it (%s)", seg.local, exc)
            return None
        if (how == "merge" or added) and _holds_nan(data):  # delta-rs's statistics would leave it out
            rs_log.debug("%s: Spark lands it (NaN in a float column)", seg.local)
            return None
        if how == "merge" or added:
            self._through_deltars(seg, data, net if how == "merge" else None, added)
            return count, how, "delta-rs"
        _not_null(data, target)
        try:
            state = _commit(snap, seg, data, how, self.app_id, meta)
        except CommitUnsupported as exc:  # a filesystem without hard links: delta-rs commits it
            rs_log.debug("%s: committed through delta-rs (%s)", seg.local, exc)
            if _holds_nan(data):
                return None
            self._through_deltars(seg, data, None, added)
            return count, how, "delta-rs"
        self.tables.hold(seg.local, state)
        return count, how, self.name

    def _through_deltars(self, seg: Changes, data: pa.Table, net: pa.Table | None, added) -> None:
        """Commit ``data`` through delta-rs: one MERGE of the net change ``net`` (its rows
        ``data`` and their ``OP``), else an append or overwrite of ``data``, after the columns
        ``added`` (a part commit)."""
        from deltalake import CommitProperties, Field, Transaction, write_deltalake

        assert seg.local is not None and seg.meta is not None
        keys = seg.keys
        dt = self.tables.take(seg.local)
        if dt is None:
            raise ApplyError(f"delta-rs cannot open the replica table {seg.table} that its log says it may write")
        before = dt.version()
        if net is not None:
            _check_present(lambda need: _keys_within(dt, need, keys), net, keys)
        commit = CommitProperties(
            custom_metadata={"userMetadata": seg.text}, app_transactions=[Transaction(self.app_id, seg.last)]
        )
        if added:
            fields = [Field.from_json(json.dumps(f)) for f in added]
            part = CommitProperties(custom_metadata={"userMetadata": seg.part})
            dt.alter.add_columns(fields, commit_properties=part)
        if net is None:
            mode = "append" if seg.insert_only else "overwrite"
            write_deltalake(dt, data, mode=mode, commit_properties=commit)
        else:
            source = data.append_column(OP, net[OP])
            on = " AND ".join(f"t.{_ident(k)} = s.{_ident(k)}" for k in keys)
            (
                dt.merge(source, on, source_alias="s", target_alias="t", streamed_exec=False, commit_properties=commit)
                .when_matched_update_all(predicate=f"s.{_ident(OP)}", except_cols=[OP])
                .when_matched_delete(predicate=f"NOT s.{_ident(OP)}")
                .when_not_matched_insert_all(predicate=f"s.{_ident(OP)}", except_cols=[OP])
                .execute()
            )
        _checkpoint(dt, before, seg.meta)
        _record_checksum(dt, seg.local, before)
        self.tables.keep(seg.local, dt)  # not reached when it raised: the table is opened again


_CORES = threading.BoundedSemaphore(os.cpu_count() or 2)


class CommitUnsupported(Exception):
    """The replica table's filesystem cannot take a commit written here (no hard links)."""


def _commit(snap: Snapshot, seg: Changes, data: pa.Table, how: str, app_id: str, meta: TableMeta) -> Snapshot:
    """Commit ``data`` to the table at ``seg.local`` at state ``snap``: appended (``how``
    ``"append"``) or as its whole content (``"rewrite"``: every live file removed), in one Parquet
    file (none for no rows) and one JSON commit with the replay tag and Delta's idempotent marker;
    then Delta's version checksum, and a checkpoint when the version passes the table's interval.
    Returns the table's state after it.

    Raises:
        ApplyError: another writer committed that version meanwhile (the data file is removed).
        CommitUnsupported: the filesystem makes no hard links (nothing committed, the file removed).
    """
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    assert seg.local is not None
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = []
    if how != "append":
        actions += [
            {
                "remove": {
                    "path": a["path"],
                    "deletionTimestamp": now,
                    "dataChange": True,
                    "extendedFileMetadata": True,
                    "partitionValues": a.get("partitionValues") or {},
                    "size": int(a.get("size") or 0),
                }
            }
            for a in snap.files.values()
        ]
    written: str | None = None
    size = 0
    if data.num_rows:
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        written = os.path.join(seg.local, name)
        pq.write_table(data, written, compression="snappy", write_statistics=_footer_statistics(data))
        size = os.path.getsize(written)
        actions.append(
            {
                "add": {
                    "path": name,
                    "partitionValues": {},
                    "size": size,
                    "modificationTime": now,
                    "dataChange": True,
                    "stats": file_stats(data, meta),
                }
            }
        )
    removed = sum(int(a["remove"]["size"]) for a in actions if "remove" in a)
    info = {
        "timestamp": now,
        "operation": "WRITE",
        "operationParameters": {"mode": "Append" if how == "append" else "Overwrite", "partitionBy": "[]"},
        "readVersion": snap.version,
        "isolationLevel": "Serializable",
        "isBlindAppend": how == "append",
        "operationMetrics": {
            "numFiles": str(1 if written else 0),
            "numOutputRows": str(data.num_rows),
            "numOutputBytes": str(size),
            "numRemovedFiles": str(len(actions) - (1 if written else 0)),
            "numRemovedBytes": str(removed),
        },
        "userMetadata": seg.text,
        "engineInfo": f"wlr/{__version__} pyarrow/{pa.__version__}",
        "txnId": str(uuid.uuid4()),
    }
    actions = [{"commitInfo": info}, {"txn": {"appId": app_id, "version": seg.last, "lastUpdated": now}}, *actions]
    version = snap.version + 1
    try:
        stamp = write_commit(seg.local, version, actions)
    except FileExistsError:
        _unlink(written)
        raise ApplyError(
            f"another writer committed version {version} of replica table {seg.table} while replay wrote it; "
            "replica tables are read-only (stop that writer; replay sees its commit on the next round)"
        ) from None
    except OSError as exc:
        _unlink(written)
        if exc.errno in _NO_LINKS:
            raise CommitUnsupported(str(exc)) from None
        raise
    state = snap.after(version, actions, stamp)
    if _passes_checkpoint(snap.version, version, meta):
        dt = open_table(seg.local)
        if dt is not None:
            _checkpoint(dt, snap.version, meta)
    try:
        write_checksum(
            Storage.of(seg.local),
            seg.local,
            snap.version,
            version,
            state.size,
            len(state.files),
            state=(state.protocol, state.metadata),
        )
    except OSError as exc:
        rs_log.warning("%s: no checksum at version %d (%s)", seg.local, version, exc)
    return state


def _footer_statistics(data: pa.Table) -> list[str]:
    """The columns whose Parquet footer statistics may be written: all but floats holding NaN,
    whose footer bounds leave NaN out (Parquet's rule) where Spark orders NaN above every number,
    so Spark's Parquet filter would drop the row group of ``x = NaN`` (Delta drops them too)."""
    return [f.name for f in data.schema if not _holds_nan(data.select([f.name]))]


_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def _unlink(path: str | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _not_null(data: pa.Table, target: pa.Schema) -> None:
    """Raise ApplyError when a NOT NULL column of ``target`` holds NULL in ``data`` (Delta's
    invariant, which Spark and delta-rs check on write)."""
    for f in target:
        if not f.nullable and data[f.name].null_count:
            raise ApplyError(f"NOT NULL column {f.name} would hold NULL; the replica has diverged from the master")


def _refusal(snap: Snapshot | None, seg: Changes) -> str | None:
    """The part of :meth:`ArrowEngine.refusal` that reads the table's state ``snap`` (None: not
    readable here): the reason, or None."""
    meta, shape, keys = seg.meta, seg.shape, seg.keys
    assert meta is not None
    if snap is None:
        return "its log cannot be rebuilt here (a commit missing, or a v2 checkpoint)"
    protocol = Protocol.of(snap.protocol)
    reason = why_not(meta, protocol) or (why_not(shape, protocol) if shape is not None else None)
    if reason is not None:
        return reason
    added = _added(meta, shape) if shape is not None else []
    if isinstance(added, str):
        return added
    if keys and not seg.insert_only:
        types = {f["name"]: f["type"] for f in meta.schema.get("fields", [])}
        bad = [k for k in keys if not (types.get(k) in _KEY_TYPES or str(types.get(k)).startswith("decimal("))]
        if bad:
            return f"key columns {bad} of types delta-rs matches otherwise"
    if not seg.insert_only and meta.configuration.get("delta.appendOnly", "false").lower() == "true":
        return "an append-only table (Spark refuses the segment's deletes and updates by name)"
    size = snap.size
    if size > seg.limits.deltars_bytes:
        return f"{size} bytes"
    if not (keys or seg.insert_only) and size > seg.limits.rewrite_bytes:
        return f"an unkeyed table of {size} bytes (a whole rewrite up to replica.rewrite_bytes)"
    merge = bool(keys) and not seg.insert_only and (bool(added) or size > seg.limits.rewrite_bytes)
    if merge:  # a delta-rs MERGE copies the rows of the files it rewrites
        return _instants_out_of_range(meta, snap) or _nan_unseen(meta, snap)
    if not seg.insert_only and not all(_PLAIN_PATH.match(a["path"]) for a in snap.files.values()):
        return "data files whose paths are not plain names"  # the table's rows are read here
    return None


def _passes_checkpoint(before: int, after: int, meta: TableMeta) -> bool:
    """True when commits from version ``before`` to ``after`` pass a multiple of the table's
    ``delta.checkpointInterval`` (Delta Spark's default, 10): a checkpoint is due."""
    try:
        interval = max(1, int(meta.configuration.get("delta.checkpointInterval", "10")))
    except ValueError:
        interval = 10
    return after // interval != before // interval


def _checkpoint(dt, before: int, meta: TableMeta) -> None:
    """A checkpoint of ``dt`` (just committed, from version ``before``) when its commits passed a
    multiple of the table's ``delta.checkpointInterval`` (Delta Spark's default, 10): delta-rs
    writes one only every 100 versions by default, and every later open of the table (replay's
    next segment, a Spark reader) replays each JSON commit since the last. The checkpoint keeps
    the ``txn`` markers replay's idempotence reads. A failure to write it is logged: the commit
    stands, and readers replay the JSON commits as before."""
    if not _passes_checkpoint(before, dt.version(), meta):
        return
    try:
        dt.create_checkpoint()
    except Exception as exc:  # deltalake's errors have no common base
        rs_log.warning(
            "%s: no checkpoint at version %d (%s); readers replay its JSON commits", dt.table_uri, dt.version(), exc
        )


def _record_checksum(dt, path: str, before: int) -> None:
    """Delta's version checksum of the version delta-rs just committed on the table at local
    ``path`` (:func:`wlcore.deltalog.write_checksum`, its size and file count from ``dt``'s own
    state), so that Spark loads that version (a view moved to it, a reader) without a job. A
    failure to write it is logged: the commit stands, and Spark reads the log as before."""
    size, files = detail(dt)
    try:
        write_checksum(Storage.of(path), path, before, dt.version(), size, files)
    except OSError as exc:
        rs_log.warning("%s: no checksum at version %d (%s)", path, dt.version(), exc)


# delta-rs reads Spark's INT96 timestamps through nanoseconds: instants outside these wrap in silence
_SAFE_INSTANTS = (datetime(1678, 1, 1, tzinfo=timezone.utc), datetime(2262, 1, 1, tzinfo=timezone.utc))


def _instants_out_of_range(meta: TableMeta, snap: Snapshot) -> str | None:
    """Why a TIMESTAMP column of the table may hold an instant delta-rs would misread (the
    statistics of its files, in ``snap``, say one is before 1678 or after 2261, or do not say),
    else None. A MERGE copies untouched rows of the files it rewrites, and Spark writes TIMESTAMP
    as INT96, which delta-rs reads in nanoseconds (years 1677 to 2262)."""
    names = [f["name"] for f in meta.schema.get("fields", []) if f.get("type") == "timestamp"]
    if not names or not snap.files:
        return None
    stats = []
    for a in snap.files.values():
        try:
            stats.append(json.loads(a.get("stats") or "null") or {})
        except ValueError:
            stats.append({})
    for name in names:
        for s in stats:
            low, high = (s.get("minValues") or {}).get(name), (s.get("maxValues") or {}).get(name)
            if low is None or high is None:
                if (s.get("nullCount") or {}).get(name) != s.get("numRecords") or "numRecords" not in s:
                    return f"column {name} has files without statistics (a TIMESTAMP delta-rs may misread)"
                continue
            try:
                first, last = _instant(low), _instant(high)
            except ValueError:
                return f"column {name} has statistics that are not instants (a TIMESTAMP delta-rs may misread)"
            if first < _SAFE_INSTANTS[0] or last >= _SAFE_INSTANTS[1]:
                return f"column {name} holds instants before 1678 or after 2261, which delta-rs misreads"
    return None


def _nan_unseen(meta: TableMeta, snap: Snapshot) -> str | None:
    """Why a FLOAT or DOUBLE column of the table may hold NaN in a file a delta-rs MERGE would
    rewrite (its statistics say NaN, as Spark's do, or give no bounds for values that are not
    NULL, as this engine's do), else None: delta-rs's statistics leave NaN out (in the log and the
    Parquet footer), where Spark orders NaN above every number and would skip the file."""
    names = [f["name"] for f in meta.schema.get("fields", []) if f.get("type") in ("float", "double")]
    if not names:
        return None
    for a in snap.files.values():
        try:
            s = json.loads(a.get("stats") or "null") or {}
        except ValueError:
            s = {}
        for name in names:
            low, high = (s.get("minValues") or {}).get(name), (s.get("maxValues") or {}).get(name)
            if isinstance(low, (int, float)) and isinstance(high, (int, float)):
                continue
            if (
                low is None
                and high is None
                and "numRecords" in s
                and (s.get("nullCount") or {}).get(name) == s["numRecords"]
            ):
                continue  # only NULLs
            return f"column {name} may hold NaN (delta-rs's statistics would leave it out)"
    return None


def _holds_nan(data: pa.Table) -> bool:
    """True when a FLOAT or DOUBLE column of ``data`` holds NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return any(pa.types.is_floating(f.type) and pc.any(pc.is_nan(data[f.name])).as_py() for f in data.schema)


def _instant(text: str) -> datetime:
    """A statistics bound of a TIMESTAMP column (ISO 8601, with an offset or ``Z``) as a UTC instant."""
    moment = datetime.fromisoformat(str(text))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _rows(files: Sequence[str], target: pa.Schema, added: list[dict]) -> pa.Table:
    """The change rows of ``files`` with the columns of ``target`` (the table's schema after the
    segment); columns ``added`` after the segment's last change row are NULL in every row.

    Raises:
        collapse.ArrowUnsupported: the rows cannot be read here, or their columns are not the table's.
    """

    rows = _with_columns(collapse.read_rows_arrow(files, missing=bool(added)), target, [f["name"] for f in added])
    if set(collapse.data_columns_arrow(rows)) != set(target.names):
        raise collapse.ArrowUnsupported("the change rows' columns are not the table's")
    return rows


def _with_columns(rows: pa.Table, target: pa.Schema, names: Sequence[str] | None = None) -> pa.Table:
    """``rows`` with a NULL column for each field of ``target`` it lacks (of ``names``; None: any)."""
    import pyarrow as pa

    for f in target:
        if f.name not in rows.column_names and (names is None or f.name in names):
            rows = rows.append_column(f, pa.nulls(rows.num_rows, f.type))
    return rows if names is not None else rows.select(target.names).cast(target)


def _diverged(row: dict) -> None:
    """Raise ApplyError naming ``row``, a row to delete or update the replica lacks."""
    raise ApplyError(
        f"rows to delete or update are not on the replica (e.g. {json.dumps(row, default=str)}); "
        "the replica has diverged from the master"
    )


def _added(meta: TableMeta, shape: TableMeta) -> list[dict] | str:
    """The fields ``shape`` adds at the end of ``meta``'s, each nullable, of a flat type and with no
    metadata (what Spark's ``ADD COLUMNS`` makes of them); else why delta-rs may not add them."""
    old = meta.schema.get("fields", [])
    new = shape.schema.get("fields", [])
    if new[: len(old)] != old or meta.partition_columns != shape.partition_columns:
        return "the segment's ALTERs change more than added columns at the end"
    for f in new[len(old) :]:
        if not f.get("nullable", True) or f.get("metadata") or not isinstance(f.get("type"), str):
            return f"added column {f.get('name')} is not a nullable flat column without metadata"
    return new[len(old) :]


def detail(dt) -> tuple[int, int]:
    """The size in bytes and the number of data files of delta-rs's DeltaTable ``dt`` (its log only)."""
    adds = _adds(dt)
    return _bytes(adds), adds.num_rows


def _adds(dt) -> pa.Table:
    """delta-rs's add actions of ``dt`` (a data file a row: path, size, statistics), from its log."""
    import pyarrow as pa

    # through the Arrow stream: pa.table() looks for a pandas DataFrame first and imports pandas
    # (0.8 s, once a process)
    return pa.RecordBatchReader.from_stream(dt.get_add_actions(flatten=True)).read_all()


def _bytes(adds: pa.Table) -> int:
    """The size in bytes of the data files ``adds`` (:func:`_adds`) lists."""
    import pyarrow.compute as pc

    return int(pc.sum(adds["size_bytes"]).as_py() or 0)


def size_of(path: str) -> tuple[int, int] | None:
    """The size in bytes and the number of data files of the Delta table at local ``path``, read
    from its log by delta-rs in milliseconds; None when delta-rs cannot read it."""
    dt = open_table(path)
    return None if dt is None else detail(dt)


def _ident(name: str) -> str:
    """``name`` as a delta-rs (DataFusion SQL) identifier."""
    return '"' + name.replace('"', '""') + '"'


# a data file's path in the log that names a file below the table's folder as it is: no scheme,
# no URL escape, no way up (else Spark lands the rewrite)
_PLAIN_PATH = re.compile(r"^(?!.*\.\.)[A-Za-z0-9_=-][A-Za-z0-9._=/-]*$")


def _table_rows(snap: Snapshot, local: str, target: pa.Schema) -> pa.Table:
    """The rows of the table at local folder ``local`` at state ``snap``, with the columns of
    ``target``: its data files read as change rows are (:func:`wlcore.collapse.read_files_arrow`),
    a quarter of delta-rs's ``to_pyarrow_table`` on a small table, INT96 instants in microseconds.
    Exact where a segment lands here (:meth:`ArrowEngine.refusal`): no partitions, column mapping or
    deletion vectors, and plain paths, so a file's columns are the table's."""
    import pyarrow as pa

    parts = collapse.read_files_arrow(os.path.join(local, a["path"]) for a in snap.files.values())
    if not parts:
        return target.empty_table()
    return _with_columns(pa.concat_tables(parts, promote_options="default"), target)


def _rewritten(now: pa.Table, net: pa.Table, keys: list[str], target: pa.Schema) -> pa.Table:
    """A small keyed table's rows after the segment, for one overwrite (as :class:`Rewriter` does
    through Spark): the rows ``now`` of keys the net change ``net`` leaves alone, then the state
    after the segment of every key that exists after it; a delta-rs MERGE of the same costs twice
    as much on a table of one or a few files (a join to find the files, then their rewrite).

    Raises:
        ApplyError: a key whose first change in the segment was not an insert is not in ``now``.
    """
    import pyarrow as pa

    _check_present(lambda _need: now.select(keys), net, keys)
    stay = _without_keys(now, net, keys)
    return pa.concat_tables([stay.select(target.names), net.filter(net[OP]).select(target.names).cast(target)])


def _without_keys(rows: pa.Table, other: pa.Table, keys: list[str]) -> pa.Table:
    """The rows of ``rows`` whose key is not in ``other`` (a left anti join; one key column by a
    set lookup, a fifth of a join's cost on the small tables that take it)."""
    import pyarrow.compute as pc

    if len(keys) == 1:
        k = keys[0]
        return rows.filter(pc.invert(pc.is_in(rows[k], value_set=other[k].cast(rows.schema.field(k).type))))
    return rows.join(other.select(keys).cast(rows.select(keys).schema), keys=keys, join_type="left anti")


def _check_present(have_keys: Callable[[pa.Table], pa.Table], net: pa.Table, keys: list[str]) -> None:
    """Raise ApplyError naming a key of ``net`` whose first change was not an insert and that the
    table lacks; ``have_keys(need)`` gives the table's keys (at the version the MERGE or rewrite
    reads) that may match the rows ``need`` (called only when there are such rows)."""
    import pyarrow.compute as pc

    need = net.filter(pc.equal(net[FIRST], 0))
    if not need.num_rows:
        return
    missing = _without_keys(need, have_keys(need), keys)
    if missing.num_rows:
        _diverged(missing.drop_columns([OP, FIRST]).slice(0, 1).to_pylist()[0])


def _keys_within(dt, need: pa.Table, keys: list[str]) -> pa.Table:
    """The key columns of the table ``dt`` in the rows whose first key column lies within ``need``'s
    (the files outside are skipped by their statistics)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    table = dt.to_pyarrow_dataset()
    kind = table.schema.field(keys[0]).type
    low, high = (v.cast(kind) for v in pc.min_max(need[keys[0]]).values())
    return table.to_table(columns=keys, filter=(ds.field(keys[0]) >= low) & (ds.field(keys[0]) <= high))


log = logging.getLogger("wlr.apply")


class Landed(TypedDict, total=False):
    """How a segment landed (:meth:`Applier.apply`)."""

    rows_in: int  # change rows read
    rows_out: int  # rows after collapse (-1: not known)
    how: str  # "append", "merge", "rewrite", "commit" (no rows) or "ddl" (a barrier)
    engine: str  # "spark" or "delta-rs"


@dataclass(frozen=True)
class Changes:
    """A DML segment as an engine lands it: everything read from its records and its table once,
    by :meth:`Applier.apply`.

    Attributes:
        table (str): ``schema.table``.
        path (str): the replica table's folder (on the replica's storage).
        uri (str): its URI, for Spark.
        local (str | None): its local folder, for delta-rs (None: not a local folder).
        meta (TableMeta | None): the table's definition now (None: not known).
        shape (TableMeta | None): its definition after the segment's ALTERs, which only add
            nullable columns (None: the segment alters nothing).
        uris (tuple[str, ...]): the change-row folders of the segment, for Spark.
        files (tuple[str, ...] | None): their Parquet files' local paths, for delta-rs (None: not
            all local, delta-rs is off, or the table is not one it may write: not in a local folder,
            or with a row filter).
        first (int): the segment's first transaction.
        last (int): its last (Delta's idempotent ``txnVersion``).
        text (str): the replay tag of its commit.
        part (str): the replay tag of a part commit (the columns added first).
        rows_in (int): the change rows it carries.
        insert_only (bool): every change row is an insert.
        keep (str | None): the replica's row filter of the table (:mod:`wlr.select`; None: every row).
        limits (Limits): the round's sizes.
    """

    table: str
    path: str
    uri: str
    local: str | None
    meta: TableMeta | None
    shape: TableMeta | None
    uris: tuple[str, ...]
    files: tuple[str, ...] | None
    first: int
    last: int
    text: str
    part: str
    rows_in: int
    insert_only: bool
    keep: str | None
    limits: Limits

    @property
    def keys(self) -> list[str]:
        """The table's declared key columns (``wlc.key``; empty: none)."""
        return self.meta.key_columns if self.meta is not None else []

    @property
    def evolve(self) -> bool:
        """True when the segment adds columns to the table."""
        return self.shape is not None and bool(set(self.shape.columns) - set(self.meta.columns if self.meta else []))


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


class SparkEngine:
    """The Spark engine of :class:`wlr.apply.Applier`: lands a DML segment of any table by one
    append (inserts only), one MERGE (:class:`Merger`) or one whole rewrite of a small table
    (:class:`Rewriter`).

    Args:
        spark (LateSession): the applier's Spark session (made at its first use).
        tagged: ``tagged(text, version)``, the context in which a commit carries the replay tag
            ``text`` (:meth:`wlr.apply.Applier.tagged`).
        tables (ReplicaTables): the replica's tables, read back from their Delta logs.
    """

    name = "spark"

    def __init__(self, spark: LateSession, tagged: Callable[..., AbstractContextManager], tables: ReplicaTables):
        self._session = spark
        self._tagged = tagged
        self.tables = tables
        self.app_id = tables.app_id
        self.merger = Merger(spark, tagged)
        self.rewriter = Rewriter(spark, tagged, self.app_id)

    def land(self, seg: Changes) -> Landed:
        """Land ``seg`` in one commit on its table.

        Args:
            seg (Changes): the segment.

        Returns:
            Landed: how it landed (``"append"``, ``"merge"`` or ``"rewrite"``).

        Raises:
            ApplyError: rows to delete or update are not on the replica (it has diverged).
        """
        from pyspark.sql.types import StructType

        meta = seg.meta
        # the files' own schema unless the segment adds columns: a file that lacked a column of
        # an imposed schema would read NULL there without a word
        rows = collapse.read_rows(
            self._session(), list(seg.uris), StructType.fromJson(seg.shape.schema) if seg.shape is not None else None
        )
        cols = collapse.data_columns(rows)
        have = set(meta.columns if meta else cols)
        keys = [k for k in seg.keys if k in cols and k in have]
        keep = None if seg.keep is None else F.coalesce(F.expr(seg.keep), F.lit(False))
        schema = StructType.fromJson(meta.schema) if meta else None  # the table's, as its log says
        if seg.insert_only:
            how = "append"
            out = rows.select(*[quote_ident(c) for c in cols])
            self._append(seg, out if keep is None else out.filter(keep))
        elif keys:
            how = self._by_key(seg, rows, keys, keep)
        else:
            how = "merge"
            net = collapse.net_by_image(rows)
            net = net if keep is None else net.filter(keep)
            self.merger.by_image(seg.text, seg.last, seg.uri, net, cols, have, seg.evolve, schema)
        newest = read_commit(self.tables.storage, seg.path, self.tables.current_version(seg.table))
        rows_out = seg.rows_in if how == "append" else int(newest.metrics.get("numSourceRows", -1))
        return {"rows_in": seg.rows_in, "rows_out": rows_out, "how": how, "engine": self.name}

    def _append(self, seg: Changes, rows: DataFrame) -> None:
        """Append ``rows`` to the table in one commit, idempotent for the segment's last transaction
        (Delta's txnAppId/txnVersion)."""
        with self._tagged(seg.text):
            (
                rows.write.format("delta")
                .mode("append")
                .option("txnAppId", self.app_id)
                .option("txnVersion", seg.last)
                .option("mergeSchema", str(seg.evolve).lower())
                .save(seg.uri)
            )

    def _by_key(self, seg: Changes, rows: DataFrame, keys: list[str], keep) -> str:
        """Land keyed change ``rows``: one whole rewrite of a small table, else one MERGE (reading
        only the files that may hold the segment's keys, on a big table). Returns how."""
        from pyspark.sql.types import StructType

        meta = seg.meta
        cols = collapse.data_columns(rows)
        identity = tuple(
            f["name"]
            for f in (meta.schema.get("fields", []) if meta else [])
            if (f.get("metadata") or {}).get(IDENTITY_START) is not None
        )
        net = collapse.net_by_key(rows, keys)
        size, files = self._detail(seg)
        limit = seg.limits.rewrite_bytes
        vectors = meta is not None and meta.deletion_vectors  # the replica marks rows in vectors as the master does
        table = None if identity or seg.evolve or vectors else self.rewriter.fits(seg.uri, size, net, cols, limit)
        if table is not None:  # a small table: one rewrite costs less than a MERGE's two passes
            self.rewriter.by_key(seg.text, seg.last, seg.uri, table, net, keys, keep)
            return "rewrite"
        prune = key_range(rows, keys) if files > 1 and size > SKIP_FILES_FROM else None
        schema = StructType.fromJson(meta.schema) if meta else None  # the table's, as its log says
        self.merger.by_key(seg.text, seg.last, seg.uri, net, cols, keys, seg.evolve, keep, identity, schema, prune)
        return "merge"

    def _detail(self, seg: Changes) -> tuple[int, int]:
        """The size in bytes and the number of data files of the segment's table: from its current
        version's checksum file, else its log read by delta-rs (local folders), else Delta's
        ``DESCRIBE DETAIL`` (which rebuilds the table's state: three Spark jobs on a small table)."""
        found = checksum_size(self.tables.storage, seg.path, self.tables.current_version(seg.table))
        if found is None and seg.local is not None:  # a commit delta-rs made with no checksum before it
            found = size_of(seg.local)
        if found is not None:
            return found
        row = self._session().sql(f"DESCRIBE DETAIL {delta_ref(seg.uri)}").select("sizeInBytes", "numFiles").first()
        return (int(row[0] or 0), int(row[1] or 0)) if row is not None else (0, 0)


class Applier:
    """Applies the transactions of master ``dbid`` to the replica database at ``replica_path``:
    :meth:`apply` lands one segment. A barrier (DDL, a full image) lands through Spark; a DML
    segment through one of two engines, :class:`ArrowEngine` for small tables and
    :class:`SparkEngine` for the rest, chosen in :meth:`engine_for`.

    Args:
        spark (LateSession): the session to apply with, made at the first Spark use (checks that
            read only Delta logs, and segments delta-rs lands, need no session).
        storage (Storage): the storage holding the replica.
        replica_path (str): the replica's folder (path or URL).
        dbid (str): the master's database id (in every replay tag and idempotent marker).
        logs_storage (Storage | None): the storage the batches' change rows are read from
            (None: ``storage``).
    """

    def __init__(
        self,
        spark: LateSession,
        storage: Storage,
        replica_path: str,
        dbid: str,
        logs_storage: Storage | None = None,
    ):
        self.session = spark.derived(self._with_job_properties)  # this thread's job properties set once made
        self._job_properties: dict[str, str] = {}  # Spark's local properties of this applier's thread
        self.storage = storage
        self.logs_storage = logs_storage or storage  # where the batches' change rows are read
        self.replica_path = replica_path
        self.dbid = dbid
        self.tables = ReplicaTables(storage, replica_path, dbid)
        self.app_id = self.tables.app_id
        self.selection: Selection | None = None  # the replica's tables and rows (None: every table, every row)
        self.limits = Limits()  # set by replay for each round, from the replicate options
        self.ddl = TableDDL(self.session, self.tagged, self.tables)
        self.engine = SparkEngine(self.session, self.tagged, self.tables)
        self.arrow = ArrowEngine(self.app_id, self.tables.opened)

    @property
    def spark(self):
        """The applier's SparkSession, made on first use (with the job properties set inside
        :meth:`job_property`)."""
        return self.session()

    def _with_job_properties(self, spark: Any) -> Any:
        """``spark`` with the job properties set so far (when the session is first made)."""
        for key, value in self._job_properties.items():
            spark.sparkContext.setLocalProperty(key, value)
        return spark

    @contextmanager
    def job_property(self, key: str, value: str):
        """Spark's thread-local property ``key`` (e.g. ``spark.job.description``) set to ``value``
        for the jobs this thread runs inside: now when the session exists, else when a job first
        needs it (a segment delta-rs lands starts no session and makes no call to the JVM)."""
        self._job_properties[key] = value
        if self.session.made is not None:
            self.session.made.sparkContext.setLocalProperty(key, value)
        try:
            yield
        finally:
            del self._job_properties[key]
            if self.session.made is not None:
                self.session.made.sparkContext.setLocalProperty(key, None)

    def fork(self) -> "Applier":
        """An Applier on the same replica with its own Spark session (for another thread): a child
        of this applier's, made at the fork's first Spark use (a segment delta-rs lands starts none)."""
        out = Applier(
            self.session.derived(replay_session), self.storage, self.replica_path, self.dbid, self.logs_storage
        )
        out.selection = self.selection
        out.limits = self.limits
        out.tables.opened = out.arrow.tables = self.tables.opened  # the tables' states, shared by the threads
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

    def _keep(self, table: str) -> str | None:
        """The replica's row filter of ``table`` (:mod:`wlr.select`) as SQL, or None."""
        return self.selection.predicate(table) if self.selection is not None else None

    def apply(self, segment: Sequence[Item]) -> Landed:
        """Apply one segment (:func:`wlr.planner.segments`): one transaction alone (a barrier, or
        one replayed by itself) or a run of DML transactions of one table in one commit.

        A DML run (change-feed transactions, and ALTERs that only add nullable columns,
        ``TxnRecord.adds``, which the commit adds) lands through the engine
        :meth:`engine_for` chooses; a barrier (create, alter, drop, a full image) through Spark.

        Args:
            segment (Sequence[Item]): the transactions, of one table, ascending.

        Returns:
            Landed: the change rows read, the rows after collapse and how the segment landed
            (an append, a MERGE, a whole rewrite of a small table, a commit without rows, or
            ``"ddl"``: a barrier).

        Raises:
            ApplyError: the table is missing (or there already and not made by replay), rows to
                delete or update are not on the replica (it has diverged), or a record lacks
                what its kind carries (a damaged batch).
        """
        one = segment[0] if len(segment) == 1 else None
        if one is not None and is_barrier(one.rec.ddl, one.rec.change, one.rec.adds):
            self._barrier(one)  # DDL, an image, or the DDL a change-feed transaction also carries
            if one.rec.change != "cdf":
                return {"rows_in": sum(one.rec.counts.values()), "rows_out": -1, "how": "ddl", "engine": "spark"}
        seg = self._changes(segment)
        if seg is None:
            return {"rows_in": 0, "rows_out": 0, "how": "commit"}
        with _CORES:
            engine = self.engine_for(seg)
            landed = engine.land(seg) if engine is self.arrow else None
        if (
            landed is None
        ):  # Spark's, or the Arrow engine hands it back: Arrow refuses its change rows (ties, NULL keys)
            landed = self.engine.land(seg)
        log.debug(
            "txns %d-%d on %s: %d change rows, %d after collapse (%s)",
            seg.first,
            seg.last,
            seg.table,
            seg.rows_in,
            landed["rows_out"],
            landed.get("engine"),
        )
        return landed

    def engine_for(self, seg: Changes) -> ArrowEngine | SparkEngine:
        """The engine that lands ``seg``, the one place it is chosen: the Arrow engine where it
        writes the table exactly as Spark would (:meth:`ArrowEngine.refusal`), else Spark.

        Args:
            seg (Changes): the segment.

        Returns:
            ArrowEngine | SparkEngine: the engine.
        """
        reason = self.arrow.refusal(seg)
        if reason is None:
            return self.arrow
        rs_log.debug("%s: Spark lands it (%s)", seg.table, reason)
        return self.engine

    def _changes(self, segment: Sequence[Item]) -> Changes | None:
        """The DML ``segment`` read once for the engines; None when it carries no change rows
        (then its added columns and one tagged final commit are made here).

        Raises:
            ApplyError: the table is missing, or a record lacks its rows or definition.
        """
        first, last = segment[0].rec, segment[-1].rec
        name = first.table
        path = self.tables.table_path(name)
        uri = self.storage.uri(path)
        if self.tables.current_version(name) < 0:
            raise ApplyError(f"table {name} does not exist on the replica")
        text = tag(self.dbid, last.txn, first=first.start)
        alters = [it.rec for it in segment if it.rec.ddl == "alter"]
        shape = definition(alters[-1]) if alters else None
        with_rows = [it for it in segment if it.rec.change == "cdf" and any(it.rec.counts.values())]
        if not with_rows:  # no change rows: the columns (when added) and one tagged final commit
            for alter in alters:
                part = tag(self.dbid, last.txn, part=True, first=first.txn)
                self.ddl.alter(name, delta_ref(uri), definition(alter), alter.ops, part)
            self._mark_final(text, last.txn, uri)
            return None
        folders = [Storage.join(it.path, rows_of(it.rec)) for it in with_rows]
        kinds = {k for it in with_rows for k, v in it.rec.counts.items() if v}
        local, keep = self.storage.os_path(path), self._keep(name)
        deltars = self.limits.deltars_bytes > 0 and local is not None and keep is None  # else no file is read here
        return Changes(
            table=name,
            path=path,
            uri=uri,
            local=local,
            meta=self.tables.current_meta(name),
            shape=shape,
            uris=tuple(self.logs_storage.uri(f) for f in folders),
            files=self._files(with_rows) if deltars else None,
            first=first.txn,
            last=last.txn,
            text=text,
            part=tag(self.dbid, last.txn, part=True, first=first.txn),
            rows_in=sum(sum(it.rec.counts.values()) for it in with_rows),
            insert_only=kinds <= {"insert"},
            keep=keep,
            limits=self.limits,
        )

    def _files(self, items: Sequence[Item]) -> tuple[str, ...] | None:
        """The change rows' Parquet files of ``items`` (:attr:`Item.files`, verified against their
        manifests: no other file is in their folders) as local paths (None: not all local)."""
        files: list[str] = []
        for it in items:
            local = self.logs_storage.os_path(it.path)
            if local is None:
                return None
            files.extend(os.path.join(local, *rel.split("/")) for rel in it.files)
        return tuple(files)

    def _barrier(self, item: Item) -> None:
        """Apply one transaction that is not a DML run: a create, alter or drop, a full image, or
        the DDL part of a change-feed record that carries one.

        Raises:
            ApplyError: the cause.
        """
        rec = item.rec
        path = self.tables.table_path(rec.table)
        uri = self.storage.uri(path)
        exists = self.tables.current_version(rec.table) >= 0  # a Delta table with at least one commit
        if rec.ddl in ("drop", "create"):
            self.tables.forget(rec.table)  # a table made again starts its versions anew: the cache is stale
        if rec.ddl == "drop":
            if is_delta_table(self.storage, path):
                self.storage.rm(path)
            return
        part = tag(self.dbid, rec.txn, part=True)
        if rec.ddl == "create":
            if exists and self.tables.last_final_txn(rec.table) < 0 and not self.tables.created_by_replay(rec.table):
                raise ApplyError(f"table {rec.table} already exists on the replica and was not made by replay")
            if not exists and self.storage.exists(path):
                self.storage.rm(path)  # left by a CREATE killed before its first commit: nothing in it is visible
            self.ddl.create(rec.table, delta_ref(uri), definition(rec), part)
        elif not exists:
            raise ApplyError(f"table {rec.table} does not exist on the replica")
        elif rec.ddl == "alter" and rec.change != "image":
            self.ddl.alter(rec.table, delta_ref(uri), definition(rec), rec.ops, part)
        if rec.change == "cdf":
            return
        if rec.change == "image":
            rows = self.spark.read.parquet(self.logs_storage.uri(Storage.join(item.path, rows_of(rec))))
            keep = self._keep(rec.table)
            rows = rows if keep is None else rows.filter(F.coalesce(F.expr(keep), F.lit(False)))
            self._replace(rec, uri, rows, definition(rec))
            return
        # DDL only: one tagged commit records the transaction
        self._mark_final(tag(self.dbid, rec.txn), rec.txn, uri)

    def _mark_final(self, text: str, txn: int, uri: str) -> None:
        """The final commit (tag ``text``) when the last step was not one: a property commit."""
        with self.tagged(text):
            self.spark.sql(f"ALTER TABLE {delta_ref(uri)} SET TBLPROPERTIES ('{FINAL_PROPERTY}' = '{txn}')")

    def _replace(self, rec: TxnRecord, uri: str, rows: DataFrame, meta: TableMeta) -> None:
        """Replace the table's content (and definition, where it changed) by the image
        (:meth:`wlr.apply.TableDDL.replace`). The rows land in one idempotent commit (Delta
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
