"""ALTER TABLE statements for the operations :func:`wlcore.alter.diff` finds (pure, no Spark):
Delta's ALTER TABLE syntax on a path-based table, and the table features a replica table must
have switched on before them."""

from __future__ import annotations

from typing import Any

from .names import quote_ident
from .tabledef import COMMENT_KEY, DEFAULT, DEFAULTS_FEATURE, FEATURE_PREFIX, path_sql, sql_string, type_sql

Op = dict[str, Any]  # an operation of wlcore.alter.diff: {"op": kind, ...}


def statements(ref: str, ops: list[Op]) -> list[str]:  # noqa: C901, PLR0912 (one case per kind of ALTER op)
    """ALTER TABLE statements for ``ops``, in order (Delta's ALTER TABLE syntax).

    Args:
        ref (str): the table as SQL names it (``delta.`<uri>```).
        ops (list[Op]): operations of :func:`diff`.

    Returns:
        list[str]: the statements (an added column may take several: its default, NOT NULL).

    Raises:
        ValueError: an unknown operation.
    """
    out = []
    for op in ops:
        kind = op["op"]
        where = path_sql(op["path"]) if "path" in op else ""
        if kind == "set_properties":
            body = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in op["properties"].items())
            out.append(f"ALTER TABLE {ref} SET TBLPROPERTIES ({body})")
        elif kind == "unset_properties":
            out.append(
                f"ALTER TABLE {ref} UNSET TBLPROPERTIES IF EXISTS ("
                + ", ".join(sql_string(k) for k in op["keys"])
                + ")"
            )
        elif kind == "drop_constraint":
            out.append(f"ALTER TABLE {ref} DROP CONSTRAINT IF EXISTS {quote_ident(op['name'])}")
        elif kind == "add_constraint":
            out.append(f"ALTER TABLE {ref} ADD CONSTRAINT {quote_ident(op['name'])} CHECK ({op['expr']})")
        elif kind == "drop":
            out.append(f"ALTER TABLE {ref} DROP COLUMN {where}")
        elif kind == "rename":
            out.append(f"ALTER TABLE {ref} RENAME COLUMN {where} TO {quote_ident(op['to'])}")
        elif kind == "add":
            field = op["field"]
            md = field.get("metadata") or {}
            text = f"{where} {type_sql(field['type'], md)}"
            if md.get(COMMENT_KEY) is not None:
                text += f" COMMENT {sql_string(md[COMMENT_KEY])}"
            text += " FIRST" if op.get("first") else (f" AFTER {quote_ident(op['after'])}" if op.get("after") else "")
            out.append(f"ALTER TABLE {ref} ADD COLUMNS ({text})")
            if md.get(DEFAULT) is not None:
                out.append(f"ALTER TABLE {ref} ALTER COLUMN {where} SET DEFAULT {md[DEFAULT]}")
            if not field.get("nullable", True):
                out.append(f"ALTER TABLE {ref} ALTER COLUMN {where} SET NOT NULL")
        elif kind == "move":
            pos = f"AFTER {quote_ident(op['after'])}" if op.get("after") else "FIRST"
            out.append(f"ALTER TABLE {ref} ALTER COLUMN {where} {pos}")
        elif kind == "type":
            out.append(f"ALTER TABLE {ref} ALTER COLUMN {where} TYPE {type_sql(op['type'], op.get('metadata'))}")
        elif kind in ("nullable", "not_null"):
            out.append(f"ALTER TABLE {ref} ALTER COLUMN {where} {'DROP' if kind == 'nullable' else 'SET'} NOT NULL")
        elif kind == "comment":
            out.append(f"ALTER TABLE {ref} ALTER COLUMN {where} COMMENT {sql_string(op['text'])}")
        elif kind == "default":
            out.append(
                f"ALTER TABLE {ref} ALTER COLUMN {where} "
                + (f"SET DEFAULT {op['expr']}" if op.get("expr") is not None else "DROP DEFAULT")
            )
        elif kind == "cluster":
            cols = op["columns"]
            out.append(
                f"ALTER TABLE {ref} CLUSTER BY "
                + ("(" + ", ".join(path_sql(p) for p in cols) + ")" if cols else "NONE")
            )
        elif kind == "drop_feature":
            out.append(f"ALTER TABLE {ref} DROP FEATURE {quote_ident(op['name'])}")
        elif kind == "table_comment":
            out.append(f"ALTER TABLE {ref} SET TBLPROPERTIES ('comment' = {sql_string(op['text'] or '')})")
        else:
            raise ValueError(f"unknown ALTER operation {kind!r}")
    return out


def _types_in(t: Any) -> set[str]:
    if isinstance(t, str):
        return {t}
    if t.get("type") == "struct":
        return set().union(*[_types_in(f["type"]) for f in t.get("fields", [])] or [set()])
    if t.get("type") == "array":
        return _types_in(t["elementType"])
    if t.get("type") == "map":
        return _types_in(t["keyType"]) | _types_in(t["valueType"])
    return set()


def features_needed(ops: list[Op]) -> dict[str, str]:
    """Table features the replica table must support before ``ops`` (Delta wants them
    switched on by hand for an existing table): column defaults, TIMESTAMP_NTZ, VARIANT.

    Args:
        ops (list[Op]): operations of :func:`diff`.

    Returns:
        dict[str, str]: ``{table property: "supported"}`` to set first (empty: none).
    """
    out: dict[str, str] = {}
    for op in ops:
        if (
            op["op"] == "default"
            and op.get("expr") is not None
            or op["op"] == "add"
            and (op["field"].get("metadata") or {}).get(DEFAULT) is not None
        ):
            out[DEFAULTS_FEATURE] = "supported"
        types = (
            _types_in(op["type"])
            if op["op"] == "type"
            else _types_in(op["field"]["type"])
            if op["op"] == "add"
            else set()
        )
        if "timestamp_ntz" in types:
            out[FEATURE_PREFIX + "timestampNtz"] = "supported"
        if "variant" in types:
            out[FEATURE_PREFIX + "variantType"] = "supported"
    return out
