"""Delta's type widening (``delta.enableTypeWidening``): which change of a column's primitive
type Delta makes in place, without rewriting data or losing a value (pure, no Spark).
:mod:`wlcore.alter` carries such a change as an ALTER COLUMN ... TYPE; any other change of
type has no ALTER form and is carried by the table's image."""

from __future__ import annotations

_INTEGERS = ("byte", "short", "integer", "long")
_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}


def _decimal(t: str) -> tuple[int, int] | None:
    if not t.startswith("decimal"):
        return None
    p, _, s = t[t.index("(") + 1 : t.index(")")].partition(",")
    return int(p), int(s or 0)


def widens(a: str, b: str) -> bool:
    """Whether Delta's type widening changes a column of type ``a`` to type ``b`` in place.

    The changes Delta's type widening supports (Delta Lake's documentation, "Type widening"):
    a wider integer, float to double, byte/short/integer to double or to a decimal with room
    for its digits, a decimal with no fewer integer and no fewer fraction digits, date to
    timestamp_ntz.

    Args:
        a: the type before, a primitive type as Delta's schema JSON names it (``"integer"``,
            ``"decimal(10,2)"``, ``"date"``).
        b: the type after, in the same form.

    Returns:
        True when ``b`` widens ``a`` without loss; False for the same type and for any
        other change (a narrowing, a change of kind).
    """
    if a in _INTEGERS and b in _INTEGERS:
        return _INTEGERS.index(b) > _INTEGERS.index(a)
    if b == "double" and (a == "float" or a in ("byte", "short", "integer")):
        return True
    if a == "date" and b == "timestamp_ntz":
        return True
    db = _decimal(b)
    if db is None:
        return False
    if a in _INTEGERS:
        return db[0] - db[1] >= _DIGITS[a]
    da = _decimal(a)
    return da is not None and db[1] >= da[1] and db[0] - db[1] >= da[0] - da[1] and db != da
