"""Snapshots: each table of the master copied at the Delta version of a transaction boundary.

``<db>/wlc_snapshot/<T>/<schema>/<table>`` are ordinary Delta tables written by Spark from
the master's time travel (so they survive a later VACUUM of the master), with the master's
schema, partitioning, replicated properties and CHECK constraints. Every transaction <= T
is in them and none after; ``T`` is -1 for the snapshot taken when master mode began (folder
``initial``). ``snapshot.json``, written last, lists each table's master version and records
T, its commit time, the watermark and the last level-0 batch it holds; the folder is built
as ``.open-<T>-<id>`` and published by one rename. A replica starts by copying a snapshot's
folders: the newest at or before its target (:func:`wlcore.levels.choose_start`).

Rolling snapshots (:func:`take_rolling`) are taken while capture runs, at the end of the
newest published batch: its manifest's cursors are the Delta version of every table with
exactly the transactions up to it.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .batch import Cursor, Manifest
from .deltalog import TableMeta, delta_ref, metadata_at, table_path
from .errors import MasterStateError, WlcError
from .faults import crash_point
from .levels import Start
from .names import quote_ident, split_name
from .storage import Storage
from .tabledef import create_sql, exact_session
from .utc import parse_utc, utc_iso, utcnow

if TYPE_CHECKING:
    from .logstore import LogStore

SNAPSHOT_MANIFEST = "snapshot.json"
SNAPSHOT_DIR = "wlc_snapshot"
INITIAL = "initial"  # the folder of the snapshot taken when master mode began (T = -1)
_STAGING = ".open-"


class SnapshotRecordError(WlcError, ValueError):
    """A snapshot's ``snapshot.json`` is not valid JSON or lacks what every writer puts in
    it (``dbid``, ``tables`` with each table's cursor): the snapshot is damaged."""


@dataclass
class SnapshotRecord:
    """A snapshot's ``snapshot.json``, typed: what the snapshot holds and where it stands.

    :meth:`from_json` and :meth:`to_json` are its one reader and writer (:func:`read`,
    :func:`write`); the JSON is written with one-space indents and sorted keys, as always.

    Attributes:
        dbid: the master's database id.
        created: UTC instant the snapshot was taken (None: not recorded).
        tables: each table's capture cursor at the snapshot (its master version and metadata).
        txn: T, the last transaction the snapshot holds (-1: the initial snapshot).
        time: UTC commit time of transaction T (None: the initial snapshot).
        watermark: the master's watermark at T (None: the initial snapshot).
        batch: the last level-0 batch the snapshot holds (-1: none).
        epochs: the master's epoch history at T as text (:mod:`wlcore.epochs`); None when not
            recorded (the initial snapshot: the key is not written).
        extra: keys no field knows (a newer version's), written back as read.
    """

    dbid: str
    created: datetime | None = None
    tables: dict[str, Cursor] = field(default_factory=dict)
    txn: int = -1
    time: datetime | None = None
    watermark: datetime | None = None
    batch: int = -1
    epochs: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def metas(self) -> dict[str, TableMeta]:
        """``{table: TableMeta}`` of the tables whose cursor records their metadata."""
        return {n: c.meta for n, c in self.tables.items() if c.meta is not None}

    def to_json(self) -> dict[str, Any]:
        """The record as ``snapshot.json`` holds it (instants as ISO-8601 UTC with ``Z``)."""
        body: dict[str, Any] = {
            **self.extra,
            "dbid": self.dbid,
            "created": utc_iso(self.created) if self.created else None,
            "txn": self.txn,
            "time": utc_iso(self.time) if self.time else None,
            "watermark": utc_iso(self.watermark) if self.watermark else None,
            "batch": self.batch,
            "tables": {k: v.to_json() for k, v in self.tables.items()},
        }
        if self.epochs is not None:
            body["epochs"] = self.epochs
        return body

    def to_text(self) -> str:
        """The text of ``snapshot.json``: :meth:`to_json` with one-space indents, keys sorted."""
        return json.dumps(self.to_json(), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, body: dict[str, Any], source: str = "snapshot.json") -> "SnapshotRecord":
        """The record in ``body`` (an older one without ``txn``, ``time``, ``watermark`` or
        ``batch`` is the initial snapshot's: -1, None, None, -1).

        Raises:
            SnapshotRecordError: ``dbid`` or ``tables`` is missing, or a value is malformed;
                ``source`` names the file in the message.
        """
        known = {"dbid", "created", "txn", "time", "watermark", "batch", "epochs", "tables"}
        try:
            return cls(
                str(body["dbid"]),
                parse_utc(body["created"]) if body.get("created") else None,
                {k: Cursor.from_json(v) for k, v in body["tables"].items()},
                int(body.get("txn", -1)),
                parse_utc(body["time"]) if body.get("time") else None,
                parse_utc(body["watermark"]) if body.get("watermark") else None,
                int(body.get("batch", -1)),
                body.get("epochs"),
                {k: v for k, v in body.items() if k not in known},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SnapshotRecordError(
                f"{source} is damaged ({type(exc).__name__}: {exc}); the snapshot cannot be "
                "used: delete its folder and take a new snapshot (wlc snapshot)"
            ) from None


def create_table_sql(uri: str, meta: TableMeta) -> list[str]:
    """SQL statements that create an empty Delta table at ``uri`` defined as ``meta``
    (:func:`wlcore.tabledef.create_sql`: columns with every attribute, partitioning,
    clustering, comment, replicated properties, CHECK constraints)."""
    return create_sql(delta_ref(uri), meta)


def copy_session(spark):
    """A child session of ``spark`` for writing snapshot copies (:func:`wlcore.tabledef.exact_session`):
    the copies carry their table's definition and nothing of the session's table property defaults.

    Args:
        spark (SparkSession): the master's session.
    """
    return exact_session(spark.newSession())


def folder_of(db_path: str, txn: int) -> str:
    """The folder of the snapshot at transaction ``txn``: ``<db_path>/wlc_snapshot/<txn>``.

    Args:
        db_path (str): the master's folder (or a shipped copy's).
        txn (int): the snapshot's last transaction (-1: the initial one, folder ``initial``).
    """
    return Storage.join(db_path, SNAPSHOT_DIR, INITIAL if txn < 0 else str(txn))


def txn_of(folder: str) -> int:
    """The transaction of the snapshot in ``folder`` (its name; -1: the initial one).

    Args:
        folder (str): the snapshot's folder.
    """
    name = folder.rstrip("/").rsplit("/", 1)[-1]
    return -1 if name == INITIAL else int(name)


def take(
    spark,
    storage: Storage,
    db_path: str,
    snap_path: str,
    tables: dict[str, str],
    versions: dict[str, int],
    metas: dict[str, TableMeta],
    dbid: str,
    record: SnapshotRecord | None = None,
) -> dict[str, Cursor]:
    """Copy every table at ``versions[name]`` into ``snap_path`` and write ``snapshot.json`` last.

    Args:
        spark: the Spark session writing the copies (:func:`copy_session`).
        storage: the master's filesystem.
        db_path: the master's folder.
        snap_path: the snapshot's folder (emptied first).
        tables: ``{table: its folder}`` of the tables to copy.
        versions: ``{table: Delta version}`` each is copied at.
        metas: ``{table: TableMeta}``, each table's definition at that version.
        dbid: the master's database id.
        record: what the manifest records besides the tables, ``dbid`` and ``created``
            (``txn``, ``time``, ``watermark``, ``batch``, ``epochs``); default the initial
            snapshot's (T = -1).

    Returns:
        dict[str, Cursor]: the capture cursors the logs start from.

    Cost: one Spark read and write of each table (O(data)).
    """
    from tqdm.auto import tqdm

    storage.rm(snap_path)
    storage.makedirs(snap_path)
    cursors = {}
    # a bar when the copy takes over 2 s, on a terminal or in a notebook only
    for name, path in tqdm(sorted(tables.items()), desc="snapshot", unit="table", delay=2.0, disable=None, leave=False):
        schema, table = split_name(name)
        meta = metas[name]
        dst = storage.uri(Storage.join(snap_path, schema, table))
        for stmt in create_table_sql(dst, meta):
            spark.sql(stmt)
        df = spark.read.format("delta").option("versionAsOf", versions[name]).load(storage.uri(path))
        df.select(*[quote_ident(c) for c in meta.columns]).write.format("delta").mode("append").save(dst)
        cursors[name] = Cursor(versions[name], meta)
    write(
        storage,
        snap_path,
        replace(record or SnapshotRecord(dbid), dbid=dbid, created=utcnow(), tables=cursors),
    )
    return cursors


def take_rolling(spark, storage: Storage, db_path: str, manifest: Manifest, dbid: str) -> Start:
    """Take the snapshot at the end of the published level-0 batch ``manifest`` (T its last
    transaction), while capture goes on: each table read at its version in the batch's
    cursors, by Delta time travel. An existing snapshot at T is returned as it is. The caller
    holds the master's life-cycle lock (:mod:`wlc.lifecycle`): stale staging folders of an
    interrupted snapshot are removed here.

    Args:
        spark (SparkSession): the session writing the copies (:func:`copy_session`).
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.
        manifest (Manifest): the batch's manifest.
        dbid (str): the master's database id.

    Returns:
        Start: the snapshot (``txn`` T, ``time`` its commit time, UTC).

    Raises:
        MasterStateError: a table's version is no longer readable on the master (removed by
            VACUUM, or the table dropped since): take the snapshot again after a flush.
    """
    txn = manifest.last_txn
    final = folder_of(db_path, txn)
    if storage.exists(Storage.join(final, SNAPSHOT_MANIFEST)):
        return start_of(storage, final)
    parent = Storage.join(db_path, SNAPSHOT_DIR)
    storage.makedirs(parent)
    for name in storage.listdir(parent):
        if name.startswith(_STAGING):
            storage.rm(Storage.join(parent, name))
    staging = Storage.join(parent, f"{_STAGING}{txn}-{uuid.uuid4().hex[:8]}")
    cursors = manifest.cursors.tables
    tables = {n: table_path(db_path, n) for n in cursors}
    versions = {n: c.version for n, c in cursors.items()}
    metas = {n: c.meta or _meta_at(storage, tables[n], n, c.version, txn) for n, c in cursors.items()}
    record = SnapshotRecord(
        dbid,
        txn=txn,
        time=manifest.txns[-1].time if manifest.txns else None,
        watermark=manifest.watermark,
        batch=manifest.batch,
        epochs=manifest.epochs,
    )
    try:
        take(spark, storage, db_path, staging, tables, versions, metas, dbid, record)
    except Exception as exc:
        storage.rm(staging)
        if isinstance(exc, MasterStateError):
            raise
        raise MasterStateError(
            f"the snapshot at transaction {txn} could not read a master table at its version "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); was it "
            "vacuumed or dropped since? flush and take the snapshot again"
        ) from exc
    crash_point("snapshot.copied")
    storage.publish_dir(staging, final)
    return start_of(storage, final)


def _meta_at(storage: Storage, path: str, name: str, version: int, txn: int) -> TableMeta:
    """Table ``name``'s metadata at ``version`` from its JSON commits (the table at ``path``).

    Raises:
        MasterStateError: the commits holding it were cleaned up (only a checkpoint has it).
    """
    meta = metadata_at(storage, path, version)
    if meta is None:
        raise MasterStateError(
            f"the snapshot at transaction {txn} cannot read the definition of table {name} at "
            f"version {version}: the commits holding it were cleaned up; flush and take the "
            "snapshot again"
        )
    return meta


def read(storage: Storage, snap_path: str) -> SnapshotRecord:
    """The record (``snapshot.json``) of the snapshot folder ``snap_path``.

    Args:
        storage (Storage): the storage holding the snapshot.
        snap_path (str): the snapshot's folder.

    Raises:
        FileNotFoundError: the folder holds no ``snapshot.json``.
        SnapshotRecordError: it is not valid JSON or is damaged.
    """
    path = Storage.join(snap_path, SNAPSHOT_MANIFEST)
    try:
        body = json.loads(storage.read_text(path))
    except ValueError as exc:
        raise SnapshotRecordError(
            f"{path} is not valid JSON ({exc}); the snapshot cannot be used: delete its "
            "folder and take a new snapshot (wlc snapshot)"
        ) from None
    return SnapshotRecord.from_json(body, path)


def write(storage: Storage, snap_path: str, record: SnapshotRecord) -> None:
    """Write ``record`` as the ``snapshot.json`` of the folder ``snap_path`` (atomically).

    Args:
        storage (Storage): the storage holding the snapshot.
        snap_path (str): the snapshot's folder.
        record (SnapshotRecord): the record.
    """
    storage.write_atomic(Storage.join(snap_path, SNAPSHOT_MANIFEST), record.to_text())


def start_of(storage: Storage, snap_path: str) -> Start:
    """The snapshot at ``snap_path`` as a :class:`wlcore.levels.Start`.

    Args:
        storage (Storage): the storage holding the snapshot.
        snap_path (str): the snapshot's folder.

    Raises:
        FileNotFoundError, SnapshotRecordError: as :func:`read`.
    """
    record = read(storage, snap_path)
    return Start(record.txn, record.time, record.batch, snap_path)


def list_snapshots(
    storage: Storage,
    db_path: str,
    configured: str = "",
    store: LogStore | None = None,
    tick: int = -1,
) -> list[Start]:
    """Every complete snapshot of the master at ``db_path``, oldest first; a master that began
    with no table starts with :data:`EMPTY` (transaction -1, no folder) while its log folder
    (``store``, when given) still holds a batch that begins at batch 0, or holds no batch yet.

    Args:
        storage (Storage): the storage holding the master (or its shipped copy).
        db_path (str): the master's folder (or the shipped copy's).
        configured (str): ``wlc.config``'s ``snapshot`` (a master made by an earlier version
            keeps its one snapshot directly in ``wlc_snapshot``); "": none.
        store (LogStore | None): the master's log folder, its batches named by the master's
            database (None: :data:`EMPTY` whenever no snapshot is at -1).
        tick (int): the last transaction the master published (its ``wlc.config``'s; -1: none): a
            log folder with no batch starts empty only while nothing was published (a promoted
            master whose old history could not be copied holds none, and starts from a snapshot).
    """
    parent = Storage.join(db_path, SNAPSHOT_DIR)
    paths = [parent] if storage.exists(Storage.join(parent, SNAPSHOT_MANIFEST)) else []  # the old layout
    if storage.isdir(parent):
        for name in storage.published(parent):
            if (name == INITIAL or re.fullmatch(r"\d+", name)) and storage.exists(
                Storage.join(parent, name, SNAPSHOT_MANIFEST)
            ):
                paths.append(Storage.join(parent, name))
    if configured and configured not in paths and storage.exists(Storage.join(configured, SNAPSHOT_MANIFEST)):
        paths.append(configured)
    out = sorted((start_of(storage, p) for p in paths), key=lambda s: s.txn)
    if (not out or out[0].txn >= 0) and (store is None or _starts_at_batch_zero(store, not out, tick)):
        out.insert(0, EMPTY)  # a master that began with no table: replay may start empty
    return out


def _starts_at_batch_zero(store: LogStore, no_snapshot: bool, tick: int) -> bool:
    """True when the log folder still begins at batch 0: it holds batch 0 (level 0 or compacted),
    or, for a master with no snapshot that published nothing (``tick`` -1), no batch at all yet."""
    if store.batch(0) is not None:
        return True
    compacted = store.compacted()
    if any(b.first == 0 for b in compacted):
        return True
    return no_snapshot and tick < 0 and not compacted and not store.batches()


EMPTY = Start(-1, None, -1, "")  # the start of a master that began with no table (no folder to copy)


def newest_folder(storage: Storage, db_path: str) -> str | None:
    """The folder of the newest published snapshot by its name (no manifest read), or None.

    Args:
        storage (Storage): the storage holding the master (or its shipped copy).
        db_path (str): the master's folder (or the shipped copy's).
    """
    parent = Storage.join(db_path, SNAPSHOT_DIR)
    numbers = [int(n) for n in storage.published(parent) if re.fullmatch(r"\d+", n)]
    if numbers:
        return Storage.join(parent, str(max(numbers)))
    return Storage.join(parent, INITIAL) if storage.exists(Storage.join(parent, INITIAL)) else None
