"""Reading a Delta table's transaction log (``_delta_log/*.json``) without Spark.

Capture uses it to find new commits, their commit time, operation and whether they change
data or schema; replay uses it to see who wrote a replica table. Only the JSON commit
files are read (the Delta protocol's actions ``commitInfo``, ``metaData``, ``add``,
``remove``, ``cdc``, ``txn``, ``domainMetadata``); where log clean-up removed the commits
that hold a table's state, :mod:`wlcore.kernel` reads it from the checkpoints.

Commit times follow Delta's own rule for time travel (``DeltaHistoryManager``): the
In-Commit Timestamp where the commit has one, else the commit file's modification time,
made strictly increasing per table (a time not after the previous version's becomes that
time + 1 ms), so ``until=<instant>`` agrees with ``TIMESTAMP AS OF``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from .storage import Storage

LOG_DIR = "_delta_log"
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(\.\d{10}\.\d{10})?(\.[0-9a-fA-F-]{36})?\.(parquet|json)$")
CLUSTERING_DOMAIN = "delta.clustering"
_MS = timedelta(milliseconds=1)

KEY_PROPERTY = "wlc.key"  # the table property naming a replicated table's key columns


def is_relevant_property(key: str) -> bool:
    """True for a property replication carries (:func:`wlcore.tabledef.is_replicated_property`)."""
    from .tabledef import is_replicated_property

    return is_replicated_property(key)


@dataclass(frozen=True)
class TableMeta:
    """A table's shape as its Delta ``metaData`` action states it."""

    schema_json: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    table_id: str = ""
    # liquid clustering: the ``delta.clustering`` domain's columns as physical name paths
    # (column mapping), None for a table that never had clustering columns
    clustering: tuple[tuple[str, ...], ...] | None = None
    description: str | None = None  # the table comment

    @classmethod
    def from_action(cls, action: dict[str, Any], clustering: tuple[tuple[str, ...], ...] | None = None) -> "TableMeta":
        """The metadata of a Delta ``metaData`` action (``clustering``: the clustering domain's columns, read apart)."""
        return cls(
            schema_json=action.get("schemaString") or '{"type":"struct","fields":[]}',
            partition_columns=tuple(action.get("partitionColumns") or ()),
            configuration=dict(action.get("configuration") or {}),
            table_id=action.get("id") or "",
            clustering=clustering,
            description=action.get("description"),
        )

    def with_clustering(self, clustering: tuple[tuple[str, ...], ...] | None) -> "TableMeta":
        """The same metadata with the ``delta.clustering`` domain's columns ``clustering``."""
        return replace(self, clustering=clustering)

    @property
    def clustering_columns(self) -> list[list[str]]:
        """Clustering columns as logical name paths (``[["k"], ["s", "a"]]``), ``[]`` for none."""
        if not self.clustering:
            return []
        from .tabledef import logical_path

        return [logical_path(self.schema, list(p)) for p in self.clustering]

    @property
    def schema(self) -> dict:
        """The Delta schema as a dict (the parsed ``schemaString``)."""
        return json.loads(self.schema_json)

    @property
    def columns(self) -> list[str]:
        """The top-level column names, in order."""
        return [f["name"] for f in self.schema.get("fields", [])]

    @property
    def properties(self) -> dict[str, str]:
        """Replicated properties: user properties, CHECK constraints (``delta.constraints.*``)
        and the carried table features (:data:`wlcore.tabledef.CARRIED`)."""
        return {k: v for k, v in sorted(self.configuration.items()) if is_relevant_property(k)}

    @property
    def constraints(self) -> dict[str, str]:
        """The CHECK constraints: ``{name: expression}`` from the ``delta.constraints.*`` properties."""
        return {
            k[len("delta.constraints.") :]: v for k, v in self.properties.items() if k.startswith("delta.constraints.")
        }

    @property
    def key_columns(self) -> list[str]:
        """Columns named by the ``wlc.key`` table property (comma separated), or ``[]``."""
        raw = self.configuration.get(KEY_PROPERTY, "")
        return [c.strip() for c in raw.split(",") if c.strip()]

    @property
    def change_feed(self) -> bool:
        """True when the table's change data feed is on (``delta.enableChangeDataFeed``)."""
        return self.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    def shape(self) -> dict:
        """What replication carries (:func:`wlcore.tabledef.definition`): columns with types,
        nullability, comments, generation, identity and defaults; partitioning; clustering;
        replicated properties and constraints."""
        from .tabledef import definition

        return definition(self)

    def to_json(self) -> dict:
        """The metadata as capture cursors hold it (clustering and comment only when set)."""
        out: dict[str, Any] = {
            "schema": self.schema_json,
            "partition_columns": list(self.partition_columns),
            "configuration": self.configuration,
            "id": self.table_id,
        }
        if self.clustering is not None:
            out["clustering"] = [list(p) for p in self.clustering]
        if self.description is not None:
            out["description"] = self.description
        return out

    @classmethod
    def from_json(cls, data: dict) -> "TableMeta":
        """The metadata in ``data`` (:meth:`to_json`'s form).

        Raises:
            KeyError: ``schema`` is missing.
        """
        clustering = data.get("clustering")
        return cls(
            data["schema"],
            tuple(data.get("partition_columns") or ()),
            dict(data.get("configuration") or {}),
            data.get("id", ""),
            tuple(tuple(p) for p in clustering) if clustering is not None else None,
            data.get("description"),
        )


