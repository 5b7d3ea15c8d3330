"""A master table's change of definition as ALTER TABLE operations (pure, no Spark).

Capture compares a table's definition before and after a Delta version that changed its
metadata (:mod:`wlcore.tabledef`) and records the change as a list of operations in the
transaction record; replay turns them into ALTER TABLE statements on the replica table,
so a rename under column mapping stays a rename, a type widening a widening, a new
comment a comment, and no row has to be copied. Columns are matched by their column
mapping id where the table has column mapping (a column dropped and added again under
the same name is a new column), else by name.

An operation is a JSON-able dict ``{"op": kind, ...}``; paths are lists of field names
(``["s", "a"]`` for field ``a`` of struct ``s``; ``element``, ``key`` and ``value`` step
into arrays and maps, as Delta's ALTER TABLE names them). :func:`diff` returns None when
the change has no ALTER TABLE form (another partitioning, another generation expression
or identity, a column turned into a struct); capture then carries the table's image.

A change of a column's primitive type is an operation only where Delta's type widening
(``delta.enableTypeWidening``) makes it in place, without rewriting data or losing a value
(:func:`widens`). :func:`statements` writes the operations as Delta's ALTER TABLE syntax on a
path-based table, and :func:`features_needed` names the table features a replica table must have
switched on before them.
"""

from __future__ import annotations

from typing import Any

from .names import quote_ident
from .tabledef import (
    CHAR_VARCHAR,
    CM_ID,
    COMMENT_KEY,
    CONSTRAINT_PREFIX,
    DEFAULT,
    DEFAULTS_FEATURE,
    FEATURE_PREFIX,
    GENERATION,
    IDENTITY_START,
    IDENTITY_STEP,
    carried_features,
    constraints,
    path_sql,
    replicated_properties,
    sql_string,
    type_sql,
)


class NoAlter(Exception):
    """The change has no ALTER TABLE form."""


def diff(old, new, by_name: bool = False) -> list[Op] | None:
    """The operations that turn a table defined as ``old`` into one defined as ``new``, in the
    order to apply them.

    Args:
        old (TableMeta): the definition before (:class:`wlcore.deltalog.TableMeta`).
        new (TableMeta): the definition after.
        by_name (bool): match columns by name even under column mapping (two different tables,
            a replica's and its master's, have their own column mapping ids).

    Returns:
        list[Op] | None: ``[]`` when the definitions are equal; None when the change has no
        ALTER TABLE form (another partitioning, generation or identity, a drop or rename
        without column mapping, a type change that is no widening or made where type widening
        is off: an ``overwriteSchema`` write or a REPLACE TABLE rewrote the column).
    """
    if tuple(old.partition_columns) != tuple(new.partition_columns):
        return None
    oldp, newp = replicated_properties(old.configuration), replicated_properties(new.configuration)
    ops: list[Op] = []
    oldf, newf = carried_features(old), carried_features(new)
    added = [f for f in newf or [] if oldf is None or f not in oldf]
    if added:  # first: what comes after may need them (a TIMESTAMP_NTZ column, a widening)
        ops.append({"op": "set_properties", "properties": {FEATURE_PREFIX + f: "supported" for f in added}})
    plain = lambda d: {k: v for k, v in d.items() if not k.startswith(CONSTRAINT_PREFIX)}  # noqa: E731
    setp = {k: v for k, v in plain(newp).items() if plain(oldp).get(k) != v}
    if setp:
        ops.append({"op": "set_properties", "properties": setp})
    oldc, newc = constraints(old.configuration), constraints(new.configuration)
    for name, expr in oldc.items():
        if newc.get(name) != expr:
            ops.append({"op": "drop_constraint", "name": name})
    mapped = all(m.configuration.get("delta.columnMapping.mode", "none").lower() in ("name", "id") for m in (old, new))
    try:
        column_ops = _struct_ops(
            [],
            _names(old.schema) if by_name else old.schema.get("fields", []),
            _names(new.schema) if by_name else new.schema.get("fields", []),
        )
    except NoAlter:
        return None
    if not mapped and any(op["op"] in ("drop", "rename") for op in column_ops):
        return None  # Delta drops and renames columns only under column mapping
    if not widening(new) and any(op["op"] == "type" for op in column_ops):
        return None  # Delta changes a column's type in place only with type widening on (else an overwrite did)
    ops.extend(column_ops)
    if old.clustering_columns != new.clustering_columns:
        ops.append({"op": "cluster", "columns": new.clustering_columns})
    if (old.description or None) != (new.description or None):
        ops.append({"op": "table_comment", "text": new.description})
    for name, expr in newc.items():
        if oldc.get(name) != expr:
            ops.append({"op": "add_constraint", "name": name, "expr": expr})
    unset = [k for k in plain(oldp) if k not in plain(newp)]
    if unset:
        ops.append({"op": "unset_properties", "keys": unset})
    if newf is not None:
        ops.extend({"op": "drop_feature", "name": f} for f in oldf or [] if f not in newf)  # ALTER TABLE DROP FEATURE
    return ops


