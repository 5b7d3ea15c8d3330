"""Reading a Delta table's transaction log (``_delta_log/*.json``) and the table's metadata.

A table's shape is :class:`TableMeta`, as its Delta ``metaData`` and ``protocol`` actions state
it (pure, no I/O): schema, partitioning, liquid clustering columns, table properties and
comment, and the table features its protocol lists, as capture cursors, batch records and
snapshots carry it (:meth:`TableMeta.to_json`).

The log is read without Spark: capture uses it to find new commits, their commit time,
operation and whether they change data or schema; replay uses it to see who wrote a replica
table. Only the JSON commit files are read (the Delta protocol's actions ``commitInfo``,
``metaData``, ``add``, ``remove``, ``cdc``, ``txn``, ``domainMetadata``); where log clean-up
removed the commits that hold a table's state and only a checkpoint (classic, multi-part or
v2) records it, :func:`checkpoint_state` reads that checkpoint with pyarrow. A table's
definition at a version is read one way, :func:`metadata_at`.

Commit times follow Delta's own rule for time travel (``DeltaHistoryManager``): the
In-Commit Timestamp where the commit has one, else the commit file's modification time,
made strictly increasing per table (a time not after the previous version's becomes that
time + 1 ms), so ``until=<instant>`` agrees with ``TIMESTAMP AS OF``.

A master database's replicated tables are found on the shared filesystem by their logs:
:func:`discover_tables` lists them (their names as :mod:`wlcore.names` carries them),
:func:`table_path` is a table's folder and :func:`delta_ref` its SQL reference by path.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Iterator, Literal

from .names import qualified, quote_ident, split_name, uncarried_reason
from .storage import Storage
from .utc import utcnow

# Delta's legacy protocol versions and the table features each one implies (Delta's protocol:
# "Table Features"; a protocol with writer version 7 or reader version 3 lists them instead)
_LEGACY_WRITER = (
    (2, ("appendOnly", "invariants")),
    (3, ("checkConstraints",)),
    (4, ("changeDataFeed", "generatedColumns")),
    (5, ("columnMapping",)),
    (6, ("identityColumns",)),
)
KEY_PROPERTY = "wlc.key"  # the table property naming a replicated table's key columns
# Delta's primitive types (and decimal(p,s)): columns delta-rs reads and writes as Spark does
FLAT_TYPES = frozenset(
    {
        "boolean",
        "byte",
        "short",
        "integer",
        "long",
        "float",
        "double",
        "string",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
    }
)


def is_relevant_property(key: str) -> bool:
    """True for a property replication carries (:func:`wlcore.tabledef.is_replicated_property`).

    Args:
        key (str): a table property's name (``delta.enableChangeDataFeed``, ``wlc.key``).

    Returns:
        bool: replicas get the property.
    """
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
    # the table features the protocol lists (legacy versions' implied ones too), sorted; None: not
    # known (a record of an older capture, a log whose protocol only a checkpoint holds)
    features: tuple[str, ...] | None = None

    @classmethod
    def from_action(cls, action: dict[str, Any], clustering: tuple[tuple[str, ...], ...] | None = None) -> "TableMeta":
        """The metadata of a Delta ``metaData`` action (Delta's transaction log protocol).

        Args:
            action (dict[str, Any]): the action's body (``schemaString``, ``partitionColumns``,
                ``configuration``, ``id``, ``description``).
            clustering (tuple[tuple[str, ...], ...] | None): the ``delta.clustering`` domain's
                columns, read apart (physical name paths; None: none).

        Returns:
            TableMeta: the metadata.
        """
        return cls(
            schema_json=action.get("schemaString") or '{"type":"struct","fields":[]}',
            partition_columns=tuple(action.get("partitionColumns") or ()),
            configuration=dict(action.get("configuration") or {}),
            table_id=action.get("id") or "",
            clustering=clustering,
            description=action.get("description"),
        )

    def with_clustering(self, clustering: tuple[tuple[str, ...], ...] | None) -> "TableMeta":
        """The same metadata with other clustering columns.

        Args:
            clustering (tuple[tuple[str, ...], ...] | None): the ``delta.clustering`` domain's columns
                (physical name paths; None: none).

        Returns:
            TableMeta: a new object; this one is unchanged.
        """
        return replace(self, clustering=clustering)

    def with_features(self, features: tuple[str, ...] | None) -> "TableMeta":
        """The same metadata with other table features (:func:`protocol_features`).

        Args:
            features (tuple[str, ...] | None): the features, sorted (None: not known).

        Returns:
            TableMeta: a new object; this one is unchanged.
        """
        return replace(self, features=features)

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

    @property
    def column_mapping(self) -> bool:
        """True when the table maps columns to physical names or ids (``delta.columnMapping.mode``
        ``name`` or ``id``, any case)."""
        return self.configuration.get("delta.columnMapping.mode", "none").lower() != "none"

    @property
    def deletion_vectors(self) -> bool:
        """True when the table marks deleted rows in deletion vectors (``delta.enableDeletionVectors``)."""
        return self.configuration.get("delta.enableDeletionVectors", "false").lower() == "true"

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
        if self.features is not None:
            out["features"] = list(self.features)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "TableMeta":
        """The metadata in ``data`` (:meth:`to_json`'s form).

        Args:
            data (dict): ``schema`` (the schema JSON text), ``partition_columns``,
                ``configuration``, ``id``, and ``clustering``, ``description``, ``features`` when set.

        Returns:
            TableMeta: the metadata.

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
            tuple(str(f) for f in data["features"]) if data.get("features") is not None else None,
        )