def clustering_of(configuration: str | None) -> tuple[tuple[str, ...], ...] | None:
    """The columns of a ``delta.clustering`` domain's configuration JSON (None: removed)."""
    if configuration is None:
        return None
    cols = json.loads(configuration or "{}").get("clusteringColumns") or []
    return tuple(tuple(p) for p in cols)


@dataclass
class Commit:
    """One Delta version of one table, as read from its JSON commit file."""

    version: int
    timestamp: datetime
    operation: str
    user: str | None
    user_metadata: str | None
    engine: str | None
    metadata: TableMeta | None
    data_change: bool
    txns: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)  # commitInfo.operationMetrics
    ict: bool = False  # ``timestamp`` is the commit's In-Commit Timestamp
    domains: dict[str, str | None] = field(default_factory=dict)  # domainMetadata: configuration, None: removed
    protocol: dict[str, Any] | None = None  # the protocol action, when the commit changes it
    params: dict[str, Any] = field(default_factory=dict)  # commitInfo.operationParameters

    @property
    def clustering_changed(self) -> bool:
        """True when the commit sets or removes the liquid clustering domain."""
        return CLUSTERING_DOMAIN in self.domains


def log_path(table_path: str) -> str:
    """The ``_delta_log`` folder of the table at ``table_path``."""
    return Storage.join(table_path, LOG_DIR)


def is_delta_table(storage: Storage, table_path: str) -> bool:
    """True when ``table_path`` holds a ``_delta_log`` folder."""
    return storage.isdir(log_path(table_path))


def list_versions(storage: Storage, table_path: str) -> list[int]:
    """Versions with a JSON commit file, ascending (``[]`` when the table or its log is gone)."""
    out = []
    for name in storage.listdir(log_path(table_path)):
        m = _COMMIT_FILE.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def commit_file(table_path: str, version: int) -> str:
    """The JSON commit file of ``version`` of the table at ``table_path`` (20-digit name)."""
    return Storage.join(log_path(table_path), f"{version:020d}.json")


def parse_commit(version: int, text: str, fallback_time: datetime | None = None) -> Commit:
    """Parse the newline-delimited JSON actions of one commit file."""
    info: dict[str, Any] = {}
    meta = None
    data_change = False
    txns: dict[str, int] = {}
    domains: dict[str, str | None] = {}
    protocol = None
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            info = action["commitInfo"] or {}
        elif "metaData" in action:
            meta = TableMeta.from_action(action["metaData"])
        elif "add" in action or "remove" in action:
            body = action.get("add") or action.get("remove") or {}
            if body.get("dataChange", True):
                data_change = True
        elif "cdc" in action:
            data_change = True
        elif "txn" in action:
            t = action["txn"]
            txns[t.get("appId", "")] = int(t.get("version", -1))
        elif "domainMetadata" in action:
            d = action["domainMetadata"] or {}
            domains[str(d.get("domain"))] = None if d.get("removed") else str(d.get("configuration") or "")
        elif "protocol" in action:
            protocol = action["protocol"] or {}
    if meta is not None and CLUSTERING_DOMAIN in domains:
        meta = meta.with_clustering(clustering_of(domains[CLUSTERING_DOMAIN]))
    ict = info.get("inCommitTimestamp") is not None
    millis = info.get("inCommitTimestamp", info.get("timestamp"))
    if millis is not None:
        ts = datetime.fromtimestamp(int(millis) / 1000.0, tz=timezone.utc)
    else:
        ts = fallback_time or datetime.now(timezone.utc)
    return Commit(
        version=version,
        timestamp=ts,
        operation=str(info.get("operation", "UNKNOWN")),
        user=info.get("userName"),
        user_metadata=info.get("userMetadata"),
        engine=info.get("engineInfo"),
        metadata=meta,
        data_change=data_change,
        txns=txns,
        metrics=dict(info.get("operationMetrics") or {}),
        ict=ict,
        domains=domains,
        protocol=protocol,
        params=dict(info.get("operationParameters") or {}),
    )