def widening(meta) -> bool:
    """True when Delta's type widening is on in the table defined as ``meta``
    (``delta.enableTypeWidening``): only then does ALTER COLUMN ... TYPE widen a column in place.

    Args:
        meta (TableMeta): a table's definition.
    """
    return str(meta.configuration.get("delta.enableTypeWidening", "false")).lower() == "true"


def _names(schema: dict) -> list[dict]:
    """The schema's fields without column mapping ids (matched by name), recursively."""

    def strip(t):
        if isinstance(t, dict) and t.get("type") == "struct":
            return {
                **t,
                "fields": [
                    {
                        **f,
                        "type": strip(f["type"]),
                        "metadata": {k: v for k, v in (f.get("metadata") or {}).items() if k != CM_ID},
                    }
                    for f in t["fields"]
                ],
            }
        if isinstance(t, dict) and t.get("type") == "array":
            return {**t, "elementType": strip(t["elementType"])}
        if isinstance(t, dict) and t.get("type") == "map":
            return {**t, "keyType": strip(t["keyType"]), "valueType": strip(t["valueType"])}
        return t

    return strip({"type": "struct", "fields": schema.get("fields", [])})["fields"]


COLUMN_OPS = ("drop", "rename", "add", "move", "type", "nullable", "not_null", "comment", "default")


def field_at(schema: dict, path: list[str]) -> dict | None:
    """The field at ``path`` of ``schema``.

    Args:
        schema (dict): a table's Delta schema JSON.
        path (list[str]): field names; ``element``, ``key``, ``value`` step into arrays and maps.

    Returns:
        dict | None: the field (a made-up one for an array's element or a map's key or value);
        None when there is none.
    """
    fields = schema.get("fields", [])
    found = None
    t: Any = {"type": "struct", "fields": fields}
    for part in path:
        while isinstance(t, dict) and t.get("type") in ("array", "map") and part not in ("element", "key", "value"):
            t = t["elementType"] if t["type"] == "array" else t["valueType"]
        if isinstance(t, dict) and t.get("type") == "array" and part == "element":
            t = t["elementType"]
            found = {"name": part, "type": t, "nullable": True, "metadata": {}}
            continue
        if isinstance(t, dict) and t.get("type") == "map" and part in ("key", "value"):
            t = t["keyType" if part == "key" else "valueType"]
            found = {"name": part, "type": t, "nullable": True, "metadata": {}}
            continue
        if not (isinstance(t, dict) and t.get("type") == "struct"):
            return None
        found = next((f for f in t["fields"] if f["name"] == part), None)
        if found is None:
            return None
        t = found["type"]
    return found


def done(op: Op, meta) -> bool:  # noqa: C901, PLR0912 (one case per kind of ALTER op)
    """True when the table defined as ``meta`` already shows the effect of ``op`` (a replay
    resumed after a crash between two ALTER commits applies only what is missing).

    Args:
        op (Op): one operation of :func:`diff`.
        meta (TableMeta): the table's definition now.
    """
    kind, schema = op["op"], meta.schema
    conf = meta.configuration
    if kind == "set_properties":  # a table feature is in the protocol, not the configuration
        features = [k[len(FEATURE_PREFIX) :] for k in op["properties"] if k.startswith(FEATURE_PREFIX)]
        return all(conf.get(k) == v for k, v in op["properties"].items() if not k.startswith(FEATURE_PREFIX)) and (
            not features or (meta.features is not None and set(features) <= set(meta.features))
        )
    if kind == "drop_feature":
        return meta.features is not None and op["name"] not in meta.features
    if kind == "unset_properties":
        return not any(k in conf for k in op["keys"])
    if kind == "drop_constraint":
        return op["name"] not in constraints(conf)
    if kind == "add_constraint":
        return constraints(conf).get(op["name"]) == op["expr"]
    if kind == "cluster":
        return meta.clustering_columns == op["columns"]
    if kind == "table_comment":
        return (meta.description or None) == (op["text"] or None)
    here = field_at(schema, op["path"])
    if kind == "drop":
        return here is None
    if kind == "rename":
        return here is None and field_at(schema, op["path"][:-1] + [op["to"]]) is not None
    if kind == "add":
        return here is not None
    if here is None:
        return False
    md = here.get("metadata") or {}
    if kind == "move":
        parent = {"fields": schema["fields"]}
        if len(op["path"]) > 1:
            outer = field_at(schema, op["path"][:-1])
            assert outer is not None  # the field at op["path"] is there, so is its parent
            parent = outer["type"]
        names = [f["name"] for f in parent.get("fields", [])]
        i = names.index(op["path"][-1])
        return (i == 0) if not op.get("after") else (i > 0 and names[i - 1] == op["after"])
    if kind == "type":
        return here["type"] == op["type"]
    if kind in ("nullable", "not_null"):
        return bool(here.get("nullable", True)) == (kind == "nullable")
    if kind == "comment":
        return (md.get(COMMENT_KEY) or "") == (op["text"] or "")
    if kind == "default":
        return md.get(DEFAULT) == op.get("expr")
    return False


