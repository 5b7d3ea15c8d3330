"""Reading a Delta table's transaction log (``_delta_log/*.json``) without Spark.

Capture uses it to find new commits, their commit time, operation and whether they change
data or schema; replay uses it to see who wrote a replica table. Only the JSON commit
files are read (the Delta protocol's actions ``commitInfo``, ``metaData``, ``add``,
``remove``, ``cdc``, ``txn``); checkpoints are not needed because capture follows a table
from a known version forward.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .storage import Storage

LOG_DIR = "_delta_log"
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")

# Table properties that describe the replicated table; other ``delta.*`` properties are the
# storage engine's business (change feed, in-commit timestamps, checkpoints...) and differ
# between master and replica on purpose.
KEY_PROPERTY = "wlc.key"


def is_relevant_property(key: str) -> bool:
    return not key.startswith("delta.") or key.startswith("delta.constraints.")


@dataclass(frozen=True)
class TableMeta:
    """A table's shape as its Delta ``metaData`` action states it."""

    schema_json: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    table_id: str = ""

    @classmethod
    def from_action(cls, action: dict[str, Any]) -> "TableMeta":
        return cls(
            schema_json=action.get("schemaString") or '{"type":"struct","fields":[]}',
            partition_columns=tuple(action.get("partitionColumns") or ()),
            configuration=dict(action.get("configuration") or {}),
            table_id=action.get("id") or "",
        )

    @property
    def schema(self) -> dict:
        return json.loads(self.schema_json)

    @property
    def columns(self) -> list[str]:
        return [f["name"] for f in self.schema.get("fields", [])]

    @property
    def properties(self) -> dict[str, str]:
        """Replicated properties: user properties and CHECK constraints (``delta.constraints.*``)."""
        return {k: v for k, v in sorted(self.configuration.items()) if is_relevant_property(k)}

    @property
    def constraints(self) -> dict[str, str]:
        return {k[len("delta.constraints."):]: v for k, v in self.properties.items()
                if k.startswith("delta.constraints.")}

    @property
    def key_columns(self) -> list[str]:
        """Columns named by the ``wlc.key`` table property (comma separated), or ``[]``."""
        raw = self.configuration.get(KEY_PROPERTY, "")
        return [c.strip() for c in raw.split(",") if c.strip()]

    @property
    def change_feed(self) -> bool:
        return self.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    @property
    def in_commit_timestamps(self) -> bool:
        return self.configuration.get("delta.enableInCommitTimestamps", "false").lower() == "true"

    def shape(self) -> dict:
        """What replication carries: schema, partitioning, replicated properties."""
        return {"schema": self.schema, "partition_columns": list(self.partition_columns),
                "properties": self.properties}

    def to_json(self) -> dict:
        return {"schema": self.schema_json, "partition_columns": list(self.partition_columns),
                "configuration": self.configuration, "id": self.table_id}

    @classmethod
    def from_json(cls, data: dict) -> "TableMeta":
        return cls(data["schema"], tuple(data.get("partition_columns") or ()),
                   dict(data.get("configuration") or {}), data.get("id", ""))


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


def log_path(table_path: str) -> str:
    return Storage.join(table_path, LOG_DIR)


def is_delta_table(storage: Storage, table_path: str) -> bool:
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
    return Storage.join(log_path(table_path), f"{version:020d}.json")


def parse_commit(version: int, text: str, fallback_time: datetime | None = None) -> Commit:
    """Parse the newline-delimited JSON actions of one commit file."""
    info: dict[str, Any] = {}
    meta = None
    data_change = False
    txns: dict[str, int] = {}
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
    millis = info.get("inCommitTimestamp", info.get("timestamp"))
    if millis is not None:
        ts = datetime.fromtimestamp(int(millis) / 1000.0, tz=timezone.utc)
    else:
        ts = fallback_time or datetime.now(timezone.utc)
    return Commit(
        version=version, timestamp=ts, operation=str(info.get("operation", "UNKNOWN")),
        user=info.get("userName"), user_metadata=info.get("userMetadata"),
        engine=info.get("engineInfo"), metadata=meta, data_change=data_change, txns=txns,
        metrics=dict(info.get("operationMetrics") or {}),
    )


def read_commit(storage: Storage, table_path: str, version: int) -> Commit:
    """Read one commit. Raises FileNotFoundError when the commit file is gone."""
    return parse_commit(version, storage.read_text(commit_file(table_path, version)))


def metadata_at(storage: Storage, table_path: str, version: int) -> TableMeta | None:
    """The ``metaData`` in force at ``version``, read back through the JSON commits.

    Returns None when the commits holding it were cleaned up (only a checkpoint has it);
    callers then ask Spark.
    """
    for v in range(version, -1, -1):
        try:
            commit = read_commit(storage, table_path, v)
        except FileNotFoundError:
            return None
        if commit.metadata is not None:
            return commit.metadata
    return None
