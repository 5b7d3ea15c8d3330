"""The batch format: what a published batch holds, how it is published and verified.

A batch is a folder ``<logs>/<dbname>_<12-digit batch number>`` (level 0, as capture
publishes it) or ``<logs>/<dbname>_L<level>_<first batch>_<last batch>`` (a compacted batch
of level 1 or 2 merging level-0 batches first..last, see :func:`wlc.lifecycle.compact_levels`)::

    manifest.json                      written last: format, txn records, watermark, checksums
    rows/<schema.table>/wlc_version=<v>/part-*.parquet   change rows of one Delta version
    images/<schema.table>/<v>/part-*.parquet             full table image where the change feed cannot describe a version

It is built in a staging folder ``<logs>/.open-<dbname>-<n>-<uuid>`` and published by one rename,
so a reader sees no batch or the whole batch; it is never changed afterwards (the log folder's
batches are listed, staged, published and deleted by :class:`wlcore.logstore.LogStore`). Every file
but the manifest is listed in the manifest with its size and SHA-256; the manifest carries
the SHA-256 of its own canonical content. Replay verifies all of it before applying.

The manifest (``manifest.json``, :class:`Manifest`) is typed, read and written here: the batch's
transaction records (:class:`TxnRecord`), its files with their size and SHA-256, and capture's
state after it (:class:`CaptureState`); :meth:`Manifest.to_bytes` writes it
and :meth:`Manifest.from_bytes` reads and checks it. Instants are ISO-8601 UTC
(:func:`wlcore.utc.utc_iso`, :func:`wlcore.utc.parse_utc`).

:class:`SpanCache` gives a log folder's published batches as spans (:class:`wlcore.levels.Span`),
each manifest read once: a published batch never changes, so its span is remembered while the
batch is there. The master's life cycle (:mod:`wlc.lifecycle`) and the pruning of shipped copies
and relays (:mod:`wlcore.ship`) both read their folders through it.

Capture's state after a batch (:class:`CaptureState`: its position, a :class:`Cursor`, in each
master table) is saved in the batch's manifest (``cursors``), so capture resumes after a restart
from the newest batch: nothing lost, nothing repeated. :class:`Planned` is a transaction a scan
found, before it is written into a batch.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Iterable

from . import FORMAT_VERSION
from .deltalog import Commit, TableMeta, latest_version, metadata_at, read_commit
from .errors import BatchError
from .levels import Span
from .storage import Storage
from .utc import parse_utc, utc_iso, utcnow


@dataclass
class Cursor:
    """Capture's position in one table: the last version examined, the metadata in force,
    that version's commit time (Delta's rule, :func:`wlcore.deltalog.monotonic`), a reason when
    the next version with data must be carried by the table's image (its change files were
    removed before capture read them), and whether a user switched the change feed off
    (capture then leaves it off), and the Delta table ids the log held as far as capture read it
    (``REPLACE TABLE`` gives a table a new id in the same log: a folder whose first commit
    carries none of them holds a table made anew)."""

    version: int
    meta: TableMeta | None
    time: datetime | None = None
    force: str | None = None
    feed_off: bool = False
    ids: tuple[str, ...] = ()
    digest: str = ""  # the commit file's text at ``version`` as capture read it (:func:`wlcore.deltalog.commit_digest`)

    def known_ids(self) -> set[str]:
        """The Delta table ids of this table's log capture knows: ``ids`` and the id in force."""
        return {i for i in (*self.ids, self.meta.table_id if self.meta else "") if i}

    def with_ids(self, *more: str) -> tuple[str, ...]:
        """``ids`` with ``more`` (and the id in force) added, sorted: for the next cursor."""
        return tuple(sorted(self.known_ids() | {i for i in more if i}))

    @classmethod
    def newest(cls, storage: Storage, path: str) -> Cursor | None:
        """A cursor at the newest version of the table at ``path``: where capture starts in a
        table it did not see written (a snapshot's copy, a promoted replica's table).

        Args:
            storage (Storage): the storage holding the table.
            path (str): the table's folder.

        Returns:
            Cursor | None: version, metadata (from the JSON commits, :func:`wlcore.deltalog.metadata_at`;
            None when only a checkpoint holds it) and commit time (None when the commit file does
            not say); None when the table has no commit.
        """
        version = latest_version(storage, path)
        if version is None:
            return None
        try:
            time = read_commit(storage, path, version, file_time=True).timestamp
        except (FileNotFoundError, ValueError):
            time = None
        return cls(version, metadata_at(storage, path, version), time)

    def to_json(self) -> dict:
        """The cursor as a manifest's ``cursors`` holds it (optional keys only when set)."""
        out: dict[str, Any] = {"version": self.version, "meta": self.meta.to_json() if self.meta else None}
        if self.time is not None:
            out["time"] = self.time.isoformat()
        if self.force:
            out["force"] = self.force
        if self.feed_off:
            out["feed_off"] = True
        others = sorted(self.known_ids() - {self.meta.table_id if self.meta else ""})
        if others:  # ids of the log before a REPLACE TABLE (the one in force is the meta's)
            out["ids"] = others
        if self.digest:
            out["digest"] = self.digest
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Cursor":
        """The cursor in ``data`` (a manifest's or snapshot's ``tables`` entry).

        Args:
            data (dict): the entry: ``version``, and ``meta``, ``time`` (UTC) and the notes when set.

        Returns:
            Cursor: the cursor.

        Raises:
            KeyError: ``version`` is missing.
            ValueError: ``version`` is not an integer, or ``time`` is malformed.
        """
        return cls(
            int(data["version"]),
            TableMeta.from_json(data["meta"]) if data.get("meta") else None,
            datetime.fromisoformat(data["time"]) if data.get("time") else None,
            data.get("force") or None,
            bool(data.get("feed_off", False)),
            tuple(str(i) for i in data.get("ids") or ()),
            str(data.get("digest") or ""),
        )


