"""Change rows -> net change (Spark): MusicBrainz's chain rules over a segment of transactions.

A segment's change rows (the Change Data Feed rows of every transaction in it, from every
batch) are read by Spark in one read and reduced so that each row of the replica table is
touched once (Drizzle's transaction reducer):

* keyed tables (``wlc.key``): the last state of each key wins, in (master Delta version,
  change order), where within one version a delete or pre-image comes before an insert or
  post-image. That is MusicBrainz's packet chains: insert+update = insert, update+delete = delete,
  insert+delete = nothing, delete+insert = update.
* unkeyed tables: the net signed count of each full row image (+1 insert/post-image,
  -1 delete/pre-image), so duplicate rows stay exact (deleting one of two equal rows
  leaves one).

Rows never pass through Python; these functions only build DataFrames.
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame, functions as F
from pyspark.sql.types import StructType

from .batch import CHANGE_TYPE, VERSION_COLUMN
from .canonical import canon, comparable, needs_canon
from .names import quote_ident

VERSION = "__wlr_v"  # the master Delta version a change row comes from
POS = "__wlr_pos"  # 1: insert or post-image (a state after), 0: delete or pre-image (a state before)
OP = "__wlr_op"  # keyed net change: True = the key exists after the segment (upsert), False = delete
FIRST = "__wlr_first"  # keyed net change: 1 when the key's first change was an insert (it was absent)
COUNT = "__wlr_n"  # unkeyed net change: net signed count of the row image
POSITIVE = ("insert", "update_postimage")  # change types that are a state after (POS 1)
VERSION_IN_PATH = rf"{VERSION_COLUMN}=(\d+)/[^/]*$"  # a change-row file's master version, from its folder


def read_rows(spark, uris: Sequence[str], schema=None) -> DataFrame:
    """All change rows under ``uris`` in one read; no partition column is inferred.

    Args:
        spark (SparkSession): the session that reads them.
        uris (Sequence[str]): ``.../wlc_version=<v>`` folders, or folders holding such folders
            (a compacted batch's pieces), as Spark URIs.
        schema (StructType | None): the table's schema after the segment, when the segment adds
            columns (rows written before have none: they read as NULL); None reads the files'
            own schema.

    Returns:
        DataFrame: the table's columns, ``_change_type``, ``__wlr_v`` (the version, from the
        folder name) and ``__wlr_pos``.
    """
    reader = spark.read
    if schema is not None:
        from pyspark.sql.types import StringType, StructField, StructType

        reader = reader.schema(StructType(list(schema.fields) + [StructField(CHANGE_TYPE, StringType())]))
    rows = reader.option("recursiveFileLookup", "true").parquet(*uris)
    version = F.regexp_extract(F.col("_metadata.file_path"), VERSION_IN_PATH, 1).cast("long")
    return rows.withColumn(VERSION, version).withColumn(POS, F.when(F.col(CHANGE_TYPE).isin(*POSITIVE), 1).otherwise(0))


def data_columns(rows: DataFrame) -> list[str]:
    """The table's own columns of the change rows (without the change type, version and position columns).

    Args:
        rows (DataFrame): change rows as :func:`read_rows` returns them.

    Returns:
        list[str]: the column names, in order.
    """
    return [c for c in rows.columns if c not in (CHANGE_TYPE, VERSION, POS)]


def _row(rows: DataFrame, cols: list[str]):
    """``(value, order)``: the change row as a struct ``v, p, c0..cn`` and its order (version,
    position, then the row's canonical form: a tie-break Spark can compare for every type)."""
    types = {f.name: f.dataType for f in rows.schema.fields}
    value = F.struct(
        F.col(VERSION).alias("v"),
        F.col(POS).alias("p"),
        *[F.col(quote_ident(c)).alias(f"c{i}") for i, c in enumerate(cols)],
    )
    order = F.struct(
        F.col(VERSION).alias("v"),
        F.col(POS).alias("p"),
        *[canon(F.col(quote_ident(c)), types[c]).alias(f"c{i}") for i, c in enumerate(cols)],
    )
    return value, order


def _key_groups(rows: DataFrame, keys: Sequence[str]) -> list:
    """The grouping columns of ``keys``: canonical forms where a key type needs one (maps,
    floats, structs holding them); NULL keys are one key, as ``<=>`` matches them."""
    types = {f.name: f.dataType for f in rows.schema.fields}
    return [canon(F.col(quote_ident(k)), types[k]).alias(f"__wlr_k{i}") for i, k in enumerate(keys)]


def net_by_key(rows: DataFrame, keys: Sequence[str]) -> DataFrame:
    """One row per key with its last state: the data columns, ``OP`` and ``FIRST``.

    Keys inserted and deleted within the segment are left out (insert+delete = nothing).
    NULL keys are one key, as ``<=>`` matches them; keys of any type are compared by
    their canonical form (:mod:`wlcore.canonical`).

    Args:
        rows (DataFrame): a segment's change rows (:func:`read_rows`).
        keys (Sequence[str]): the table's key columns (``wlc.key``).

    Returns:
        DataFrame: the net change, one row per key.
    """
    cols = data_columns(rows)
    value, order = _row(rows, cols)
    first = F.min(F.struct(F.col(VERSION).alias("v"), F.col(POS).alias("p")))
    grouped = rows.groupBy(*_key_groups(rows, keys)).agg(F.max_by(value, order).alias("__last"), first.alias("__first"))
    net = grouped.select(
        *[F.col(f"__last.c{i}").alias(c) for i, c in enumerate(cols)],
        (F.col("__last.p") == 1).alias(OP),
        F.col("__first.p").alias(FIRST),
    )
    return net.filter(~((F.col(FIRST) == 1) & ~F.col(OP)))


def net_by_image(rows: DataFrame) -> DataFrame:
    """The net signed count ``COUNT`` of each full row image, zeros left out. Images are
    compared by their canonical form (maps, VARIANT, ``-0.0`` and NaN are exact).

    Args:
        rows (DataFrame): a segment's change rows (:func:`read_rows`).

    Returns:
        DataFrame: the data columns and ``__wlr_n`` (inserts minus deletes of that image).
    """
    cols = data_columns(rows)
    sign = F.when(F.col(POS) == 1, 1).otherwise(-1)
    if not any(needs_canon(f.dataType) for f in rows.schema.fields if f.name in cols):
        qc = [quote_ident(c) for c in cols]
        return rows.groupBy(*qc).agg(F.sum(sign).alias(COUNT)).filter(F.col(COUNT) != 0)
    image = F.struct(*[F.col(quote_ident(c)).alias(f"c{i}") for i, c in enumerate(cols)])
    grouped = rows.groupBy(*comparable(rows, cols)).agg(F.first(image).alias("__img"), F.sum(sign).alias(COUNT))
    return grouped.filter(F.col(COUNT) != 0).select(
        *[F.col(f"__img.c{i}").alias(c) for i, c in enumerate(cols)], F.col(COUNT)
    )


def repeat(df: DataFrame, times) -> DataFrame:
    """Each row of ``df`` ``times`` times.

    Args:
        df (DataFrame): the rows.
        times (Column): an integer column: how many times each row is kept (0 drops it).

    Returns:
        DataFrame: the rows repeated, with the same columns.
    """
    return df.withColumn("__wlr_rep", F.explode(F.array_repeat(F.lit(1), times.cast("int")))).drop("__wlr_rep")


def compact_by_key(rows: DataFrame, keys: Sequence[str], version: int) -> DataFrame:
    """The change rows a compacted piece keeps of a keyed table, all at master version
    ``version`` (the piece's last), so a piece is one file:

    * a key that existed before and after: its state before (``update_preimage``) and
      after (``update_postimage``); left out when the two are equal (nothing changed
      net: MusicBrainz's ``edits_pending`` +1 then -1);
    * a key that existed before, deleted: one ``delete`` row;
    * a key that did not exist, there after: one ``insert`` row with its last state;
    * a key inserted and deleted within: nothing.

    :func:`net_by_key` over these rows followed by later ones gives what it gives over all
    the rows followed by them (its last state is a max, its first change a min, and the
    kinds above keep both), so pieces concatenate exactly; the one difference is that a
    key left out for no net change is not checked to be on the replica.

    Args:
        rows (DataFrame): the run's change rows (:func:`read_rows`).
        keys (Sequence[str]): the table's key columns (``wlc.key``).
        version (int): the master Delta version of the piece's last transaction.

    Returns:
        DataFrame: the data columns, ``_change_type`` and ``wlc_version``.
    """
    cols = data_columns(rows)
    value, order = _row(rows, cols)
    ends = rows.groupBy(*_key_groups(rows, keys)).agg(
        F.min_by(value, order).alias("f"), F.max_by(value, order).alias("l")
    )
    before, after = F.col("f.p") == 0, F.col("l.p") == 1
    row_type = StructType([f for f in rows.schema.fields if f.name in cols])
    state = lambda s: F.struct(*[F.col(f"{s}.c{i}").alias(c) for i, c in enumerate(cols)])  # noqa: E731
    same = canon(state("f"), row_type).eqNullSafe(canon(state("l"), row_type))
    ends = ends.filter((before | after) & ~(before & after & same))

    def side(df: DataFrame, s: str, kind) -> DataFrame:
        return df.select(
            *[F.col(f"{s}.c{i}").alias(c) for i, c in enumerate(cols)],
            kind.alias(CHANGE_TYPE),
            F.lit(version).cast("long").alias(VERSION_COLUMN),
        )

    first = side(ends.filter(before), "f", F.when(after, F.lit("update_preimage")).otherwise(F.lit("delete")))
    last = side(ends.filter(after), "l", F.when(before, F.lit("update_postimage")).otherwise(F.lit("insert")))
    return first.unionByName(last)


def compact_by_image(rows: DataFrame, version: int) -> DataFrame:
    """The change rows a compacted piece keeps of an unkeyed table: each row image's net
    count as that many ``insert`` rows (positive) or ``delete`` rows (negative).

    Args:
        rows (DataFrame): the run's change rows (:func:`read_rows`).
        version (int): the master Delta version of the piece's last transaction.

    Returns:
        DataFrame: the data columns, ``_change_type`` and ``wlc_version``.
    """
    net = net_by_image(rows)
    cols = [c for c in net.columns if c != COUNT]
    kind = F.when(F.col(COUNT) > 0, F.lit("insert")).otherwise(F.lit("delete"))
    return repeat(net, F.abs(F.col(COUNT))).select(
        *[quote_ident(c) for c in cols], kind.alias(CHANGE_TYPE), F.lit(version).cast("long").alias(VERSION_COLUMN)
    )