def protocol_features(protocol: dict[str, Any]) -> tuple[str, ...]:
    """The table features a Delta ``protocol`` action gives a table: ``readerFeatures`` and
    ``writerFeatures``, and those its legacy versions imply (writer 2: ``appendOnly``,
    ``invariants``; 3: ``checkConstraints``; 4: ``changeDataFeed``, ``generatedColumns``; 5:
    ``columnMapping``; 6: ``identityColumns``; reader 2: ``columnMapping``), as Delta's protocol
    defines them.

    Args:
        protocol (dict[str, Any]): the action's body (``minReaderVersion``, ``minWriterVersion``,
            ``readerFeatures``, ``writerFeatures``).

    Returns:
        tuple[str, ...]: the feature names, sorted.
    """
    out = set(protocol.get("readerFeatures") or ()) | set(protocol.get("writerFeatures") or ())
    writer = int(protocol.get("minWriterVersion") or 1)
    reader = int(protocol.get("minReaderVersion") or 1)
    if writer < 7:
        for version, implied in _LEGACY_WRITER:
            if writer >= version:
                out.update(implied)
    if reader == 2:
        out.add("columnMapping")
    return tuple(sorted(out))


def clustering_of(configuration: str | None) -> tuple[tuple[str, ...], ...] | None:
    """The columns of a ``delta.clustering`` domain's configuration JSON.

    Args:
        configuration (str | None): the domain's ``configuration`` text (None: the domain was removed).

    Returns:
        tuple[tuple[str, ...], ...] | None: ``clusteringColumns`` as physical name paths; None when removed.
    """
    if configuration is None:
        return None
    cols = json.loads(configuration or "{}").get("clusteringColumns") or []
    return tuple(tuple(p) for p in cols)


def delta_rs_refusal(
    meta: TableMeta,
    protocol: Any,
    reader_features: frozenset[str],
    writer_features: frozenset[str],
    writer_versions: frozenset[int],
) -> str | None:
    """Why delta-rs may not handle a table as Spark does, in what capture's reads and replay's
    writes both need: reader version 1 or 3 with only ``reader_features``, a writer version in
    ``writer_versions`` with only ``writer_features``, no partitioning, no column mapping, and
    flat columns (:data:`FLAT_TYPES` and decimals). Each side adds its own checks.

    Args:
        meta (TableMeta): the table's metadata.
        protocol: delta-rs's ``ProtocolVersions`` of the table at that version.
        reader_features (frozenset[str]): the reader features allowed.
        writer_features (frozenset[str]): the writer features allowed.
        writer_versions (frozenset[int]): the minimum writer versions allowed.

    Returns:
        str | None: the reason, or None.
    """
    if protocol.min_reader_version == 2 or protocol.min_reader_version > 3:
        return f"reader version {protocol.min_reader_version}"
    extra = set(protocol.reader_features or ()) - reader_features
    if extra:
        return f"reader features {sorted(extra)}"
    if protocol.min_writer_version not in writer_versions:
        return f"writer version {protocol.min_writer_version}"
    extra = set(protocol.writer_features or ()) - writer_features
    if extra:
        return f"writer features {sorted(extra)}"
    if meta.partition_columns:
        return "partitioned"
    if meta.configuration.get("delta.columnMapping.mode", "none") != "none":
        return "column mapping"
    for f in meta.schema.get("fields", []):
        kind = f.get("type")
        if not isinstance(kind, str) or not (kind in FLAT_TYPES or kind.startswith("decimal(")):
            return f"column {f.get('name')} of a nested type"
    return None


LOG_DIR = "_delta_log"
_COMMIT_FILE = re.compile(r"^([0-9]{20})\.json$")  # ASCII digits: the names Delta writes, in their sort order
_CHECKPOINT_FILE = re.compile(
    r"^([0-9]{20})\.checkpoint(\.[0-9]{10}\.[0-9]{10})?(\.[0-9a-fA-F-]{36})?\.(parquet|json)$"
)
CLUSTERING_DOMAIN = "delta.clustering"
_MS = timedelta(milliseconds=1)


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
    digest: str = ""  # :func:`commit_digest` of the commit file's text

    @property
    def clustering_changed(self) -> bool:
        """True when the commit sets or removes the liquid clustering domain."""
        return CLUSTERING_DOMAIN in self.domains


def log_path(table_path: str) -> str:
    """The ``_delta_log`` folder of the table at ``table_path``.

    Args:
        table_path (str): the table's folder (path or URL).

    Returns:
        str: ``<table_path>/_delta_log``.
    """
    return Storage.join(table_path, LOG_DIR)


def is_delta_table(storage: Storage, table_path: str) -> bool:
    """True when ``table_path`` holds a ``_delta_log`` folder.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.

    Returns:
        bool: the log folder is there.
    """
    return storage.isdir(log_path(table_path))


def list_versions(storage: Storage, table_path: str) -> list[int]:
    """Versions with a JSON commit file (``_delta_log/<20 digits>.json``), ascending.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.

    Returns:
        list[int]: the versions; ``[]`` when the table or its log is gone.
    """
    return _commit_versions(storage.listdir(log_path(table_path)))


def versions_after(storage: Storage, table_path: str, version: int) -> list[int]:
    """Versions after ``version`` with a JSON commit file, ascending, listed from it
    (:meth:`wlcore.storage.Storage.listdir_after`: on S3 one request for what came since, however
    long the log).

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        version (int): the last version read.

    Returns:
        list[int]: the versions after it; ``[]`` when there are none or the log is gone.
    """
    return _commit_versions(storage.listdir_after(log_path(table_path), f"{version:020d}.json"))


