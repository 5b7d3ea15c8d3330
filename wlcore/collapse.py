"""Change rows -> net change: MusicBrainz's chain rules over a segment of transactions, by Spark or Arrow.

A segment's change rows (the Change Data Feed rows of every transaction in it, from every
batch) are reduced so that each row of the replica table is touched once (Drizzle's
transaction reducer). One rule, whichever engine collapses:

* order: change rows are ordered by (master Delta version, position), position 0 for a
  ``delete`` or ``update_preimage`` (a state before) and 1 for an ``insert`` or
  ``update_postimage`` (a state after): within one version, as in Delta's change feed, the
  states before come before the states after (a delete and an insert of one key in one
  version is an update).
* keyed tables (``wlc.key``): the last change row of each key gives its state (``OP``: there
  after the segment, at position 1); ``FIRST`` is the position of its first change (1: it was
  absent before). A key first inserted and last deleted is left out. That is MusicBrainz's
  packet chains: insert+update = insert, update+delete = delete, insert+delete = nothing,
  delete+insert = update. A deleted key's other columns carry nothing (the applier deletes by
  key): :func:`compact_by_key` keeps its state before the piece there, :func:`net_by_key` its
  last delete row.
* NULL keys are one key (``<=>``); keys compare by their canonical form
  (:func:`canon`).
* ties: two change rows of one key at one version and position (the master holds the key
  twice) are ordered by the rows' canonical form; the greatest is the last.
* unkeyed tables: the net signed count of each full row image (+1 at position 1, -1 at 0),
  images compared by their canonical form (NULL equals NULL, NaN equals NaN, ``-0.0``
  differs from ``0.0``), so duplicate rows stay exact (deleting one of two equal rows leaves
  one).

Spark's functions (:func:`read_rows`, :func:`net_by_key`, :func:`net_by_image`,
:func:`compact_by_key`...) pass no row through Python; they only build DataFrames. The Arrow
functions (the ``*_arrow`` functions and :func:`after_images`) serve segments small enough to
land without Spark (:mod:`wlr.apply`), on a pyarrow Table in memory, vectorized (one sort, then
the first and last row of each run of equal keys; no Python loop over rows). Their domain is
smaller, never their rule: :func:`net_by_key_arrow` refuses a tie and a NULL key with
:class:`ArrowUnsupported` (delta-rs's MERGE matches keys by ``=``), and Spark collapses that
segment. Both engines give the same net change on every segment Arrow takes
(tests/integration/test_collapse_equivalence.py). pyarrow is imported by the Arrow functions
only, so replay's Spark path starts without it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Sequence

from pyspark.sql import Column, DataFrame, functions as F
from pyspark.sql.types import ArrayType, DataType, DoubleType, FloatType, MapType, StructField, StructType

from .batch import CHANGE_TYPE, VERSION_COLUMN
from .names import quote_ident

if TYPE_CHECKING:
    import pyarrow as pa

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
    their canonical form (:mod:`wlcore.collapse`).

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


_VERSION_OF = re.compile(VERSION_IN_PATH)


class ArrowUnsupported(Exception):
    """These change rows cannot be collapsed here exactly; the message says why (Spark collapses them)."""


def read_rows_arrow(files: Iterable[str], missing: bool = False) -> pa.Table:
    """The change rows of Parquet ``files`` (local paths below ``.../wlc_version=<v>/``) as one table.

    INT96 timestamps (Spark's default Parquet timestamps) are read in microseconds, Spark's own
    unit, so instants before 1677 or after 2262 stay exact.

    Args:
        files (Iterable[str]): the change-row files of a segment.
        missing (bool): a column some files lack (written before an ALTER added it) reads NULL
            there; False: the files' schemas must be equal.

    Returns:
        pa.Table: the table's columns, ``_change_type``, ``__wlr_v`` (the master version, from the
        folder name) and ``__wlr_pos`` (1: insert or post-image, 0: delete or pre-image).

    Raises:
        ArrowUnsupported: a file is not below a ``wlc_version=<v>`` folder, or the files' schemas differ
            (beyond missing columns, when ``missing``).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    files = list(files)
    versions = []
    for f in files:
        found = _VERSION_OF.search(f.replace("\\", "/"))
        if found is None:
            raise ArrowUnsupported(f"{f} is not below a {VERSION_COLUMN}=<version> folder")
        versions.append(int(found.group(1)))
    parts = read_files_arrow(files)
    if not parts:
        raise ArrowUnsupported("no change rows")
    try:
        rows = pa.concat_tables(parts, promote_options="default" if missing else "none")
    except pa.ArrowInvalid as exc:
        raise ArrowUnsupported(f"change-row files of different schemas: {exc}") from None
    # each file's master version over its rows, made once for all of them
    runs = [(t.num_rows, v) for t, v in zip(parts, versions) if t.num_rows]  # run ends rise strictly
    ends = pc.cumulative_sum(pa.array([n for n, _v in runs], pa.int64()))
    version = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, pa.array([v for _n, v in runs], pa.int64())))
    pos = pc.is_in(rows[CHANGE_TYPE], value_set=pa.array(POSITIVE)).cast(pa.int8())
    return rows.append_column(VERSION, version).append_column(POS, pos)


