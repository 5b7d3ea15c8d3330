"""Comparable forms of column values, for matching full rows and keys of every type Delta stores.

Spark has no equality, grouping or ordering on MAP and VARIANT values, and its equality
folds ``-0.0`` into ``0.0`` (which Delta stores as different values). Replay matches rows
by these *canonical* forms instead, each an injective image of the value in a type Spark
can compare: a map becomes its entries sorted by key, a VARIANT its JSON text (object
keys are sorted in VARIANT's binary form), a float or double its shortest exact decimal
text (``-0.0``, ``NaN``, ``Infinity`` kept apart from ``0.0``), recursively inside structs,
arrays and maps. Columns of other types are compared as they are, so keys of plain types
keep Delta's file skipping. Every function builds Spark Columns: no row passes through Python.
"""

from __future__ import annotations

from pyspark.sql import Column, functions as F
from pyspark.sql.types import ArrayType, DataType, DoubleType, FloatType, MapType, StructField, StructType


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