def latest_version(storage: Storage, table_path: str) -> int | None:
    """The newest version with a JSON commit file, found as Delta finds it: listed from the
    checkpoint ``_delta_log/_last_checkpoint`` names (on S3 one request for the commits since,
    however long the log), the whole log listed only when that file is missing, unreadable or
    names a version no commit file at or after it stands for (stores other than S3: listed
    whole). The answer is always the whole listing's newest.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.

    Returns:
        int | None: the version; None when the table or its log is gone, or has no commit.
    """
    return next(versions_newest_first(storage, table_path), None)


def versions_newest_first(storage: Storage, table_path: str) -> Iterator[int]:
    """The versions with a JSON commit file, newest first, as :func:`list_versions` has them:
    first those from the checkpoint ``_delta_log/_last_checkpoint`` names on (one listing from
    it), then, only for a walk that goes on past them, the older ones (the whole log listed).
    A walk back to the newest replay tag reads a long log in a bucket in one listing. Stores
    other than S3 are listed whole at once: they list no faster from a name. A pointer that
    cannot be read or is no version (any error reading it, as Delta takes it) is no pointer.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.

    Yields:
        int: the versions, descending; none when the table or its log is gone.
    """
    log = log_path(table_path)
    start = 0
    if storage.s3:  # S3 lists from a name (StartAfter)
        try:
            pointer = json.loads(storage.read_text(Storage.join(log, "_last_checkpoint")))
        except (OSError, ValueError, RecursionError):  # missing, refused, cut short, not JSON
            pointer = None
        found = pointer.get("version") if isinstance(pointer, dict) else None
        start = found if type(found) is int else 0
    since = _commit_versions(storage.listdir_after(log, f"{start - 1:020d}.json")) if start > 0 else []
    yield from reversed(since)  # every commit file at or after the checkpoint
    older = list_versions(storage, table_path)
    yield from reversed([v for v in older if v < since[0]] if since else older)


def _commit_versions(names: Iterable[str]) -> list[int]:
    """The versions of the JSON commit files among a log folder's base names, ascending."""
    return sorted(int(m.group(1)) for m in map(_COMMIT_FILE.match, names) if m)


def commit_file(table_path: str, version: int) -> str:
    """The JSON commit file of ``version`` of the table at ``table_path`` (20-digit name).

    Args:
        table_path (str): the table's folder.
        version (int): the Delta version.

    Returns:
        str: ``<table_path>/_delta_log/<version:020d>.json``.
    """
    return Storage.join(log_path(table_path), f"{version:020d}.json")


_CHECKSUM = re.compile(r"^([0-9]{20})\.crc$")


def _read_checksum(storage: Storage, folder: str, version: int) -> dict | None:
    """Delta's version checksum of ``version`` in the log ``folder`` as JSON (None: missing,
    unreadable or not an object)."""
    try:
        crc = json.loads(storage.read_text(Storage.join(folder, f"{version:020d}.crc")))
    except (OSError, ValueError):
        return None
    return crc if isinstance(crc, dict) else None


def checksum_size(storage: Storage, table_path: str, version: int) -> tuple[int, int] | None:
    """The size and file count of ``version`` from Delta's version checksum file
    (``_delta_log/<version:020d>.crc``, written with each commit by Delta Spark), read without
    Spark: Delta's ``DESCRIBE DETAIL`` rebuilds the table's state for them, several Spark jobs.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        version (int): the Delta version.

    Returns:
        tuple[int, int] | None: ``(tableSizeBytes, numFiles)``; None when the version has no
        readable checksum (a writer that writes none, or a commit whose checksum was not written
        before its writer stopped).
    """
    crc = _read_checksum(storage, log_path(table_path), version)
    if crc is None:  # missing, unreadable or cut short
        return None
    try:
        return int(crc["tableSizeBytes"]), int(crc["numFiles"])
    except (ValueError, KeyError, TypeError):  # not Delta's
        return None