@dataclass
class CaptureState:
    """Everything capture needs to resume: cursors of every known table and the next ids."""

    tables: dict[str, Cursor] = field(default_factory=dict)
    next_txn: int = 0
    next_batch: int = 0

    def to_json(self) -> dict:
        """The state as a manifest's ``cursors`` holds it (tables sorted by name)."""
        return {
            "next_txn": self.next_txn,
            "next_batch": self.next_batch,
            "tables": {k: v.to_json() for k, v in sorted(self.tables.items())},
        }

    @classmethod
    def from_json(cls, data: dict) -> "CaptureState":
        """The state in ``data`` (missing keys: no table, 0).

        Args:
            data (dict): a manifest's ``cursors``: ``tables``, ``next_txn``, ``next_batch``.

        Returns:
            CaptureState: the state.

        Raises:
            KeyError, ValueError: a cursor lacks its ``version`` or a value is malformed.
            TypeError, AttributeError: ``data`` or a cursor is not a JSON object.
        """
        return cls(
            {k: Cursor.from_json(v) for k, v in (data.get("tables") or {}).items()},
            int(data.get("next_txn", 0)),
            int(data.get("next_batch", 0)),
        )

    def copy(self) -> "CaptureState":
        """A deep copy (through its JSON form)."""
        return CaptureState.from_json(self.to_json())

    @property
    def empty(self) -> bool:
        """True when the state holds nothing: no table, both next ids 0 (a manifest written
        without capture's state holds ``{}``, read as this)."""
        return not self.tables and self.next_txn == 0 and self.next_batch == 0

    def metas(self) -> dict[str, TableMeta]:
        """``{table: TableMeta}`` of the tables whose cursor records their metadata."""
        return {n: c.meta for n, c in self.tables.items() if c.meta is not None}


