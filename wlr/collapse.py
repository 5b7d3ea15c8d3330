"""Change rows -> net change (Spark): seed 000's chain rules over a segment of transactions.

A segment's change rows (the Change Data Feed rows of every transaction in it, from every
batch) are read by Spark in one read and reduced so that each row of the replica table is
touched once (Drizzle's reducer, seed 001):

* keyed tables (``wlc.key``): the last state of each key wins, in (master Delta version,
  change order), where within one version a delete or pre-image comes before an insert or
  post-image. That is seed 000's chains: insert+update = insert, update+delete = delete,
  insert+delete = nothing, delete+insert = update.
* unkeyed tables: the net signed count of each full row image (+1 insert/post-image,
  -1 delete/pre-image), so duplicate rows stay exact (deleting one of two equal rows
  leaves one).

Rows never pass through Python; these functions only build DataFrames.
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame, functions as F

from wlc.capture import CHANGE_TYPE, VERSION_COLUMN
from wlc.names import quote_ident

VERSION = "__wlr_v"   # the master Delta version a change row comes from
POS = "__wlr_pos"     # 1: insert or post-image (a state after), 0: delete or pre-image (a state before)
OP = "__wlr_op"       # keyed net change: True = the key exists after the segment (upsert), False = delete
FIRST = "__wlr_first"  # keyed net change: 1 when the key's first change was an insert (it was absent)
COUNT = "__wlr_n"     # unkeyed net change: net signed count of the row image
_POSITIVE = ("insert", "update_postimage")


def read_rows(spark, uris: Sequence[str], schema=None) -> DataFrame:
    """All change rows under ``uris`` (``.../wlc_version=<v>`` folders) in one read.

    ``schema``: the table's ``StructType`` after the segment, when the segment adds columns
    (rows written before have none: they read as NULL); None reads the files' own schema.
    Returns the table's columns, ``_change_type``, ``__wlr_v`` (the version, from the
    folder name) and ``__wlr_pos``.
    """
    reader = spark.read
    if schema is not None:
        from pyspark.sql.types import StringType, StructField, StructType
        reader = reader.schema(StructType(list(schema.fields) + [StructField(CHANGE_TYPE, StringType())]))
    rows = reader.parquet(*uris)
    version = F.regexp_extract(F.col("_metadata.file_path"), rf"{VERSION_COLUMN}=(\d+)/[^/]*$", 1).cast("long")
    return (rows.withColumn(VERSION, version)
                .withColumn(POS, F.when(F.col(CHANGE_TYPE).isin(*_POSITIVE), 1).otherwise(0)))


def data_columns(rows: DataFrame) -> list[str]:
    return [c for c in rows.columns if c not in (CHANGE_TYPE, VERSION, POS)]


def net_by_key(rows: DataFrame, keys: Sequence[str]) -> DataFrame:
    """One row per key with its last state: the data columns, ``OP`` and ``FIRST``.

    Keys inserted and deleted within the segment are left out (insert+delete = nothing).
    NULL keys are one key, as ``<=>`` matches them.
    """
    cols = data_columns(rows)
    qk = [quote_ident(k) for k in keys]
    # struct ordering is field by field: version, then position, then the row (a tie-break)
    last = F.max(F.struct(F.col(VERSION).alias("v"), F.col(POS).alias("p"),
                          *[F.col(quote_ident(c)).alias(f"c{i}") for i, c in enumerate(cols)]))
    first = F.min(F.struct(F.col(VERSION).alias("v"), F.col(POS).alias("p")))
    grouped = rows.groupBy(*qk).agg(last.alias("__last"), first.alias("__first"))
    net = grouped.select(
        *[F.col(f"__last.c{i}").alias(c) for i, c in enumerate(cols)],
        (F.col("__last.p") == 1).alias(OP), F.col("__first.p").alias(FIRST))
    return net.filter(~((F.col(FIRST) == 1) & ~F.col(OP)))


def net_by_image(rows: DataFrame) -> DataFrame:
    """The net signed count ``COUNT`` of each full row image, zeros left out."""
    qc = [quote_ident(c) for c in data_columns(rows)]
    sign = F.when(F.col(POS) == 1, 1).otherwise(-1)
    return rows.groupBy(*qc).agg(F.sum(sign).alias(COUNT)).filter(F.col(COUNT) != 0)