def write_checksum(
    storage: Storage,
    table_path: str,
    before: int,
    version: int,
    size: int,
    files: int,
    state: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> bool:
    """Write Delta's version checksum (``_delta_log/<version:020d>.crc``) of a commit made by a
    writer that writes none (delta-rs), derived as Delta Spark derives one from the checksum of the
    version before (its incremental commit): Delta Spark reads a table's protocol and metadata from
    the checksum of the version it loads, where without one it runs a Spark job over the log (about
    0.1 s, for every view moved and every Spark reader of that version).

    The protocol and metadata are those of the checksum of ``before`` (else of the newest version
    before it that has one), replaced by any the commits since carry; the size and file count are
    the caller's (read from the writer's own state of ``version``). The optional parts Delta
    derives from a table's state are left out (set transactions, domain metadata, the file size
    histogram): Delta reads those from the log. Nothing is written when no checksum is found, or a
    commit since it is gone.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        before (int): the version before the writer's commits.
        version (int): the version just committed (> ``before``).
        size (int): the table's size in bytes at ``version`` (its data files).
        files (int): the number of data files at ``version``.
        state (tuple[dict, dict] | None): the ``protocol`` and ``metaData`` action bodies in force
            at ``version``, where the writer holds them (then nothing else is read); None: derived.

    Returns:
        bool: True when the checksum was written.

    Raises:
        OSError: the checksum file could not be written.
    """
    import uuid

    folder = log_path(table_path)
    if state is not None:
        actions = {"protocol": state[0], "metaData": state[1]}
    else:
        found = _derived_state(storage, table_path, before, version)
        if found is None:
            return False
        actions = found
    crc = {
        "txnId": str(uuid.uuid4()),
        "tableSizeBytes": int(size),
        "numFiles": int(files),
        "numMetadata": 1,
        "numProtocol": 1,
        "metadata": actions["metaData"],
        "protocol": actions["protocol"],
    }
    # not synced: delta-rs does not sync the commit it describes, and a checksum a crash cut
    # short is read as none (here and by Delta Spark, which then reads the log)
    storage.write_atomic(
        Storage.join(folder, f"{version:020d}.crc"), json.dumps(crc, separators=(",", ":")), durable=False
    )
    return True


def _derived_state(storage: Storage, table_path: str, before: int, version: int) -> dict[str, Any] | None:
    """The ``protocol`` and ``metaData`` in force at ``version`` for :func:`write_checksum`: those of
    the checksum of ``before`` (else of the newest version before it that has one), replaced by any
    the commits since carry; None when no checksum is found, or a commit since is gone."""
    folder = log_path(table_path)

    def usable(v: int) -> dict | None:  # protocol and metadata to derive from
        crc = _read_checksum(storage, folder, v)
        return crc if crc is not None and "metadata" in crc and "protocol" in crc else None

    base, prior = before, usable(before)
    if prior is None:  # commits since made by a writer that writes none: the newest checksum before them
        try:
            names = storage.listdir(folder)
        except OSError:
            return None
        older = sorted((int(m.group(1)) for m in map(_CHECKSUM.match, names) if m), reverse=True)
        base = next((v for v in older if v < before), -1)
        prior = usable(base) if base >= 0 else None
    if prior is None:
        return None
    try:
        actions = {"metaData": prior["metadata"], "protocol": prior["protocol"]}
        for v in range(base + 1, version + 1):
            for line in storage.read_text(commit_file(table_path, v)).splitlines():
                action = json.loads(line) if line.strip() else {}
                for kind in ("metaData", "protocol"):
                    if kind in action:
                        actions[kind] = action[kind]
    except (OSError, ValueError):  # a commit since gone or cut short: none written
        return None
    return actions


def commit_digest(text: str) -> str:
    """A digest of a commit file's text: two logs that hold the same text at a version hold the
    same commit (``commitInfo`` carries the writer's clock, and Spark's a transaction id), so a
    restarted capture tells the log it read from a table made again in the same folder by it.

    Args:
        text (str): the commit file's contents.

    Returns:
        str: 32 hex digits (BLAKE2b, 16 bytes).
    """
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def parse_commit(version: int, text: str, fallback_time: datetime | None = None) -> Commit:
    """Parse the newline-delimited JSON actions of one commit file (Delta's transaction log
    protocol: ``commitInfo``, ``metaData``, ``add``/``remove``/``cdc``, ``txn``,
    ``domainMetadata``, ``protocol``).

    Args:
        version (int): the commit's Delta version.
        text (str): the commit file's contents.
        fallback_time (datetime | None): the commit time (UTC) when the file has neither an
            In-Commit Timestamp nor ``commitInfo.timestamp``; None: now.

    Returns:
        Commit: its time (the In-Commit Timestamp, else ``commitInfo.timestamp``, milliseconds,
        as UTC), operation, metadata (with its clustering columns), whether data changed, the
        application transactions, domains and protocol.

    Raises:
        json.JSONDecodeError: a line is not JSON.
    """
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
        ts = fallback_time or utcnow()
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
        digest=commit_digest(text),
    )


def read_commit(storage: Storage, table_path: str, version: int, file_time: bool = False) -> Commit:
    """Read one commit.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        version (int): the Delta version.
        file_time (bool): a commit without an In-Commit Timestamp takes its commit file's
            modification time (milliseconds), as Delta's time travel does, instead of
            ``commitInfo.timestamp`` (the writer's clock); see :func:`monotonic`.

    Returns:
        Commit: the parsed commit (:func:`parse_commit`).

    Raises:
        FileNotFoundError: the commit file is gone.
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
    version's becomes the previous one + 1 ms. In-Commit Timestamps are increasing already.

    Args:
        commit (Commit): the commit, its ``timestamp`` changed in place.
        previous (datetime | None): the previous version's commit time (UTC); None: none.
    """
    if previous is not None and commit.timestamp <= previous:
        commit.timestamp = previous + _MS


def meta_after(meta: TableMeta | None, commit: Commit) -> TableMeta | None:
    """The metadata in force after ``commit``: a ``metaData`` action replaces it (keeping the
    clustering columns and table features unless the commit sets them too), a
    ``delta.clustering`` domain alone changes the clustering columns, a ``protocol`` action the
    table features.

    Args:
        meta (TableMeta | None): the metadata in force before the commit (None: not known).
        commit (Commit): the commit.

    Returns:
        TableMeta | None: the metadata after it; None when neither gives one.
    """
    new = commit.metadata
    base = new or meta
    if base is None:
        return None
    if commit.clustering_changed:
        base = base.with_clustering(clustering_of(commit.domains[CLUSTERING_DOMAIN]))
    elif new is not None and meta is not None:
        base = base.with_clustering(meta.clustering)
    if commit.protocol is not None:
        return base.with_features(protocol_features(commit.protocol))
    if new is not None and meta is not None:
        return base.with_features(meta.features)
    return base


