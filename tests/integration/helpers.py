"""Small helpers for integration tests (real Spark, real Delta, temporary dbfarm)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading

from ..waiting import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    path or ``file:`` URI) at its newest version, from its log (:func:`wlcore.deltalog.metadata_at`);
    with ``spark``, where log clean-up removed the first commits, Delta Kernel reads it too from
    the checkpoint, an independent reader that must agree."""
    from wlcore.deltalog import list_versions, metadata_at
    from wlcore.storage import Storage

    path = local(path)
    store = Storage.of(path)
    versions = list_versions(store, path)
    meta = metadata_at(store, path, versions[-1])
    assert meta is not None, f"{path} at version {versions[-1]}: no definition read"
    if spark is not None and versions[0] > 0:
        kernel = kernel_metadata_at(spark, path, versions[-1])
        assert meta.shape() == kernel.shape(), (
            f"{path}: the checkpoint read {meta.shape()}, Delta Kernel {kernel.shape()}"
        )
    return meta.shape()


def kernel_metadata_at(spark, uri: str, version: int):
    """The metadata (schema, partitioning, configuration, id, comment, clustering columns, table features) of
    the Delta table at ``uri`` as of ``version``, read by Delta Kernel from the newest
    checkpoint at or before it and the commits after.

    Args:
        spark (SparkSession): the session whose JVM runs Delta Kernel (and whose Hadoop
            configuration reaches the store).
        uri (str): the table's URI as Spark reads it.
        version (int): the Delta version.

    Returns:
        TableMeta: the metadata at that version.

    Raises:
        Exception: Kernel's, when the version cannot be rebuilt (its commits and checkpoint
            are gone).
    """
    from wlcore.deltalog import TableMeta, clustering_of, protocol_features

    jvm = spark.sparkContext._jvm
    engine = jvm.io.delta.kernel.defaults.engine.DefaultEngine.create(spark.sparkContext._jsc.hadoopConfiguration())
    snapshot = jvm.io.delta.kernel.Table.forPath(engine, uri).getSnapshotAsOfVersion(engine, int(version))
    md = snapshot.getMetadata()
    domain = snapshot.getDomainMetadata("delta.clustering")
    description = md.getDescription()
    protocol = snapshot.getProtocol()
    features = protocol_features(
        {
            "minReaderVersion": protocol.getMinReaderVersion(),
            "minWriterVersion": protocol.getMinWriterVersion(),
            "readerFeatures": [str(f) for f in protocol.getReaderFeatures()],
            "writerFeatures": [str(f) for f in protocol.getWriterFeatures()],
        }
    )
    return TableMeta(
        schema_json=str(md.getSchemaString()),
        partition_columns=tuple(str(c) for c in snapshot.getPartitionColumnNames()),
        configuration={str(k): str(v) for k, v in dict(md.getConfiguration()).items()},
        table_id=str(md.getId()),
        clustering=clustering_of(str(domain.get())) if domain.isPresent() else None,
        description=str(description.get()) if description.isPresent() else None,
        features=features,
    )


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


class Service:
    """A command run as a service: its output lines read by a thread, stopped by SIGTERM to its pid."""

    def __init__(self, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def port(self) -> int:
        """The port the service says it serves metrics on."""
        found: list[int] = []

        def said() -> bool:
            assert self.proc.poll() is None, "".join(self.seen)[-3000:]
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                return False
            self.seen.append(line)
            hit = re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", line)
            if hit:
                found.append(int(hit.group(1)))
            return bool(hit)

        wait_until(said, 180, lambda: "the metrics line; output:\n" + "".join(self.seen)[-3000:], interval=0)
        return found[0]

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)
        self.reader.join(timeout=30)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)
