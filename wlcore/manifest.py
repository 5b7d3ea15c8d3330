"""A batch's manifest (``manifest.json``): what the batch holds, typed, read and written in one place.

:class:`Manifest` is the manifest: the batch's transaction records (:class:`TxnRecord`), its
files with their size and SHA-256, and capture's state after it
(:class:`wlcore.capture_state.CaptureState`); :meth:`Manifest.to_bytes` writes it and
:meth:`Manifest.from_bytes` reads and checks it. Instants are ISO-8601 UTC (:func:`wlcore.utc.utc_iso`,
:func:`wlcore.utc.parse_utc`). :mod:`wlcore.batch` publishes, lists and verifies batches.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime

from .capture_state import CaptureState
from .errors import BatchError
from .utc import parse_utc, utc_iso, utcnow
from .version import FORMAT_VERSION

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
    operations (:mod:`wlcore.alter`), which replay applies without an image. ``gap`` (written
    only when set): why the change feed could not describe this version (its change files
    were vacuumed, its commit removed by log clean-up): the record has no rows, or the
    table's image where Delta could still rebuild that version. ``committed`` (written only
    when set): the transaction was captured late (its table could not be read for a while,
    :mod:`wlc.holds`); ``time`` is its place in the order of transactions and this its
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
    written as its JSON (:meth:`wlcore.capture_state.CaptureState.to_json`; an empty state as ``{}``).

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