def metadata_at(storage: Storage, table_path: str, version: int) -> TableMeta | None:
    """The ``metaData`` in force at ``version`` (with its clustering columns and the table
    features of its ``protocol``): the one way a table's definition is read, as Delta rebuilds
    a snapshot: the JSON commits back from ``version``, and where log clean-up removed the older
    ones, the newest checkpoint (classic, multi-part or v2) they leave (:func:`checkpoint_state`).

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        version (int): the Delta version.

    Returns:
        TableMeta | None: the metadata; None when neither the commits nor a checkpoint hold it
        (the version cannot be rebuilt).
    """
    meta: TableMeta | None = None
    clustering: tuple[tuple[str, ...], ...] | None | Literal[False] = False  # False: not found yet
    features: tuple[str, ...] | None = None
    for v in range(version, -1, -1):
        try:
            commit = read_commit(storage, table_path, v)
        except FileNotFoundError:  # cleaned up: the newest checkpoint from v on holds the rest
            found = [cp for cp in checkpoint_versions(storage, table_path) if v <= cp <= version]
            if not found:
                return None
            cp_meta, protocol, domains = checkpoint_state(storage, table_path, found[-1])
            meta = meta or cp_meta
            if clustering is False:
                clustering = clustering_of(domains[CLUSTERING_DOMAIN]) if domains.get(CLUSTERING_DOMAIN) else None
            if features is None and protocol is not None:
                features = protocol_features(protocol)
            break
        if clustering is False and CLUSTERING_DOMAIN in commit.domains:
            clustering = clustering_of(commit.domains[CLUSTERING_DOMAIN])
        if meta is None and commit.metadata is not None:
            meta = commit.metadata
        if features is None and commit.protocol is not None:
            features = protocol_features(commit.protocol)
        if meta is not None and clustering is not False and features is not None:
            break
    if meta is None:
        return None
    return meta.with_clustering(None if clustering is False else clustering).with_features(features)


def checkpoint_state(
    storage: Storage, table_path: str, version: int
) -> tuple[TableMeta | None, dict[str, Any] | None, dict[str, str | None]]:
    """The ``metaData``, ``protocol`` and ``domainMetadata`` a checkpoint at ``version`` records
    (Delta's protocol: a classic or multi-part checkpoint, or a v2 checkpoint's top-level file in
    JSON or Parquet; its sidecars hold only files), read with pyarrow.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        version (int): a version with a checkpoint (:func:`checkpoint_versions`).

    Returns:
        tuple: the metadata (None: the checkpoint has none), the protocol action's body (None:
        none) and ``{domain: configuration}`` of the domains not removed.

    Raises:
        FileNotFoundError: no checkpoint file of ``version`` is there.
    """
    names = _checkpoints(storage, table_path).get(version)
    if not names:
        raise FileNotFoundError(f"no complete checkpoint of version {version} in {log_path(table_path)}")
    actions: list[dict[str, Any]] = []
    for name in names:
        path = Storage.join(log_path(table_path), name)
        if name.endswith(".json"):
            actions.extend(json.loads(line) for line in storage.read_text(path).splitlines() if line.strip())
            continue
        import pyarrow.parquet as pq

        with storage.open_read(path) as fh:
            pf = pq.ParquetFile(fh)
            cols = [c for c in ("metaData", "protocol", "domainMetadata") if c in pf.schema_arrow.names]
            table = pf.read(columns=cols)
        for col in cols:
            actions.extend({col: row} for row in table.column(col).to_pylist() if row is not None)
    meta: TableMeta | None = None
    protocol: dict[str, Any] | None = None
    domains: dict[str, str | None] = {}
    for action in actions:
        if action.get("metaData"):
            body = dict(action["metaData"])
            conf = body.get("configuration")
            if isinstance(conf, list):  # a Parquet map reads as (key, value) pairs
                body["configuration"] = dict(conf)
            meta = TableMeta.from_action(body)
        elif action.get("protocol"):
            protocol = action["protocol"]
        elif action.get("domainMetadata"):
            d = action["domainMetadata"]
            if not d.get("removed"):
                domains[str(d.get("domain"))] = str(d.get("configuration") or "")
    return meta, protocol, domains


def checkpoint_versions(storage: Storage, table_path: str) -> list[int]:
    """Versions with a checkpoint (classic, multi-part or v2), ascending.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.

    Returns:
        list[int]: the versions; ``[]`` when there is none (or no log).
    """
    return sorted(_checkpoints(storage, table_path))


def _checkpoints(storage: Storage, table_path: str) -> dict[int, list[str]]:
    """Each version's checkpoint files that Delta would read: a complete multi-part set (parts
    1..n of one n; a writer that died mid-checkpoint leaves a partial one, which Delta's protocol
    says to ignore), else one single-file checkpoint (classic, or v2's top-level file)."""
    found: dict[int, list[re.Match[str]]] = {}
    for name in storage.listdir(log_path(table_path)):
        if m := _CHECKPOINT_FILE.match(name):
            found.setdefault(int(m.group(1)), []).append(m)
    out: dict[int, list[str]] = {}
    for version, matches in found.items():
        sets: dict[int, dict[int, str]] = {}
        for m in matches:
            if m.group(2):
                part, total = (int(x) for x in m.group(2)[1:].split("."))
                sets.setdefault(total, {})[part] = m.group(0)
        complete = [parts for total, parts in sorted(sets.items()) if set(parts) == set(range(1, total + 1))]
        singles = sorted(m.group(0) for m in matches if not m.group(2))
        if complete:
            out[version] = [complete[0][i] for i in sorted(complete[0])]
        elif singles:
            out[version] = singles[:1]
    return out


def readable_from(storage: Storage, table_path: str, versions: list[int] | None = None) -> int | None:
    """The oldest version whose state Delta can still rebuild: the newest checkpoint from
    which every later commit file is there (version 0 when the log is whole).

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        versions (list[int] | None): the commit files' versions, ascending (None: listed here).

    Returns:
        int | None: the version; None when no version can be rebuilt.
    """
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