@dataclass
class Planned:
    """A transaction found by a scan, before it gets its id and its rows are written."""

    table: str
    time: datetime
    version: int | None
    operation: str
    ddl: str | None
    change: str | None
    meta: TableMeta | None
    user: str | None = None
    adds: tuple[str, ...] = ()  # an ALTER that only adds nullable columns: their names (see added_columns)
    ops: list | None = None  # an ALTER's operations (wlcore.tabledef), for replay to apply without an image
    gap: str | None = None  # why the change feed cannot describe this version (see wlc.capture)
    committed: datetime | None = (
        None  # captured late (wlc.capture.Holds): the commit time; ``time`` is its place in order
    )
    cursor: "Cursor | None" = None  # the table's cursor just after this transaction
    stable: int | None = None  # the last version with the same rows (the versions after change no data)

    @classmethod
    def gap_of(cls, table: str, commit: Commit, meta: TableMeta | None, gap: str | None, cursor: Cursor) -> Planned:
        """A version that changed data but that neither the change feed nor an image can
        describe (its commits were removed by log clean-up): a transaction with no change,
        ``gap`` saying why, so replay stops there loudly (:mod:`wlc.capture`).

        Args:
            table: ``schema.table``.
            commit: the version's commit as read from the table's log.
            meta: the table's definition at that version (None: not known).
            gap: why it cannot be described.
            cursor: the table's cursor just after this version.
        """
        return cls(
            table,
            commit.timestamp,
            commit.version,
            commit.operation,
            None,
            None,
            meta,
            commit.user,
            gap=gap,
            cursor=cursor,
        )


FORMAT = "wlc-batch"


def batch_name(dbname: str, number: int) -> str:
    """Folder name of level-0 batch ``number`` of database ``dbname``.

    Args:
        dbname (str): the master database's name.
        number (int): the batch number.

    Returns:
        str: ``<dbname>_<number, 12 digits>``.
    """
    return f"{dbname}_{number:012d}"


def compacted_name(dbname: str, level: int, first: int, last: int) -> str:
    """Folder name of the level-``level`` batch merging level-0 batches ``first``..``last``.

    Args:
        dbname (str): the master database's name.
        level (int): 1 or 2.
        first (int): its first level-0 batch number.
        last (int): its last level-0 batch number.

    Returns:
        str: ``<dbname>_L<level>_<first, 12 digits>_<last, 12 digits>``.
    """
    return f"{dbname}_L{level}_{first:012d}_{last:012d}"


@dataclass(frozen=True)
class FileEntry:
    """A file of a batch as its manifest lists it: ``size`` in bytes and ``sha256``, its hex digest."""

    size: int
    sha256: str

    def to_json(self) -> dict:
        """The entry as a manifest's ``files`` holds it: ``{"size": ..., "sha256": ...}``."""
        return {"size": self.size, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: dict) -> "FileEntry":
        """The entry in ``data`` (a manifest's ``files`` value).

        Raises:
            KeyError, TypeError, ValueError: ``size`` or ``sha256`` is missing or malformed.
        """
        return cls(int(data["size"]), str(data["sha256"]))