def read_commit(storage: Storage, table_path: str, version: int, file_time: bool = False) -> Commit:
    """Read one commit. Raises FileNotFoundError when the commit file is gone.

    ``file_time``: a commit without an In-Commit Timestamp takes its commit file's
    modification time (milliseconds), as Delta's time travel does, instead of
    ``commitInfo.timestamp`` (the writer's clock); see :func:`monotonic`.
    """
    path = commit_file(table_path, version)
    commit = parse_commit(version, storage.read_text(path))
    if file_time and not commit.ict:
        millis = storage.mtime_ms(path)
        if millis is not None:
            commit.timestamp = datetime.fromtimestamp(millis / 1000.0, tz=timezone.utc)
    return commit


def monotonic(commit: Commit, previous: datetime | None) -> None:
    """Delta's rule (``monotonizeCommitTimestamps``): a commit time not after the previous
    version's becomes the previous one + 1 ms. In-Commit Timestamps are increasing already."""
    if previous is not None and commit.timestamp <= previous:
        commit.timestamp = previous + _MS


def meta_after(meta: TableMeta | None, commit: Commit) -> TableMeta | None:
    """The metadata in force after ``commit`` given ``meta`` before it: a ``metaData``
    action replaces it (keeping the clustering columns unless the commit sets them too), a
    ``delta.clustering`` domain alone changes the clustering columns."""
    new = commit.metadata
    if commit.clustering_changed:
        base = new or meta
        if base is None:
            return None
        return base.with_clustering(clustering_of(commit.domains[CLUSTERING_DOMAIN]))
    if new is not None and meta is not None:
        return new.with_clustering(meta.clustering)
    return new or meta


def metadata_at(storage: Storage, table_path: str, version: int) -> TableMeta | None:
    """The ``metaData`` in force at ``version`` (with its clustering columns), read back
    through the JSON commits.

    Returns None when the commits holding it were cleaned up (only a checkpoint has it);
    callers then ask Delta Kernel (:func:`wlcore.kernel.metadata_at`).
    """
    meta: TableMeta | None = None
    clustering: tuple[tuple[str, ...], ...] | None | Literal[False] = False  # False: not found yet
    for v in range(version, -1, -1):
        try:
            commit = read_commit(storage, table_path, v)
        except FileNotFoundError:
            return None
        if clustering is False and CLUSTERING_DOMAIN in commit.domains:
            clustering = clustering_of(commit.domains[CLUSTERING_DOMAIN])
        if meta is None and commit.metadata is not None:
            meta = commit.metadata
        if meta is not None and clustering is not False:
            break
    if meta is None:
        return None
    return meta.with_clustering(None if clustering is False else clustering)


def checkpoint_versions(storage: Storage, table_path: str) -> list[int]:
    """Versions with a checkpoint (classic, multi-part or v2), ascending."""
    out = set()
    for name in storage.listdir(log_path(table_path)):
        m = _CHECKPOINT_FILE.match(name)
        if m:
            out.add(int(m.group(1)))
    return sorted(out)


def readable_from(storage: Storage, table_path: str, versions: list[int] | None = None) -> int | None:
    """The oldest version whose state Delta can still rebuild: the newest checkpoint from
    which every later commit file is there (version 0 when the log is whole); None when
    no version can be rebuilt. ``versions``: the commit files' versions (listed when None)."""
    versions = list_versions(storage, table_path) if versions is None else versions
    if not versions:
        return None
    if versions[0] == 0 and versions == list(range(versions[-1] + 1)):
        return 0
    have = set(versions)
    best = None
    for cp in checkpoint_versions(storage, table_path):
        if all(v in have for v in range(cp + 1, versions[-1] + 1)):
            best = cp if best is None else min(best, cp)
    return best