# ----------------------------------------------------------------------------- a local table's state, and commits written here
#
# Replay lands a small segment's append or rewrite with a commit of its own (:mod:`wlr.apply`): the
# rows in one Parquet file written by pyarrow, the ``add`` (and ``remove``) actions in one JSON
# commit, put in place only where no writer committed that version before (a hard link of a file
# written aside: POSIX's atomic put-if-absent, as delta-rs's local log store does with its
# no-replace rename). It reads the table's state as Delta's log replay rebuilds it
# (:class:`Snapshot`): the newest classic or multi-part checkpoint the commits after it still
# follow, then those JSON commits; a table only v2 checkpoints describe is not read here.


@dataclass(frozen=True)
class Snapshot:
    """A Delta table's state at one version, rebuilt from its log (Delta's protocol: "Action
    Reconciliation"), read from a local folder by :func:`read_snapshot`.

    Attributes:
        version (int): the Delta version.
        protocol (dict[str, Any]): the ``protocol`` action's body in force.
        metadata (dict[str, Any]): the ``metaData`` action's body in force.
        files (dict[str, dict[str, Any]]): the ``add`` actions of the live data files, by path
            (the path as the log writes it; with a deletion vector, ``<path>#<its unique id>``).
        txns (dict[str, int]): each application's last ``txn`` version (Delta's idempotent writes).
        stamp (tuple[int, int, int]): inode, size and modification time (ns) of the version's
            commit file: the log is still the one read while the same file is there.
    """

    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    files: dict[str, dict[str, Any]]
    txns: dict[str, int]
    stamp: tuple[int, int, int]

    @property
    def size(self) -> int:
        """The live data files' size in bytes."""
        return sum(int(a.get("size") or 0) for a in self.files.values())

    def after(self, version: int, actions: list[dict[str, Any]], stamp: tuple[int, int, int]) -> "Snapshot":
        """The state after ``actions``, committed as ``version`` (its commit file's ``stamp``).

        Args:
            version (int): the new version.
            actions (list[dict[str, Any]]): the commit's actions.
            stamp (tuple[int, int, int]): its commit file's inode, size and modification time (ns).

        Returns:
            Snapshot: a new object; this one is unchanged.
        """
        out = Snapshot(version, dict(self.protocol), dict(self.metadata), dict(self.files), dict(self.txns), stamp)
        for action in actions:
            _reconcile(out, action)
        return out


def _file_key(body: dict[str, Any]) -> str:
    dv = body.get("deletionVector")
    if not dv:
        return str(body["path"])
    return f"{body['path']}#{dv.get('storageType', '')}{dv.get('pathOrInlineDv', '')}@{dv.get('offset', '')}"


def _reconcile(snap: Snapshot, action: dict[str, Any]) -> None:
    """Apply one log action to ``snap`` in place (what only the reader that made it holds)."""
    if action.get("add"):
        snap.files[_file_key(action["add"])] = action["add"]
    elif action.get("remove"):
        snap.files.pop(_file_key(action["remove"]), None)
    elif action.get("txn"):
        snap.txns[str(action["txn"].get("appId"))] = int(action["txn"].get("version", -1))
    elif action.get("metaData"):
        snap.metadata.clear()
        snap.metadata.update(action["metaData"])
    elif action.get("protocol"):
        snap.protocol.clear()
        snap.protocol.update(action["protocol"])


def commit_stamp(table_dir: str, version: int) -> tuple[int, int, int] | None:
    """Inode, size and modification time (ns) of the commit file of ``version`` of the table at
    local folder ``table_dir``: while the same file is there, the log up to it is the one read
    (a table dropped and made again has new commit files). None when it is not there.

    Args:
        table_dir (str): the table's local folder.
        version (int): the Delta version.

    Returns:
        tuple[int, int, int] | None: the stamp.
    """
    try:
        st = os.stat(os.path.join(table_dir, LOG_DIR, f"{version:020d}.json"))
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def read_snapshot(table_dir: str, since: Snapshot | None = None) -> Snapshot | None:
    """The state of the Delta table at local folder ``table_dir`` at its latest version.

    Args:
        table_dir (str): the table's local folder.
        since (Snapshot | None): a state read before: only the commits after it are read when its
            version's commit file is still the one it read (else the table was made again, and
            it is read afresh).

    Returns:
        Snapshot | None: the state; None when there is no commit, the log cannot be rebuilt (a
        commit missing since the newest checkpoint), or only a v2 checkpoint describes it.

    Raises:
        OSError: the log cannot be read.
        ValueError: a commit file is not JSON (a damaged log).
    """
    folder = os.path.join(table_dir, LOG_DIR)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return None
    versions = sorted(int(m.group(1)) for m in map(_COMMIT_FILE.match, names) if m)
    if not versions:
        return None
    latest = versions[-1]
    snap: Snapshot | None = None
    if since is not None and since.version <= latest:
        if commit_stamp(table_dir, since.version) == since.stamp:
            snap = since.after(since.version, [], since.stamp)
    have = set(versions)
    if snap is None:
        snap = _from_checkpoint(folder, names, have, latest)
        if snap is None:
            return None
    for v in range(snap.version + 1, latest + 1):
        if v not in have:
            return None
        path = os.path.join(folder, f"{v:020d}.json")
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    _reconcile(snap, json.loads(line))
    stamp = commit_stamp(table_dir, latest)
    if stamp is None:
        return None
    return replace(snap, version=latest, stamp=stamp)


