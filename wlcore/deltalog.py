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
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from .storage import Storage
from .tablemeta import TableMeta, clustering_of, protocol_features  # TableMeta: importers take it from here too
from .utc import utcnow

LOG_DIR = "_delta_log"
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(\.\d{10}\.\d{10})?(\.[0-9a-fA-F-]{36})?\.(parquet|json)$")
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
    out = []
    for name in storage.listdir(log_path(table_path)):
        m = _COMMIT_FILE.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def commit_file(table_path: str, version: int) -> str:
    """The JSON commit file of ``version`` of the table at ``table_path`` (20-digit name).

    Args:
        table_path (str): the table's folder.
        version (int): the Delta version.

    Returns:
        str: ``<table_path>/_delta_log/<version:020d>.json``.
    """
    return Storage.join(log_path(table_path), f"{version:020d}.json")


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
    path = Storage.join(log_path(table_path), f"{version:020d}.crc")
    try:
        crc = json.loads(storage.read_text(path))
        return int(crc["tableSizeBytes"]), int(crc["numFiles"])
    except (OSError, ValueError, KeyError, TypeError):  # missing, unreadable, cut short or not Delta's
        return None


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
    features of its ``protocol``), read back through the JSON commits.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.
        version (int): the Delta version.

    Returns:
        TableMeta | None: the metadata; None when the commits holding it were cleaned up (only
        a checkpoint has it): callers then ask Delta Kernel (:func:`wlcore.kernel.metadata_at`).
    """
    meta: TableMeta | None = None
    clustering: tuple[tuple[str, ...], ...] | None | Literal[False] = False  # False: not found yet
    features: tuple[str, ...] | None = None
    for v in range(version, -1, -1):
        try:
            commit = read_commit(storage, table_path, v)
        except FileNotFoundError:
            return None
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


def checkpoint_versions(storage: Storage, table_path: str) -> list[int]:
    """Versions with a checkpoint (classic, multi-part or v2), ascending.

    Args:
        storage (Storage): the storage holding the table.
        table_path (str): the table's folder.

    Returns:
        list[int]: the versions; ``[]`` when there is none (or no log).
    """
    out = set()
    for name in storage.listdir(log_path(table_path)):
        m = _CHECKPOINT_FILE.match(name)
        if m:
            out.add(int(m.group(1)))
    return sorted(out)


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