@dataclass
class TxnRecord:
    """One master transaction: one committed Delta version of one table (or a table drop).

    ``ddl`` is ``create``, ``alter``, ``drop`` or None; ``change`` is ``cdf`` (rows from the
    Change Data Feed in ``rows``), ``image`` (the table's full image at ``version`` in
    ``rows``) or None. ``meta`` is the table's metadata after the transaction when it is
    DDL or an image. ``adds`` names the columns of an ALTER that only adds nullable
    columns (nothing else changes; written only when not empty): replay lands such an
    ALTER inside a segment's commit instead of cutting the segment there. ``lost`` says why
    the change rows could not be captured (the table was dropped before capture read them;
    written only when set): replay stops at such a transaction with that cause. ``first``
    (compacted batches only): the record is the net change of this table's transactions
    ``first``..``txn`` (a *piece*); ``txn``, ``gtid``, ``time`` and ``version`` are its last's.
    ``ops`` (an ALTER, written only when set): the change of definition as ALTER TABLE
    operations (:mod:`wlcore.tabledef`), which replay applies without an image. ``gap`` (written
    only when set): why the change feed could not describe this version (its change files
    were vacuumed, its commit removed by log clean-up): the record has no rows, or the
    table's image where Delta could still rebuild that version. ``committed`` (written only
    when set): the transaction was captured late (its table could not be read for a while,
    :class:`wlc.capture.Holds`); ``time`` is its place in the order of transactions and this its
    commit time, earlier.
    """

    txn: int
    gtid: str
    time: datetime
    table: str
    version: int | None
    operation: str
    ddl: str | None = None
    change: str | None = None
    meta: dict | None = None
    rows: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    user: str | None = None
    adds: list[str] = field(default_factory=list)
    lost: str | None = None
    first: int | None = None
    ops: list | None = None
    gap: str | None = None
    committed: datetime | None = None

    @property
    def start(self) -> int:
        """The first transaction this record covers (``first`` of a piece, else ``txn``)."""
        return self.txn if self.first is None else self.first

    def to_json(self) -> dict:
        """The record as a manifest holds it: instants as ISO-8601 UTC, empty optional keys left out."""
        out = asdict(self)
        out["time"] = utc_iso(self.time)
        out["committed"] = utc_iso(self.committed) if self.committed else None
        for optional in ("adds", "lost", "first", "ops", "gap", "committed"):
            if not out[optional]:
                del out[optional]
        return out

    @classmethod
    def from_json(cls, data: dict) -> "TxnRecord":
        """The record in ``data`` (the inverse of :meth:`to_json`).

        Args:
            data (dict): a manifest's ``txns`` entry.

        Returns:
            TxnRecord: the record (instants as aware UTC datetimes).

        Raises:
            KeyError, TypeError, ValueError: a field is missing or malformed (:meth:`Manifest.from_bytes`
                turns these into :class:`BatchError`).
        """
        data = dict(data)
        data["time"] = parse_utc(data["time"])
        if data.get("committed"):
            data["committed"] = parse_utc(data["committed"])
        return cls(**data)