def _from_checkpoint(folder: str, names: list[str], have: set[int], latest: int) -> Snapshot | None:
    """The state at the newest classic or multi-part checkpoint that every commit after it up
    to ``latest`` follows (version -1 and empty when the log is whole from version 0); None when
    there is none, or the newest such is a v2 checkpoint."""
    found: dict[int, list[re.Match[str]]] = {}
    for name in names:
        if m := _CHECKPOINT_FILE.match(name):
            found.setdefault(int(m.group(1)), []).append(m)
    for cp in sorted((v for v in found if v <= latest), reverse=True):
        if not all(v in have for v in range(cp + 1, latest + 1)):
            break
        parts = _checkpoint_parts(found[cp])
        if parts is None:
            return None  # a v2 checkpoint (sidecars, a JSON top-level file): delta-rs or Spark reads it
        if parts:
            return _read_checkpoint(folder, cp, parts)
    if all(v in have for v in range(0, latest + 1)):
        return Snapshot(-1, {}, {}, {}, {}, (0, 0, 0))
    return None


def _checkpoint_parts(matches: list[re.Match[str]]) -> list[str] | None:
    """A version's complete classic or multi-part checkpoint (``[]``: none complete; None: a v2
    checkpoint is there, which this reader leaves to delta-rs and Spark)."""
    if any(m.group(3) or m.group(4) == "json" for m in matches):
        return None
    sets: dict[int, dict[int, str]] = {}
    for m in matches:
        if m.group(2):
            part, total = (int(x) for x in m.group(2)[1:].split("."))
            sets.setdefault(total, {})[part] = m.group(0)
    for total, parts in sorted(sets.items()):
        if set(parts) == set(range(1, total + 1)):
            return [parts[i] for i in sorted(parts)]
    return sorted(m.group(0) for m in matches if not m.group(2))[:1]


def _read_checkpoint(folder: str, version: int, parts: list[str]) -> Snapshot:
    import pyarrow.parquet as pq

    snap = Snapshot(version, {}, {}, {}, {}, (0, 0, 0))
    for name in parts:
        pf = pq.ParquetFile(os.path.join(folder, name))
        cols = [c for c in ("add", "txn", "metaData", "protocol") if c in pf.schema_arrow.names]
        table = pf.read(columns=cols)
        for col in cols:
            for row in table.column(col).to_pylist():
                if row:
                    _reconcile(snap, {col: _from_parquet(row)})
    return snap


def _from_parquet(row: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's action as its JSON commit would hold it: maps as objects (Parquet reads
    them as key-value pairs), fields without a value left out."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if value is None:
            continue
        if isinstance(value, dict):
            value = _from_parquet(value)
        elif isinstance(value, list) and value and all(isinstance(p, tuple) and len(p) == 2 for p in value):
            value = dict(value)
        elif key in ("configuration", "options", "partitionValues", "tags") and value == []:
            value = {}
        out[key] = value
    return out


def write_commit(table_dir: str, version: int, actions: list[dict[str, Any]]) -> tuple[int, int, int]:
    """Commit ``actions`` as ``version`` of the Delta table at local folder ``table_dir``, only
    where no writer committed that version before: the commit is written aside and hard-linked
    in place (an atomic put-if-absent; not synced, as delta-rs and Delta Spark leave a local
    commit).

    Args:
        table_dir (str): the table's local folder.
        version (int): the version to commit (the latest + 1).
        actions (list[dict[str, Any]]): the actions, ``commitInfo`` first.

    Returns:
        tuple[int, int, int]: the commit file's inode, size and modification time (ns), for
        :meth:`Snapshot.after`.

    Raises:
        FileExistsError: ``version`` is committed already (another writer).
        OSError: the log folder cannot be written, or its filesystem makes no hard links
            (nothing is committed then).
    """
    import uuid

    folder = os.path.join(table_dir, LOG_DIR)
    final = os.path.join(folder, f"{version:020d}.json")
    aside = os.path.join(folder, f".{version:020d}.json.{uuid.uuid4().hex}.tmp")
    text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    with open(aside, "x", encoding="utf-8") as fh:
        fh.write(text)
    try:
        os.link(aside, final)
    finally:
        os.unlink(aside)
    stamp = commit_stamp(table_dir, version)
    if stamp is None:
        raise FileNotFoundError(f"{final} is gone right after its commit")
    return stamp


_STRING_PREFIX = 32  # Delta Spark's dataSkippingStringPrefixLength
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def stats_columns(meta: TableMeta) -> list[str]:
    """The columns Delta collects file statistics on: ``delta.dataSkippingStatsColumns`` where set,
    else the first ``delta.dataSkippingNumIndexedCols`` (32; -1: all) top-level columns.

    Args:
        meta (TableMeta): the table's metadata.

    Returns:
        list[str]: the column names, in the table's order.
    """
    cols = meta.columns
    named = meta.configuration.get("delta.dataSkippingStatsColumns")
    if named is not None:
        wanted = {c.strip().strip("`") for c in named.split(",") if c.strip()}
        return [c for c in cols if c in wanted]
    try:
        count = int(meta.configuration.get("delta.dataSkippingNumIndexedCols", "32"))
    except ValueError:
        count = 32
    return cols if count < 0 else cols[:count]


