"""Capture's state: its position in each master table, and a transaction found by a scan.

The state is saved in every published batch's manifest (``cursors``), so capture resumes
after a restart from the newest batch: nothing lost, nothing repeated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .deltalog import Commit, TableMeta, list_versions, metadata_at, read_commit
from .storage import Storage


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
        versions = list_versions(storage, path)
        if not versions:
            return None
        version = versions[-1]
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
    gap: str | None = None  # why the change feed cannot describe this version (see wlc.changes)
    committed: datetime | None = None  # captured late (wlc.holds): the commit time; ``time`` is its place in order
    cursor: "Cursor | None" = None  # the table's cursor just after this transaction
    stable: int | None = None  # the last version with the same rows (the versions after change no data)

    @classmethod
    def gap_of(cls, table: str, commit: Commit, meta: TableMeta | None, gap: str | None, cursor: Cursor) -> Planned:
        """A version that changed data but that neither the change feed nor an image can
        describe (its commits were removed by log clean-up): a transaction with no change,
        ``gap`` saying why, so replay stops there loudly (:mod:`wlc.changes`).

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
