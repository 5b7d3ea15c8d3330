"""Small helpers for integration tests (real Spark, real Delta, temporary dbfarm)."""

from __future__ import annotations


def rows(df) -> list[tuple]:
    """The rows of ``df`` sorted (NULLs last in each column)."""
    return sorted((tuple(r) for r in df.collect()), key=lambda row: tuple((v is None, v) for v in row))


def master_rows(spark, path: str, version: int | None = None) -> list[tuple]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return rows(reader.load(path))


def sql(spark, text: str) -> int:
    """Run one SQL statement on the master and capture it now; returns the last txn id published."""
    import wlc

    spark.sql(text)
    return wlc.flush()


def local(path: str) -> str:
    """``path`` without a ``file:`` scheme (a replica's ``path_of`` is a URI)."""
    return path[len("file:") :] if path.startswith("file:") else path


def table_definition(path: str, spark=None) -> dict:
    """A Delta table's definition as replication compares it (:func:`wlcore.tabledef.definition`,
    path or ``file:`` URI) at its newest version, from its log; with ``spark``, from its
    checkpoint through Delta Kernel where log clean-up removed the commits."""
    from wlcore.deltalog import list_versions, metadata_at
    from wlcore.storage import Storage

    path = local(path)
    store = Storage.of(path)
    version = list_versions(store, path)[-1]
    meta = metadata_at(store, path, version)
    if meta is None and spark is not None:
        from wlcore import kernel

        meta = kernel.metadata_at(spark, path, version)
    return meta.shape()


def replay_log(rep, table: str) -> list[dict]:
    """The replica table's commits made by replay (tagged ``wlr:``), oldest first, each as
    ``{"info": commitInfo, "txn": the txn action or None, "cdc": how many change-data files}``."""
    import glob
    import json
    import os

    out = []
    for name in sorted(glob.glob(os.path.join(rep.path, *table.split("."), "_delta_log", "*.json"))):
        actions = [json.loads(line) for line in open(name)]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if (info.get("userMetadata") or "").startswith("wlr:"):
            txn = next((a["txn"] for a in actions if "txn" in a), None)
            out.append({"info": info, "txn": txn, "cdc": sum(1 for a in actions if "cdc" in a)})
    return out
