"""MERGE source columns given the replica table's required (NOT NULL) nested fields.

Change rows come back from Parquet with every field nullable. A Delta MERGE casts each assigned
source column to the target column's type, and Spark refuses to cast ``STRUCT<a: INT>`` to
``STRUCT<a: INT NOT NULL>`` (a nested field, an array element or a map value that may be NULL
into one that may not), although an append of the same rows is accepted and checked row by row.
:func:`conformed` rebuilds such a column with the target's nullability: each struct by
``named_struct`` (never NULL itself), each array and map by ``transform``/``transform_values``,
and each required value as ``coalesce(value, raise_error(...), <a constant of its type>)``: a NULL
there (which the master's own NOT NULL check never lets in) fails the MERGE's job naming the
field, and the constant, never reached, only tells Spark the value cannot be NULL.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    MapType,
    NumericType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from wlcore.names import quote_ident
from wlcore.tabledef import sql_string

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