def _key(field: dict) -> Any:
    md = field.get("metadata") or {}
    return ("id", md[CM_ID]) if md.get(CM_ID) is not None else ("name", field["name"])


def _struct_ops(path: list[str], old: list[dict], new: list[dict]) -> list[Op]:
    ops: list[Op] = []
    oldk, newk = {_key(f): f for f in old}, {_key(f): f for f in new}
    for f in old:
        if _key(f) not in newk:
            ops.append({"op": "drop", "path": path + [f["name"]]})
    names = [f["name"] for f in old if _key(f) in newk]  # the order of the fields kept
    for f in old:
        g = newk.get(_key(f))
        if g is not None and g["name"] != f["name"]:
            ops.append({"op": "rename", "path": path + [f["name"]], "to": g["name"]})
            names[names.index(f["name"])] = g["name"]
    for f in old:
        g = newk.get(_key(f))
        if g is not None:
            ops.extend(_field_ops(path + [g["name"]], f, g))
    for i, g in enumerate(new):
        if _key(g) in oldk:
            continue
        after = new[i - 1]["name"] if i > 0 else None
        ops.append({"op": "add", "path": path + [g["name"]], "field": g, "after": after, "first": i == 0})
        names.insert(names.index(after) + 1 if after is not None else 0, g["name"])
    want = [g["name"] for g in new]
    for i, name in enumerate(want):  # moves (ALTER COLUMN ... FIRST / AFTER) for what is out of place
        if names[i] != name:
            names.remove(name)
            names.insert(i, name)
            ops.append({"op": "move", "path": path + [name], "after": want[i - 1] if i else None})
    return ops


def _field_ops(path: list[str], f: dict, g: dict) -> list[Op]:
    ops: list[Op] = []
    fm, gm = f.get("metadata") or {}, g.get("metadata") or {}
    for key in (GENERATION, IDENTITY_START, IDENTITY_STEP):
        if fm.get(key) != gm.get(key):
            raise NoAlter(f"{key} of {path}")
    ops.extend(_type_ops(path, f["type"], g["type"], fm, gm))
    if f.get("nullable", True) != g.get("nullable", True):
        ops.append({"op": "nullable" if g.get("nullable", True) else "not_null", "path": path})
    if fm.get(COMMENT_KEY) != gm.get(COMMENT_KEY):
        ops.append({"op": "comment", "path": path, "text": gm.get(COMMENT_KEY) or ""})
    if fm.get(DEFAULT) != gm.get(DEFAULT):
        ops.append({"op": "default", "path": path, "expr": gm.get(DEFAULT)})
    return ops


def _type_ops(path: list[str], a: Any, b: Any, am: dict | None = None, bm: dict | None = None) -> list[Op]:
    """Operations for a field's type change; raises NoAlter when it has no ALTER form."""
    kind_a = a.get("type") if isinstance(a, dict) else "primitive"
    kind_b = b.get("type") if isinstance(b, dict) else "primitive"
    if kind_a != kind_b:
        raise NoAlter(f"type of {path}")
    if kind_a == "struct":
        return _struct_ops(path, a.get("fields", []), b.get("fields", []))
    if kind_a == "array":
        return _type_ops(path + ["element"], a["elementType"], b["elementType"])
    if kind_a == "map":
        return _type_ops(path + ["key"], a["keyType"], b["keyType"]) + _type_ops(
            path + ["value"], a["valueType"], b["valueType"]
        )
    if (am or {}).get(CHAR_VARCHAR) != (bm or {}).get(CHAR_VARCHAR):
        raise NoAlter(f"CHAR/VARCHAR of {path}")
    if a != b:
        if not widens(a, b):
            raise NoAlter(f"type of {path}: {a} to {b}")
        return [{"op": "type", "path": path, "type": b}]
    return []


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
