"""A keyed segment landed on a small replica table by rewriting the whole table in one commit.

A Delta MERGE pays a fixed cost before it touches data: a join of the source with the target to
find the files that hold matched rows, then a second pass that rewrites those files. On a table of
a few files that is the whole table twice. Reading the table once, leaving out the keys the segment
changes, adding their states after it and overwriting the table in one commit lands the same rows
for less (``bench/small_apply.py``: 0.71x a MERGE on 1,000-row tables), with the same replay tag
and Delta idempotent marker, so a crash repeats nothing. Divergence is refused inside the same job:
a key whose first change in the segment was a delete or an update and that the table lacks makes
the write's own tasks fail (``raise_error``), so nothing is committed.

Used only with collapse on (``replicate(collapse=False)`` keeps one MERGE per master transaction
for jobs that read the replica's change feed: a rewrite shows there as every row deleted and
inserted again), for tables at most ``replica.rewrite_bytes`` big, without identity columns, when
the segment adds no columns and its change rows have the table's columns and types.

A part of :class:`wlr.apply.Applier`, which gives it its Spark session and the context that tags a
replay commit.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from pyspark.sql import DataFrame, functions as F

from wlcore import collapse
from wlcore.canonical import all_same
from wlcore.names import quote_ident

from .merge import diverged, raise_diverged


class Rewriter:
    """Whole-table rewrites of :class:`wlr.apply.Applier`.

    Args:
        spark: returns the applier's Spark session (the one of the thread applying).
        tagged: ``tagged(text, version)``, the context in which a commit carries the replay tag
            ``text`` and Delta's idempotent marker ``version`` (:meth:`wlr.apply.Applier.tagged`).
        app_id (str): Delta's ``txnAppId`` of this master's replay (``wlc:<master dbid>``).
    """

    def __init__(self, spark: Callable[[], Any], tagged: Callable[..., AbstractContextManager], app_id: str):
        self._session = spark
        self._tagged = tagged
        self._app_id = app_id
        self.limit = (
            0  # tables up to this many bytes are rewritten (0: never); set by replay from replica.rewrite_bytes
        )

    def fits(self, uri: str, size: int, net: DataFrame, cols: list[str]) -> DataFrame | None:
        """The table at ``uri`` read for a rewrite, or None when a MERGE must land the segment.

        A rewrite fits a table of at most :attr:`limit` bytes whose columns and types are the
        segment's.

        Args:
            uri (str): the replica table's URI.
            size (int): the table's size in bytes (Delta's ``DESCRIBE DETAIL`` ``sizeInBytes``).
            net (DataFrame): the segment's net change (:func:`wlcore.collapse.net_by_key`).
            cols (list[str]): the segment's data columns.

        Returns:
            DataFrame | None: the table's current rows, or None.
        """
        if self.limit <= 0 or size > self.limit:
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
                replica, as in :meth:`wlr.merge.Merger.by_key`). None: every row.

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