def file_stats(rows: Any, meta: TableMeta) -> str:
    """Delta's per-file statistics of ``rows`` (a ``pyarrow.Table``: one data file's rows), as an
    ``add`` action's ``stats`` JSON (Delta's protocol: "Per-file Statistics").

    ``numRecords``, and on the columns of :func:`stats_columns` ``nullCount``, ``minValues`` and
    ``maxValues``. A bound is always one (data skipping trusts it): integers, booleans, dates and
    decimals exact; floats exact, and none for a column holding NaN or an infinity (Spark orders NaN
    above every number; Delta drops such bounds too); strings cut to 32 characters, the minimum as
    its prefix, the maximum as the least string above every string with its prefix; timestamps to
    the millisecond, the minimum rounded down and the maximum up. Binary columns get ``nullCount``
    only, as from delta-rs.

    Args:
        rows (pyarrow.Table): the rows, with the table's columns.
        meta (TableMeta): the table's metadata (which columns get statistics).

    Returns:
        str: the statistics JSON.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in stats_columns(meta):
        if name not in rows.column_names:
            continue
        col = rows[name]
        nulls[name] = col.null_count
        kind = col.type
        if col.null_count == len(col) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            continue
        if pa.types.is_floating(kind) and (pc.any(pc.is_nan(col)).as_py() or pc.any(pc.is_inf(col)).as_py()):
            continue
        if pa.types.is_timestamp(kind):
            bounds = pc.min_max(col.cast(pa.int64()))
            per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[kind.unit]
            lo_v, hi_v = bounds["min"].as_py(), bounds["max"].as_py()
            ms_lo, ms_hi = (lo_v * 1000, hi_v * 1000) if per_ms is None else (lo_v // per_ms, -(-hi_v // per_ms))
            zone = "Z" if kind.tz is not None else ""
            try:
                low[name], high[name] = (
                    (_EPOCH + timedelta(milliseconds=ms)).replace(tzinfo=None).isoformat(timespec="milliseconds") + zone
                    for ms in (ms_lo, ms_hi)
                )
            except OverflowError:  # an instant Python's datetime cannot hold
                pass
            continue
        if not (
            pa.types.is_integer(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind)
            or pa.types.is_decimal(kind)
            or pa.types.is_date32(kind)
            or pa.types.is_string(kind)
            or pa.types.is_large_string(kind)
        ):
            continue
        bounds = pc.min_max(col)
        try:
            lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        except (OverflowError, ValueError):  # a date Python's datetime cannot hold
            continue
        if pa.types.is_date32(kind):
            lo, hi = lo.isoformat(), hi.isoformat()
        elif isinstance(lo, str):
            lo, hi = lo[:_STRING_PREFIX], _upper_bound(hi)
            if hi is None:
                continue
        low[name], high[name] = lo, hi
    return (
        f'{{"numRecords":{rows.num_rows},"minValues":{_stats_json(low)},"maxValues":{_stats_json(high)},'
        f'"nullCount":{json.dumps(nulls, separators=(",", ":"))}}}'
    )


def _upper_bound(text: str) -> str | None:
    """``text`` if at most 32 characters, else the least string of at most 32 above every string
    that begins with its first 32 (its last character that can be raised, raised, and cut after);
    None when none can be (code point order, which is UTF-8's byte order, Spark's and delta-rs's)."""
    if len(text) <= _STRING_PREFIX:
        return text
    prefix = text[:_STRING_PREFIX]
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i]) + 1
        if code == 0xD800:  # surrogates are no characters
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:i] + chr(code)
    return None


def _stats_json(values: dict[str, Any]) -> str:
    """``values`` as a JSON object, decimals as exact JSON numbers (Delta parses them so)."""
    from decimal import Decimal

    return (
        "{"
        + ",".join(
            f"{json.dumps(k)}:{format(v, 'f') if isinstance(v, Decimal) else json.dumps(v)}" for k, v in values.items()
        )
        + "}"
    )


RESERVED = {"wlc_logs", "wlc_snapshot"}  # the master's own folders, never schemas
NOT_REPLICATED_SCHEMAS = {"tmp"}


def delta_ref(uri: str) -> str:
    """``delta.`<path>``` for SQL on a path-based Delta table.

    Args:
        uri (str): the table's URI as Spark reads it (backticks in it are doubled).

    Returns:
        str: the table reference.
    """
    return "delta." + quote_ident(uri)


def discover_tables(
    storage: Storage, db_path: str, skip: frozenset[str] | set[str] = frozenset(), refused: dict[str, str] | None = None
) -> dict[str, str]:
    """Replicated tables of a database (see :mod:`wlcore.names`).

    Every Delta table at ``<db>/<schema>/<table>`` is replicated, whatever its folder name,
    except schema ``tmp``. A Delta table that cannot be carried (a name with a control
    character or not UTF-8, a table directly under the database folder) is put in
    ``refused`` as ``{path: reason}`` so the master can say so, never skipped silently.

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database's folder.
        skip (frozenset[str] | set[str]): schema folders to leave out (besides the master's own).
        refused (dict[str, str] | None): filled in place with ``{path: reason}`` (None: not kept).

    Returns:
        dict[str, str]: ``{"schema.table": folder}``.
    """
    out = {}
    for schema in storage.subdirs(db_path):
        if schema in RESERVED or schema in skip or schema in NOT_REPLICATED_SCHEMAS:
            continue
        schema_path = Storage.join(db_path, schema)
        if is_delta_table(storage, schema_path):
            if refused is not None:
                refused[schema_path] = (
                    "a Delta table directly in the database folder is not replicated; move it to <db>/<schema>/<table>"
                )
            continue
        for table in storage.subdirs(schema_path):
            path = Storage.join(schema_path, table)
            if table == "_delta_log" or not is_delta_table(storage, path):
                continue
            reason = uncarried_reason(schema) or uncarried_reason(table)
            if reason:
                if refused is not None:
                    refused[path] = reason
                continue
            out[qualified(schema, table)] = path
    return out


def table_path(db_path: str, name: str) -> str:
    """The folder of table ``name`` in the database folder ``db_path``: ``<db>/<schema>/<table>``.

    Args:
        db_path (str): the database's folder.
        name (str): ``schema.table``.

    Raises:
        ConfigError: ``name`` is not ``schema.table``.
    """
    schema, table = split_name(name)
    return Storage.join(db_path, schema, table)
