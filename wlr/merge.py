"""The MERGEs that land a collapsed segment on a replica table, and selective replication's
row filter (:mod:`wlr.select`) on the way in.

A part of :class:`wlr.apply.Applier`, which gives it its Spark session and the context that
tags a replay commit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from pyspark.sql import Column, DataFrame, functions as F
from pyspark.sql.types import (
    ByteType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from wlcore import collapse
from wlcore.canonical import all_same, canon
from wlcore.names import quote_ident

from .conform import conformed
from .errors import ApplyError

_DIVERGED = "wlr-diverged: "  # marks the error a keyed MERGE raises for a key missing on the replica
_KIND = "__wlr_kind"  # unkeyed MERGE source: "del" (match every copy), "ins" (a copy to insert), "bad"


_CK = "__wlr_ck"  # a row image's canonical form (wlcore.canonical): what unkeyed matching compares
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
        spark: returns the applier's Spark session (the one of the thread applying).
        tagged: ``tagged(text, version)``, the context in which a commit carries the replay tag
            ``text`` and Delta's idempotent marker ``version`` (:meth:`wlr.apply.Applier.tagged`).
    """

    def __init__(self, spark: Callable[[], Any], tagged: Callable[[str, int], AbstractContextManager]):
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
                the assignments, :mod:`wlr.conform`); None: every column assigned as it is.
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
    NOT NULL fields of the table's ``schema`` where it has any (:mod:`wlr.conform`)."""
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
