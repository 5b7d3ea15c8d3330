"""The snapshot a master's logs start from: each table copied at a recorded Delta version.

``<db>/wlc_snapshot/<schema>/<table>`` are ordinary Delta tables written by Spark from the
master's time travel (so they survive a later VACUUM of the master), with the master's
schema, partitioning, replicated properties and CHECK constraints; ``snapshot.json``,
written last, lists each table's master version. A replica starts by copying these folders.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone

from .batch import utc_iso
from .capture import Cursor, delta_ref
from .names import quote_ident, split_name
from .deltalog import TableMeta
from .storage import Storage

SNAPSHOT_MANIFEST = "snapshot.json"


def create_table_sql(uri: str, meta: TableMeta) -> list[str]:
    """SQL statements that create an empty Delta table at ``uri`` shaped as ``meta``.

    Column types, nullability, partitioning, replicated properties (``wlc.key``...) and
    CHECK constraints; identifiers are quoted.
    """
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(meta.schema)
    cols = ", ".join(
        f"{quote_ident(f.name)} {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
        for f in schema.fields)
    sql = f"CREATE TABLE IF NOT EXISTS {delta_ref(uri)} ({cols}) USING delta"
    if meta.partition_columns:
        sql += " PARTITIONED BY (" + ", ".join(quote_ident(c) for c in meta.partition_columns) + ")"
    props = {k: v for k, v in meta.properties.items() if not k.startswith("delta.constraints.")}
    if props:
        sql += " TBLPROPERTIES (" + ", ".join(f"{_lit(k)} = {_lit(v)}" for k, v in props.items()) + ")"
    stmts = [sql]
    for name, expr in meta.constraints.items():
        stmts.append(f"ALTER TABLE {delta_ref(uri)} ADD CONSTRAINT {quote_ident(name)} CHECK ({expr})")
    return stmts


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def take(spark, storage: Storage, db_path: str, snap_path: str, tables: dict[str, str],
         versions: dict[str, int], metas: dict[str, TableMeta], dbid: str) -> dict[str, Cursor]:
    """Copy every table at ``versions[name]`` into ``snap_path`` and write ``snapshot.json`` last.

    Returns the capture cursors the logs start from. Cost: one Spark read and write of each
    table (O(data)).
    """
    storage.rm(snap_path)
    storage.makedirs(snap_path)
    cursors = {}
    for name, path in sorted(tables.items()):
        schema, table = split_name(name)
        meta = metas[name]
        dst = storage.uri(Storage.join(snap_path, schema, table))
        for stmt in create_table_sql(dst, meta):
            spark.sql(stmt)
        df = spark.read.format("delta").option("versionAsOf", versions[name]).load(storage.uri(path))
        df.select(*[quote_ident(c) for c in meta.columns]).write.format("delta").mode("append").save(dst)
        cursors[name] = Cursor(versions[name], meta)
    body = {"dbid": dbid, "created": utc_iso(datetime.now(timezone.utc)),
            "tables": {k: v.to_json() for k, v in cursors.items()}}
    storage.write_atomic(Storage.join(snap_path, SNAPSHOT_MANIFEST), json.dumps(body, indent=1, sort_keys=True))
    return cursors


def read(storage: Storage, snap_path: str) -> dict:
    """The snapshot manifest (``{"dbid", "created", "tables": {name: cursor json}}``)."""
    return json.loads(storage.read_text(Storage.join(snap_path, SNAPSHOT_MANIFEST)))