@dataclass
class Manifest:
    """What a batch holds. ``cursors`` is capture's state after this batch (for restarts),
    written as its JSON (:meth:`CaptureState.to_json`; an empty state as ``{}``).

    ``epochs`` is the master's epoch history when the batch was written (:mod:`wlcore.epochs`).
    A compacted batch (``level`` 1 or 2) merges level-0 batches ``batch``..``last_batch``
    and covers transactions ``span`` (first, last); its records are pieces and barriers
    (see :class:`TxnRecord`). Level 0 writes none of these keys, so its manifests are as
    before.
    """

    database: str
    dbid: str
    batch: int
    watermark: datetime
    txns: list[TxnRecord]
    cursors: CaptureState = field(default_factory=CaptureState)
    files: dict[str, FileEntry] = field(default_factory=dict)
    created: datetime = field(default_factory=utcnow)
    level: int = 0
    last_batch: int | None = None
    span: tuple[int, int] | None = None
    epochs: str = ""  # the master's epoch history (wlcore.epochs) as the session that wrote it knew it

    @property
    def first_txn(self) -> int:
        """The first transaction the batch covers (-1: none)."""
        if self.span is not None:
            return self.span[0]
        return self.txns[0].start if self.txns else -1

    @property
    def last_txn(self) -> int:
        """The last transaction the batch covers (-1: none)."""
        if self.span is not None:
            return self.span[1]
        return self.txns[-1].txn if self.txns else -1

    def listed_under(self, folder: str) -> list[str]:
        """The files :attr:`files` lists below ``folder``, relative to the batch, in listed order.

        Args:
            folder (str): a folder relative to the batch (``rows/s.t/wlc_version=3``).

        Returns:
            list[str]: the paths (``/``-separated); empty when none is listed there.
        """
        made = self.__dict__.get("_under")
        if made is None or made[0] != len(self.files):  # every folder of every listed file, made once
            index: dict[str, list[str]] = {}
            for rel in self.files:
                parts = rel.split("/")
                for i in range(1, len(parts)):
                    index.setdefault("/".join(parts[:i]), []).append(rel)
            made = self.__dict__["_under"] = (len(self.files), index)
        return made[1].get(folder.rstrip("/"), [])

    @property
    def end_batch(self) -> int:
        """The last level-0 batch this batch holds (itself at level 0)."""
        return self.batch if self.last_batch is None else self.last_batch

    @property
    def folder(self) -> str:
        """The batch's folder name in the log folder."""
        if self.level == 0:
            return batch_name(self.database, self.batch)
        return compacted_name(self.database, self.level, self.batch, self.end_batch)

    def body(self) -> dict:
        """The manifest as JSON without its checksum (level 0 writes no level keys)."""
        body = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "database": self.database,
            "dbid": self.dbid,
            "batch": self.batch,
            "first_txn": self.first_txn,
            "last_txn": self.last_txn,
            "watermark": utc_iso(self.watermark),
            "created": utc_iso(self.created),
            "txns": [t.to_json() for t in self.txns],
            "files": {rel: entry.to_json() for rel, entry in self.files.items()},
            "cursors": {} if self.cursors.empty else self.cursors.to_json(),
        }
        if self.epochs:
            body["epochs"] = self.epochs
        if self.level:  # and the commit time of its last transaction, for people reading it
            body.update(
                {
                    "level": self.level,
                    "last_batch": self.end_batch,
                    "last_time": utc_iso(self.txns[-1].time) if self.txns else None,
                }
            )
        return body

    def to_bytes(self) -> bytes:
        """The text of ``manifest.json``: :meth:`body` and its SHA-256 ``checksum``, sorted keys, UTF-8."""
        body = self.body()
        body["checksum"] = _digest(body)
        return json.dumps(body, indent=1, sort_keys=True).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes, source: str) -> "Manifest":
        """The manifest in the bytes of ``manifest.json``, checked (format, format version, checksum).

        Args:
            raw (bytes): the file's bytes.
            source (str): the file, named in errors.

        Returns:
            Manifest: the manifest.

        Raises:
            BatchError: not JSON, not a wlc batch manifest, another format version, a checksum
                mismatch, or a missing or malformed field.
        """
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BatchError(
                f"{source}: manifest is truncated or not JSON ({exc}); the batch is damaged: restore it from a copy"
            ) from exc
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise BatchError(f"{source}: not a {FORMAT} manifest")
        if body.get("format_version") != FORMAT_VERSION:
            raise BatchError(
                f"{source}: batch format version {body.get('format_version')!r} is not "
                f"supported (this wlr reads version {FORMAT_VERSION}); upgrade wlr"
            )
        claimed = body.pop("checksum", None)
        if claimed != _digest(body):
            raise BatchError(f"{source}: manifest checksum mismatch; the manifest was altered or damaged")
        try:
            return cls(
                database=body["database"],
                dbid=body["dbid"],
                batch=int(body["batch"]),
                watermark=parse_utc(body["watermark"]),
                created=parse_utc(body["created"]),
                txns=[TxnRecord.from_json(t) for t in body["txns"]],
                cursors=CaptureState.from_json(body.get("cursors") or {}),
                files={rel: FileEntry.from_json(e) for rel, e in (body.get("files") or {}).items()},
                level=int(body.get("level", 0)),
                last_batch=int(body["last_batch"]) if "last_batch" in body else None,
                span=(int(body["first_txn"]), int(body["last_txn"])) if body.get("level") else None,
                epochs=str(body.get("epochs") or ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BatchError(f"{source}: manifest lacks or mangles a field ({exc})") from exc


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


MANIFEST = "manifest.json"
STAGING_PREFIX = ".open-"

# the columns of a batch's change rows besides the table's own: the master Delta version a row
# comes from, and Delta's change type
VERSION_COLUMN = "wlc_version"
CHANGE_TYPE = "_change_type"
CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")  # Delta's _change_type values


def file_sha256(storage: Storage, path: str) -> tuple[int, str]:
    """``(size, SHA-256)`` of the file ``path``.

    Args:
        storage (Storage): the storage holding the file.
        path (str): the file.

    Returns:
        tuple[int, str]: its size in bytes and its SHA-256 as 64 hex digits.

    Raises:
        FileNotFoundError: ``path`` is not there.
    """
    with storage.open_read(path) as fh:
        try:  # hashlib's own loop, into one buffer (a quarter less on the small files of a batch)
            digest = hashlib.file_digest(fh, "sha256")  # type: ignore[arg-type]
            return fh.tell(), digest.hexdigest()
        except ValueError:  # a file object it does not take: read here
            fh.seek(0)
        h = hashlib.sha256()
        size = 0
        while chunk := fh.read(1 << 20):
            size += len(chunk)
            h.update(chunk)
    return size, h.hexdigest()


# ----------------------------------------------------------------------------- writing


# ----------------------------------------------------------------------------- reading


def read_manifest(storage: Storage, batch_path: str) -> Manifest:
    """Read and check a batch's manifest (:meth:`Manifest.from_bytes`: format, version, checksum).

    Args:
        storage (Storage): the storage holding the batch.
        batch_path (str): the batch's folder.

    Returns:
        Manifest: the manifest.

    Raises:
        BatchError: the manifest is missing or damaged.
    """
    try:
        raw = storage.read_bytes(Storage.join(batch_path, MANIFEST))
    except FileNotFoundError as exc:
        raise BatchError(f"{batch_path}: manifest.json is missing; the batch is damaged") from exc
    return Manifest.from_bytes(raw, batch_path)


def verify_files(
    storage: Storage, batch_path: str, manifest: Manifest, prefixes: Iterable[str] | None = None
) -> dict[str, str]:
    """Check listed files (all, or those under ``prefixes``) against size and SHA-256.

    Args:
        storage (Storage): the storage holding the batch.
        batch_path (str): the batch's folder.
        manifest (Manifest): its manifest (:func:`read_manifest`).
        prefixes (Iterable[str] | None): folders relative to the batch (``rows/s.t``) to check
            only; None: every listed file.

    Returns:
        dict[str, str]: ``{relative path: problem}``, empty when everything is intact. Files present
        under a checked prefix but not listed count as problems too (they would be read).
    """
    prefixes = list(prefixes) if prefixes is not None else None
    if prefixes is None:
        listed: Iterable[str] = manifest.files
    else:  # each file once, however many of its folders are checked
        listed = dict.fromkeys(rel for p in prefixes for rel in manifest.listed_under(p))
    problems: dict[str, str] = {}
    for rel in listed:
        entry = manifest.files[rel]
        path = Storage.join(batch_path, rel)
        try:
            size, digest = file_sha256(storage, path)
        except FileNotFoundError:
            problems[rel] = "missing"
            continue
        if size != entry.size:
            problems[rel] = f"size {size} bytes, expected {entry.size} (truncated or extended)"
        elif digest != entry.sha256:
            problems[rel] = "SHA-256 mismatch"
    for prefix in prefixes or []:
        for rel in storage.walk_files(Storage.join(batch_path, prefix)):
            full = f"{prefix.rstrip('/')}/{rel}"
            if full not in manifest.files and not rel.rsplit("/", 1)[-1].startswith("."):
                problems[full] = "not listed in the manifest (added after publishing)"
    return problems


class SpanCache:
    """The spans of one log folder's batches, every level (thread-safe).

    Args:
        storage: the storage holding the folder.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._known: dict[str, Span] = {}
        self._lock = threading.Lock()

    def span(self, path: str) -> Span:
        """The span of the published batch at ``path`` (its manifest read the first time).

        Raises:
            BatchError: the manifest is missing or damaged.
        """
        with self._lock:
            known = self._known.get(path)
        if known is None:
            known = Span.of(read_manifest(self.storage, path), path)
            with self._lock:
                self._known[path] = known
        return known

    def spans(self, found: list[str]) -> list[Span]:
        """The spans of the published batches at ``found``, in that order (a log folder's
        batches as :class:`wlcore.logstore.LogStore` lists them: level 0 ascending, then
        compacted batches by first batch); batches no longer there are forgotten.

        Args:
            found (list[str]): the batches' folders, every batch of the log folder.

        Raises:
            BatchError: a manifest is missing or damaged.
        """
        with self._lock:
            for gone in set(self._known) - set(found):
                del self._known[gone]
        return [self.span(p) for p in found]

    def forget(self, path: str) -> None:
        """Forget the batch at ``path`` (deleted)."""
        with self._lock:
            self._known.pop(path, None)