def read_files_arrow(files: Iterable[str]) -> list[pa.Table]:
    """Local Parquet ``files``, each as one table, INT96 timestamps in microseconds (Spark's unit,
    so instants before 1677 or after 2262 stay exact).

    Small files, read by segments in threads of their own: no dataset (``read_table``'s costs
    2x), no pre-buffering and no threads within a file (3x faster again), each opened through
    one local filesystem (a quarter less than Arrow finding the filesystem of a path).

    Args:
        files (Iterable[str]): the files' local paths.

    Returns:
        list[pa.Table]: a table a file, in order.
    """
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    local = pafs.LocalFileSystem()
    parts = []
    for f in files:
        with (
            local.open_input_file(f) as src,
            pq.ParquetFile(src, coerce_int96_timestamp_unit="us", pre_buffer=False) as pf,
        ):
            parts.append(pf.read(use_threads=False))
    return parts


def data_columns_arrow(rows: pa.Table) -> list[str]:
    """The table's own columns of ``rows`` (:func:`read_rows_arrow`), in order."""
    return [c for c in rows.column_names if c not in (CHANGE_TYPE, VERSION, POS)]


def _arrow_runs(sorted_rows: pa.Table, cols: Sequence[str]) -> pa.Array:
    """True at each row (but the first) whose ``cols`` differ from the row before."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = sorted_rows.num_rows
    if n < 2:
        return pa.array([], pa.bool_())
    change = None
    for c in cols:
        col = sorted_rows[c].combine_chunks()
        differs = pc.not_equal(col.slice(1), col.slice(0, n - 1))
        change = differs if change is None else pc.or_(change, differs)
    return change


def net_by_key_arrow(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """One row per key with its last state: the data columns, ``__wlr_op`` (the key exists after
    the segment) and ``__wlr_first`` (1: the key's first change was an insert, so it was absent).
    Keys inserted and deleted within the segment are left out.

    Args:
        rows (pa.Table): a segment's change rows (:func:`read_rows_arrow`).
        keys (Sequence[str]): the table's key columns (``wlc.key``).

    Returns:
        pa.Table: the net change.

    Raises:
        ArrowUnsupported: a key column holds NULL (matched by ``<=>``, which Spark's MERGE does), or
            one key changes twice at one version and position (the master holds it twice).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    for k in keys:
        if rows[k].null_count:
            raise ArrowUnsupported(f"key column {k} holds NULL")
    cols = data_columns_arrow(rows)
    order = [(k, "ascending") for k in keys] + [(VERSION, "ascending"), (POS, "ascending")]
    s = rows.take(pc.sort_indices(rows, sort_keys=order))
    n = s.num_rows
    new_key = _arrow_runs(s, keys)
    if n > 1 and not pc.all(pc.or_(new_key, _arrow_runs(s, [VERSION, POS]))).as_py():
        raise ArrowUnsupported("a key changes twice at one master version and position")
    starts = pa.concat_arrays([pa.array([True]), new_key]) if n else pa.array([], pa.bool_())
    ends = pa.concat_arrays([new_key, pa.array([True])]) if n else pa.array([], pa.bool_())
    first_pos = s[POS].filter(starts)
    last = s.filter(ends)
    op = pc.equal(last[POS], 1)
    net = last.select(cols).append_column(OP, op).append_column(FIRST, first_pos)
    gone = pc.and_(pc.equal(first_pos, 1), pc.invert(op))  # insert+delete = nothing
    return net.filter(pc.invert(gone))


def after_images(table: pa.Table, rows: pa.Table) -> tuple[pa.Table, pa.Table, int]:
    """An unkeyed table's rows after a segment, with multiset semantics (deleting one of two
    identical rows leaves one), as :func:`net_by_image` and Spark's replay MERGE by
    image make them: each full row image counted in the table, plus the segment's inserts and
    post-images, less its deletes and pre-images. Images are grouped by Arrow's hash grouping: NULL
    equals NULL, NaN equals NaN, ``-0.0`` differs from ``0.0`` (the canonical form's rules).

    Args:
        table (pa.Table): the table's rows now.
        rows (pa.Table): the segment's change rows (:func:`read_rows_arrow`), with the table's columns
            and types.

    Returns:
        tuple[pa.Table, pa.Table, int]: the table's rows after the segment (in no particular
        order); the images the segment deletes more often than the table holds them (empty unless
        the replica has diverged); how many images the segment changes (its net change's rows).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = table.column_names
    weight, delta = "__wlr_w", "__wlr_d"  # copies after the segment; the segment's own change
    sign = pc.subtract(pc.multiply(rows[POS].cast(pa.int64()), 2), 1)  # 1: insert or post-image, -1 else
    change = rows.select(cols).cast(table.schema).append_column(weight, sign).append_column(delta, sign)
    one, zero = (pa.repeat(pa.scalar(v, pa.int64()), table.num_rows) for v in (1, 0))
    both = pa.concat_tables([table.append_column(weight, one).append_column(delta, zero), change])
    images = both.group_by(cols).aggregate([(weight, "sum"), (delta, "sum")])  # one grouping of every row
    changed = pc.sum(pc.not_equal(images[f"{delta}_sum"], 0).cast(pa.int64())).as_py() or 0
    counts = images[f"{weight}_sum"]
    short = images.filter(pc.less(counts, 0)).select(cols)
    index = np.repeat(np.arange(images.num_rows), np.clip(counts.to_numpy(), 0, None))
    return images.select(cols).take(pa.array(index)), short, changed


# --- Canonical forms: how rows and keys of every type are matched ---
#
# Comparable forms of column values, for matching full rows and keys of every type Delta stores.
#
# Spark has no equality, grouping or ordering on MAP and VARIANT values, and its equality
# folds ``-0.0`` into ``0.0`` (which Delta stores as different values). Replay matches rows
# by these *canonical* forms instead, each an injective image of the value in a type Spark
# can compare: a map becomes its entries sorted by key, a VARIANT its JSON text (object
# keys are sorted in VARIANT's binary form), a float or double its shortest exact decimal
# text (``-0.0``, ``NaN``, ``Infinity`` kept apart from ``0.0``), recursively inside structs,
# arrays and maps. Columns of other types are compared as they are, so keys of plain types
# keep Delta's file skipping. Every function builds Spark Columns: no row passes through Python.


def _is_variant(dtype: DataType) -> bool:
    return type(dtype).__name__ == "VariantType"


def needs_canon(dtype: DataType) -> bool:
    """True when values of ``dtype`` cannot be compared as they are (map, VARIANT, float,
    double, or a struct or array holding one).

    Args:
        dtype (DataType): a Spark type.
    """
    if isinstance(dtype, (MapType, FloatType, DoubleType)) or _is_variant(dtype):
        return True
    if isinstance(dtype, StructType):
        return any(needs_canon(f.dataType) for f in dtype.fields)
    if isinstance(dtype, ArrayType):
        return needs_canon(dtype.elementType)
    return False


def canon(col: Column, dtype: DataType) -> Column:
    """The comparable form of ``col``: floats and VARIANT as text (``-0.0`` and NaN exact), maps as
    sorted arrays of entries, structs and arrays of such forms. NULL stays NULL.

    Args:
        col (Column): the value.
        dtype (DataType): its Spark type.

    Returns:
        Column: ``col`` itself when it needs no canonical form (:func:`needs_canon`).
    """
    if not needs_canon(dtype):
        return col
    if isinstance(dtype, (FloatType, DoubleType)):
        return col.cast("string")
    if _is_variant(dtype):
        return F.to_json(col)
    if isinstance(dtype, StructType):
        return F.when(col.isNull(), F.lit(None)).otherwise(
            F.struct(*[canon(col.getField(f.name), f.dataType).alias(f"c{i}") for i, f in enumerate(dtype.fields)])
        )
    if isinstance(dtype, ArrayType):
        return F.transform(col, lambda x: canon(x, dtype.elementType))
    if isinstance(dtype, MapType):
        entries = F.transform(
            F.map_entries(col),
            lambda e: F.struct(
                canon(e.getField("key"), dtype.keyType).alias("k"),
                canon(e.getField("value"), dtype.valueType).alias("v"),
            ),
        )
        return F.array_sort(entries)
    return col


def canon_type(dtype: DataType) -> DataType:
    """The type of :func:`canon`'s result (for schemas of empty frames).

    Args:
        dtype (DataType): the Spark type of the column :func:`canon` is given.

    Returns:
        DataType: ``dtype`` itself when it needs no canonical form; else strings for floats and
        VARIANT, and structs, arrays and maps of those.
    """
    if not needs_canon(dtype):
        return dtype
    from pyspark.sql.types import StringType

    if isinstance(dtype, (FloatType, DoubleType)) or _is_variant(dtype):
        return StringType()
    if isinstance(dtype, StructType):
        return StructType([StructField(f"c{i}", canon_type(f.dataType)) for i, f in enumerate(dtype.fields)])
    if isinstance(dtype, ArrayType):
        return ArrayType(canon_type(dtype.elementType))
    return ArrayType(
        StructType([StructField("k", canon_type(dtype.keyType)), StructField("v", canon_type(dtype.valueType))])
    )


def same(left: Column, right: Column, dtype: DataType) -> Column:
    """``left`` and ``right`` hold the same value (NULL equals NULL), for any type.

    Args:
        left (Column): a value.
        right (Column): the value to compare it with, of the same type.
        dtype (DataType): their Spark type (maps, floats and VARIANT are compared by their
            canonical form, :func:`canon`).

    Returns:
        Column: a boolean column, never NULL.
    """
    return canon(left, dtype).eqNullSafe(canon(right, dtype))


def all_same(left: str, right: str, fields: list[StructField]) -> Column:
    """Every column of ``fields`` equal between the frames aliased ``left`` and ``right``.

    Args:
        left (str): the alias of one frame.
        right (str): the alias of the other.
        fields (list[StructField]): the columns to compare (each by :func:`same`).

    Returns:
        Column: a boolean column (``F.lit(True)`` when there are no fields).
    """
    from .names import quote_ident

    cond = F.lit(True)
    for f in fields:
        q = quote_ident(f.name)
        cond = cond & same(F.col(f"{left}.{q}"), F.col(f"{right}.{q}"), f.dataType)
    return cond


def comparable(df, columns: list[str] | None = None) -> list[Column]:
    """The canonical forms of ``df``'s columns (:func:`canon`), named as the columns.

    Args:
        df (DataFrame): the frame.
        columns (list[str] | None): the columns (None: all).

    Returns:
        list[Column]: one per column, in order.
    """
    from .names import quote_ident

    fields = {f.name: f for f in df.schema.fields}
    names = columns if columns is not None else list(fields)
    return [canon(F.col(quote_ident(n)), fields[n].dataType).alias(n) for n in names]
