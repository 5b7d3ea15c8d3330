"""Capture: turn committed Delta versions of the master's tables into transaction records.

A scan lists the master's tables (``<db>/<schema>/<table>/_delta_log``, schema ``tmp``
excluded), reads the JSON commits after each table's cursor, and classifies each version
(:func:`classify`: ``create``, ``alter``, ``cdf`` change rows, the table's ``image``, or no
transaction); a table whose log disappeared is a ``drop``.

What a committed version is as a transaction (:func:`classify`, pure rules over a commit and the
table's definitions before and after it):

* a new table's first commit -> ``create`` (with its metadata); a change of what defines the
  table (:func:`wlcore.tabledef.definition`: its metadata, or its protocol's table features) ->
  ``alter``, with the ALTER TABLE operations that make it (:mod:`wlcore.tabledef`), or the table's
  image where there are none;
* a version with ``dataChange`` actions -> ``cdf`` when the Change Data Feed was on at that
  version, else ``image`` (correctness first);
* anything else (OPTIMIZE, VACUUM, REORG) -> not a transaction.

Versions are taken in commit-time order across tables (Delta's time-travel times:
In-Commit Timestamps, else commit file times made increasing per table) and only once they
are ``settle`` seconds old, so transaction ids follow commit time and a batch's watermark
is exact. Commits log clean-up removed before capture read them are met as a hole: the
first version Delta can rebuild is carried by the table's image, the ones before by gap
notes. A table whose log cannot be read is held (:class:`Holds`); the others go on.
Change rows are read by Spark (:class:`Copier`: one change-feed read per table and run
of versions sharing a schema, written as Parquet partitioned by version) straight into the
open batch's staging folder: no row passes through Python.

Tables capture holds back (:class:`Holds`): one table that cannot be read never stops capture of
the others. A table whose commits or rows cannot be read (a corrupt or missing file, a permission
error, a damaged commit) is *held*: its cursor stays where it was, the other tables'
transactions go on being published, and it is read again with backoff (the poll interval,
doubling up to ``capture.retry_max`` seconds), as PostgreSQL's apply worker retries.
``wlc status``, ``wlc.log`` and the ``wlc.master`` log name it with its cause.

The watermark: while a table is held, every published watermark stays before its first
commit not yet read (or, when its log itself cannot be read, before the last moment it was
read completely), so no replay by instant passes a commit capture has not seen. Once the
table can be read again its transactions are published with the next ids. Those
committed before transactions already published are *captured late* (:func:`place_in_order`):
their ``time`` is their place in the order of publication (just after the transaction published
before them) and their ``committed`` keeps the commit time. Ids and times therefore stay in one
order, and replay refuses an instant between a late transaction's commit and its place (no exact
state of the master exists in its replica there); every other instant stays a consistent cut.

A hole (:func:`start_after`) is a run of versions whose commit files Delta's log clean-up
(``delta.logRetentionDuration``) removed before capture read them: the change feed cannot describe
them, so the first version Delta can still rebuild (from a checkpoint) is carried by the table's
image and the versions before it by gap notes.

Copying staged transactions' change rows (:class:`Copier`): each version is read with the schema
it was written with. Delta's batch change feed reads with the table's latest schema, which cannot
read versions from before a non-additive schema change (type widening, a replaced table, a dropped
or renamed column), so each read covers a run of adjacent versions that share their read schema
(at most :data:`RUN_VERSIONS`) and is pinned to the run's last version with ``versionAsOf``
(Delta's ``legacy`` batch schema mode, on a session of capture's own). Rows are written as
Parquet partitioned by version and counted while they are written (a Spark ``Observation``).

What the change feed cannot describe is carried otherwise, loudly, never lost in silence:

* change files removed by VACUUM before capture read them: the table's full image at the
  run's last version (or, when VACUUM took that too, at the next version that can be
  read); the transactions before it carry a *gap* note instead of rows;
* a table dropped before its rows were copied: the records say the rows are lost;
* any other failure reading one table (a corrupt file, a permission error) raises
  :class:`TableUnreadable` for that table only; capture keeps its transactions *pending*
  and retries, the other tables' rows are written.

Change rows copied through delta-rs (the ``deltalake`` package, ``capture.deltars``;
:func:`deltars_copy`), with no Spark job: Spark copies a run of versions' change rows with one
job a table (the change feed's plan, Delta's state rebuilt, the write); on 2 cores shared with the
master's writers that is about a second a table a beat, most of what a follower waits for.
delta-rs reads the same change feed (the change-data files where a commit has them, else its added
and removed files) in tens of milliseconds in the capturing process, and the rows are written as
Spark writes them: Parquet files below ``rows/<table>/wlc_version=<v>/``, with the table's columns
and ``_change_type``. Used only where delta-rs reads a table's change feed as Spark's reader does
(:func:`deltars_refusal`): the master on local or mounted folders; tables not partitioned, without
column mapping, deletion vectors or type widening (protocol features append-only, invariants,
CHECK constraints, change feed, generated and identity columns, ``TIMESTAMP_NTZ``); columns of
flat types but TIMESTAMP (Spark writes it as INT96, which delta-rs reads through nanoseconds: an
instant before 1678 or after 2261 would wrap in silence; ``TIMESTAMP_NTZ`` is written in
microseconds and is read exactly); every commit of the run still in the log. Anything else, and
any failure of delta-rs (a file VACUUM removed, a table dropped), leaves the run to Spark, which
tells those cases apart. pyarrow and deltalake are imported by the first copy, not by ``wlc status``.

An idle master's capture scans every table at every wake-up; listing each ``_delta_log`` costs
more the more tables and commit files there are. :class:`QuietLogs` tells the tables whose log has
not changed since capture last read it by one look at the log folder: on local folders a folder's
modification time changes whenever a file is made, renamed or removed in it, so a table whose log
folder has the stat it had when it was listed, and whose cursor is at the last version that listing
found, has nothing new. A folder modified less than two seconds before it was listed is listed
again, as git treats "racily clean" index entries (a file made within the same clock tick leaves
the time as it was). Used only where capture is woken by the operating system's events (local
folders, not ``capture.polling``): on network filesystems and object stores every scan lists
every log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from wlcore import tabledef
from wlcore.batch import (  # noqa: F401 (re-exported)
    CHANGE_TYPE,
    CHANGE_TYPES,
    VERSION_COLUMN,
    CaptureState,
    Cursor,
    Planned,
)
from wlcore.deltalog import (  # noqa: F401 (re-exported)
    NOT_REPLICATED_SCHEMAS,
    RESERVED,
    Commit,
    TableMeta,
    commit_digest,
    commit_file,
    delta_ref,
    delta_rs_refusal,
    discover_tables,
    list_versions,
    log_path,
    meta_after,
    metadata_at,
    monotonic,
    read_commit,
    readable_from,
    table_path,
    versions_after,
)
from wlcore.errors import first_line
from wlcore.names import batch_folder, quote_ident
from wlcore.settings import settings
from wlcore.storage import FileStat, Storage

if TYPE_CHECKING:
    import pyarrow as pa  # imported by the first copy through delta-rs, not by `wlc status`

    from .master_record import MasterRecord

RACY_MS = 2000  # a log folder modified less than this before its listing is listed again


# ---------------------------------------------------------------------- what a commit is
def shape_changed(old: TableMeta | None, new: TableMeta) -> bool:
    """True when ``new`` defines the table otherwise than ``old`` (:func:`wlcore.tabledef.definition`).

    Args:
        old (TableMeta | None): the definition before (None: not known: changed).
        new (TableMeta): the definition after.
    """
    return old is None or old.shape() != new.shape()


def added_columns(old: TableMeta | None, new: TableMeta) -> list[str]:
    """The columns ``new`` only adds to ``old``: appended at the end, nullable, without a
    comment, default, generation or identity, with everything else of the definition unchanged.
    Such an ALTER is what replay can land inside a segment's commit (rows before it have no
    value for the new columns, exactly as ``ADD COLUMNS`` leaves them).

    Args:
        old (TableMeta | None): the definition before (None: not known).
        new (TableMeta): the definition after.

    Returns:
        list[str]: their names; ``[]`` when anything else changed (or nothing was added).
    """
    if old is None:
        return []
    a, b = old.shape(), new.shape()
    of, nf = a.pop("columns"), b.pop("columns")
    if a != b or len(nf) <= len(of) or nf[: len(of)] != of:
        return []
    added = nf[len(of) :]
    if any(set(f) != {"name", "type", "nullable"} or not f["nullable"] for f in added):
        return []
    return [f["name"] for f in added]


def classify(
    name: str,
    commit: Commit,
    meta: TableMeta | None,
    first: bool,
    read_meta: Callable[[int], TableMeta],
    image: str | None = None,
) -> tuple[Planned | None, TableMeta | None]:
    """The transaction ``commit`` is, and the table's definition after it.

    Args:
        name: the table, ``schema.table``.
        commit: the committed version, as read from the table's log.
        meta: the table's definition before ``commit`` (None: not known, a new table).
        first: ``commit`` is the first version capture reads of this table.
        read_meta: ``read_meta(version)``, the table's full definition at a version (read anew
            for a first version, or after a hole in its log).
        image: ``"always"``: carry the version by the table's image; ``"if_change"``: so, when
            it changes data or definition; None: as the change feed says.

    Returns:
        ``(planned, meta after)``: ``planned`` is None when the version is no transaction.
    """
    if first or image == "always":
        new_meta: TableMeta | None = read_meta(commit.version)
    elif commit.metadata is None and not commit.clustering_changed and commit.protocol is None:
        new_meta = None
    else:
        new_meta = meta_after(meta, commit)
    ddl = None
    change = None
    ops = None
    if new_meta is not None and (first or shape_changed(meta, new_meta)):
        ddl = "create" if first or meta is None else "alter"
    current = new_meta or meta
    if commit.data_change:
        change = "cdf" if current is not None and current.change_feed else "image"
    if ddl == "alter":
        ops = tabledef.diff(meta, new_meta)
        if ops is None:
            change = "image"  # no ALTER TABLE form: replay rebuilds the table from the image
    if first and commit.version > 0:
        change = "image"  # history before this version is gone: start from the table's image
    if image == "always" or (image and (change is not None or ddl is not None)):
        change = "image"
    if ddl is None and change is None:
        return None, current
    adds = tuple(added_columns(meta, new_meta)) if ddl == "alter" and new_meta is not None and change != "image" else ()
    planned = Planned(
        name,
        commit.timestamp,
        commit.version,
        commit.operation,
        ddl,
        change,
        current,
        commit.user,
        adds,
        ops if change != "image" else None,
    )
    return planned, current


# ---------------------------------------------------------------------- tables held back
_EPS = timedelta(microseconds=1)


@dataclass
class Hold:
    """A held table: ``cause``, held ``since`` (UTC), the watermark stays before ``bound``
    (None: no bound known), ``attempts`` made, next attempt at ``next_try`` (monotonic s)."""

    table: str
    cause: str
    since: datetime
    bound: datetime | None
    attempts: int = 1
    next_try: float = 0.0
    next_at: datetime | None = None  # the next attempt as a UTC instant (for status)
    kind: str = "log"  # what could not be read: "log" (released by a scan) or "rows" (by a write)


class Holds:
    """The held tables of one capture, with their backoff (PostgreSQL's apply worker retries the same way).

    Args:
        interval (float): seconds before the first retry (at least 0.05); doubled at each attempt.
        longest (float): the longest wait between two attempts, seconds (``capture.retry_max``).
    """

    def __init__(self, interval: float, longest: float):
        self.interval, self.longest = max(interval, 0.05), max(longest, interval)
        self.held: dict[str, Hold] = {}

    def hold(self, table: str, cause: str, bound: datetime | None, now: datetime, kind: str = "log") -> Hold:
        """Hold ``table`` (again), its next attempt after the backoff.

        Args:
            table (str): the table's qualified name.
            cause (str): why it cannot be read, one line.
            bound (datetime | None): the watermark (UTC) stays before it (None: no bound known; a
                hold again keeps the earlier bound).
            now (datetime): the current instant (UTC): held ``since`` on the first hold.
            kind (str): what could not be read, ``"log"`` (its commits: a scan that reads them
                releases it) or ``"rows"`` (its change rows: only a write of them releases it).

        Returns:
            Hold: the hold.
        """
        old = self.held.get(table)
        if old is not None:
            bound = old.bound if bound is None or (old.bound is not None and old.bound < bound) else bound
        attempts = old.attempts + 1 if old else 1
        wait = min(self.interval * 2 ** (attempts - 1), self.longest)
        hold = Hold(
            table,
            cause,
            old.since if old else now,
            bound,
            attempts,
            time.monotonic() + wait,
            now + timedelta(seconds=wait),
            kind,
        )
        self.held[table] = hold
        return hold

    def due(self, table: str) -> bool:
        """True when ``table`` is not held, or its next attempt is due.

        Args:
            table (str): the table's qualified name.
        """
        hold = self.held.get(table)
        return hold is None or time.monotonic() >= hold.next_try

    def release(self, table: str, kind: str | None = None) -> bool:
        """The table was read again: release it when what held it was read.

        Args:
            table (str): the table's qualified name.
            kind (str | None): what was read: its log (``"log"``), its rows (``"rows"``), or None:
                whatever held it.

        Returns:
            bool: True when that released it.
        """
        hold = self.held.get(table)
        if hold is None or (kind is not None and hold.kind != kind):
            return False
        del self.held[table]
        return True

    def watermark(self, watermark: datetime) -> datetime:
        """``watermark`` kept before every held table's bound (1 microsecond before the earliest).

        Args:
            watermark (datetime): the watermark capture would publish (UTC).

        Returns:
            datetime: the watermark to publish.
        """
        bounds = [h.bound for h in self.held.values() if h.bound is not None]
        return min([watermark] + [b - _EPS for b in bounds])

    def status(self) -> dict[str, str]:
        """``{table: text}`` for status: the cause, since when, the attempts and the next one."""
        return {
            t: (
                f"{h.cause} (held since {h.since.isoformat()}, {h.attempts} attempt"
                f"{'s' if h.attempts != 1 else ''}, next at {h.next_at.isoformat() if h.next_at else '-'})"
            )
            for t, h in sorted(self.held.items())
        }


def place_in_order(items: list, last: datetime | None) -> None:
    """Give ``items`` times that never go back: an item committed before ``last`` (the
    transaction published or staged before it) or before the item ahead of it takes the time
    just after, keeping its commit time in ``committed`` (it is captured late).

    Args:
        items (list[Planned]): planned transactions, in the order they get their ids; changed in place.
        last (datetime | None): the time of the last transaction published or staged (UTC; None: none).
    """
    for item in items:
        if last is not None and item.time < last:
            item.committed = item.committed or item.time
            item.time = last + _EPS
        last = item.time


# ---------------------------------------------------------------------- reading the logs


class QuietLogs:
    """Which tables' logs are unchanged since capture read them up to their cursor.

    Args:
        storage (Storage): the storage holding the master.
    """

    def __init__(self, storage: Storage):
        self.storage = storage
        self.on = False  # set by the owner: the log folders' modification times can be trusted
        self._seen: dict[str, tuple[FileStat, int]] = {}  # {table: (its log folder's stat, the last version then)}
        self._looked: dict[str, tuple[FileStat, float]] = {}  # {table: (the stat just taken, when, ms)}

    def unchanged(self, name: str, path: str, version: int) -> bool:
        """True when table ``name``'s log is as it was when a listing found ``version`` its last.

        Args:
            name (str): the table (``schema.table``).
            path (str): its folder.
            version (int): its cursor (the last version capture has read).

        Returns:
            bool: True: nothing to list; False: list its log (then call :meth:`listed`).
        """
        if not self.on:
            return False
        try:
            stamp = self.storage.stat(log_path(path))
        except OSError:
            self._seen.pop(name, None)
            return False
        if self._seen.get(name) == (stamp, version):
            return True
        self._looked[name] = (stamp, time.time() * 1000)
        return False

    def listed(self, name: str, versions: list[int]) -> None:
        """Record what a listing of table ``name``'s log found, after :meth:`unchanged` said False.

        Args:
            name (str): the table.
            versions (list[int]): the versions the listing found, ascending.
        """
        stamp, when = self._looked.pop(name, (None, 0.0))
        if stamp is not None and stamp.mtime_ms is not None and versions and stamp.mtime_ms < when - RACY_MS:
            self._seen[name] = (stamp, versions[-1])
        else:
            self._seen.pop(name, None)


class NoCheckpointYet(Exception):
    """No version after a hole can be read yet: a checkpoint must come first. The message is
    the note capture keeps for the table."""


def start_after(
    storage: Storage, name: str, path: str, cur: Cursor | None, versions: list[int]
) -> tuple[int, str | None, int | None]:
    """Where planning of table ``name`` starts after its cursor, across a hole if there is one.

    Args:
        storage (Storage): the storage holding the master.
        name (str): the table's qualified name, for the texts.
        path (str): the table's folder.
        cur (Cursor | None): capture's cursor of the table (None: a table new to capture).
        versions (list[int]): the versions with a commit file, ascending (not empty).

    Returns:
        tuple[int, str | None, int | None]: the first version to plan, the hole's text and the
        first version Delta can rebuild after it (both None: no hole).

    Raises:
        NoCheckpointYet: no version after the hole can be read yet (no checkpoint covers it).
    """
    start = cur.version + 1 if cur else versions[0]
    have = set(versions)
    hole = None
    rebuild = None  # the first version after a hole that Delta can rebuild
    if (cur is None and versions[0] > 0) or (cur is not None and start <= versions[-1] and start not in have):
        rebuild = readable_from(storage, path, versions)
        if rebuild is None:
            raise NoCheckpointYet(
                f"no version of {name} after {start - 1} can be read: its commits were removed "
                "(log clean-up) and no checkpoint covers them yet; capture waits for one"
            )
        first_listed = min(v for v in versions if v >= start)
        if cur is not None:
            hole = (
                f"versions {start}..{first_listed - 1} of {name} were removed by log clean-up "
                f"(delta.logRetentionDuration) before capture read them"
            )
        else:
            hole = (
                f"capture first saw {name} at version {versions[0]}: its earlier commits were removed by "
                "log clean-up, and its state comes from a checkpoint"
            )
        rebuild = min(v for v in versions if v >= rebuild)  # its commit file may be gone too: the next one
        start = max(start, rebuild) if cur is None else start
    return start, hole, rebuild


log = logging.getLogger("wlc.capture")


class Capture:
    """Scans a master database and stages transaction records (no threads; the Master drives it).

    Args:
        spark (SparkSession): the session that reads change rows and checkpoints.
        record (MasterRecord): the master's record, read once here: its folder, the folders that
            are not schemas (the log folder inside it) and the watermark published before this
            capture began (``wlc.config``'s; none for a new master).
        state (CaptureState): capture's cursors (each table's last captured version).
        holds (Holds | None): the tables that cannot be read now (:class:`Holds`; None: new).
    """

    def __init__(self, spark, record: MasterRecord, state: CaptureState, holds: Holds | None = None):
        self.spark = spark
        self.storage = record.storage
        self.db_path = record.path
        self.state = state
        self.skip = record.skip_schemas()
        self._gone_since: dict[str, datetime] = {}
        self._first_sig: dict[str, tuple] = {}
        self._seen_sig: dict[str, tuple] = {}
        self._cursor_sig: dict[str, tuple] = {}  # {table: (a version a whole listing checked, its commit's look)}
        self.deferred = False
        self.refused: dict[str, str] = {}  # {path: reason} of Delta tables the last scan could not carry
        self.notices: dict[str, str] = {}  # {table: the last change-feed limit met there}
        self.new_notices: list[tuple[str, str]] = []  # (table, text) not yet told (the master logs them)
        self.copier = Copier(spark, self.storage, self.db_path, self.note)
        self.holds = holds or Holds(1.0, 60.0)  # tables that cannot be read now
        self.switched = 0  # tables capture switched a feature on in at the last scan (a commit of its own)
        self.floor = record.config.watermark_time  # the watermark published before this capture began
        self.complete: dict[str, datetime] = {}  # {table: the limit of the last scan that read it whole}
        self.taken_back: set[str] = set()  # tables whose transactions this scan took back (held for their rows)
        self.quiet = QuietLogs(self.storage)  # tables whose log is unchanged since it was read (off until set on)

    # ------------------------------------------------------------------ finding transactions
    def plan(self, limit: datetime | None, now: datetime) -> tuple[list[Planned], dict[str, Cursor]]:
        """Find new transactions committed at or before ``limit``; ``self.state`` is not changed
        (the caller commits the cursors once rows are written).

        Args:
            limit (datetime | None): the newest commit time (UTC) to take (None: all visible).
            now (datetime): the scan's instant (UTC).

        Returns:
            tuple[list[Planned], dict[str, Cursor]]: the planned transactions in commit order, and
            the cursors they lead to.
        """
        self.deferred = False
        self.taken_back = set()
        refused: dict[str, str] = {}
        tables = discover_tables(self.storage, self.db_path, self.skip, refused)
        self.refused = refused
        planned: list[Planned] = []
        cursors: dict[str, Cursor] = {}
        for name, path in tables.items():
            self._gone_since.pop(name, None)
            if not self.holds.due(name):
                continue  # held: its cursor stays, the watermark stays before it (Holds)
            found: list[Planned] = []
            try:
                cursor = self._scan(name, path, limit, now, found)
            except Exception as exc:  # noqa: BLE001 (this table only: the others go on)
                self.holds.hold(
                    name,
                    f"its log cannot be read: {type(exc).__name__}: {first_line(exc)}",
                    self.complete.get(name, self.floor),
                    now,
                )
                log.error("capture holds %s back: %s", name, exc)
                continue
            self.complete[name] = limit or now
            self.holds.release(name, "log")  # a table held for its rows is released once they are written
            planned.extend(found)
            if cursor is not None:
                cursors[name] = cursor
        for name in sorted(set(self.state.tables) - set(tables)):
            seen = self._gone_since.setdefault(name, now)
            if limit is not None and seen > limit:
                self.deferred = True
            else:
                planned.append(Planned(name, seen, None, "DROP TABLE", "drop", None, None))
                cursors[name] = None  # type: ignore[assignment]
        planned.sort(key=lambda p: (p.time, p.table, -1 if p.version is None else p.version))
        return planned, cursors

    def _scan(
        self, name: str, path: str, limit: datetime | None, now: datetime, planned: list[Planned]
    ) -> Cursor | None:
        """Plan one table's new transactions into ``planned``; returns its new cursor (None:
        nothing new). Raises whatever reading its log raises (the caller holds the table)."""
        cur = self.state.tables.get(name)
        if cur is not None and self.quiet.unchanged(name, path, cur.version):
            return None
        looked = cur is not None and name not in self._cursor_sig and self._resume(name, path, cur)
        since = self._listed_since(name, path, cur, looked) if cur is not None else None
        if cur is not None and since is not None:
            read_on = [cur.version, *since]
            self.quiet.listed(name, read_on)
            return self._scan_table(name, path, cur, read_on, limit, planned) if since else None
        versions = list_versions(self.storage, path)
        self.quiet.listed(name, versions)
        if not versions:
            return None
        first_sig = self._signature(path, versions[0])
        changed = self._first_sig.get(name) != first_sig
        self._seen_sig[name] = first_sig  # kept by advance(), once this scan's transactions are staged
        if cur is not None and (versions[-1] != cur.version or changed):
            # Same folder, other table? A table dropped and made again between two scans has a
            # first commit that carries none of the Delta table ids capture saw in its log (a
            # REPLACE TABLE gives a new id in the same log: that is still the same log). A log
            # that shrank with a known id is a table being deleted file by file: wait, the scan
            # that finds it gone records the drop.
            first_id = self._first_id(path, versions[0]) if changed else ""
            if first_id and cur.meta is not None and first_id not in cur.known_ids():
                if self._same_log(path, cur, versions):
                    cur = replace(cur, ids=cur.with_ids(first_id))  # an id from before capture's cursor
                else:
                    try:
                        # the clock its versions are planned by (the file's time where it has no
                        # In-Commit Timestamp: whole seconds on S3, before commitInfo's milliseconds)
                        born = read_commit(self.storage, path, versions[0], file_time=True).timestamp
                    except FileNotFoundError:
                        self.deferred = True
                        return None
                    drop_time = min(now, born - timedelta(microseconds=1))
                    made = [Planned(name, drop_time, None, "DROP TABLE", "drop", None, None)]
                    cursor = self._scan_table(name, path, None, versions, limit, made)
                    if cursor is None:  # the new table's first version is not taken yet: the drop waits with it
                        self.deferred = True  # (planned alone, each scan until then planned it again)
                        return None
                    planned.extend(made)
                    return cursor
            if versions[-1] < cur.version:
                self.deferred = True
                return None
            self._first_sig[name] = first_sig  # the same table: no need to look again
        if cur is not None:  # the log read up to the cursor, as listed whole: later scans list from it
            self._cursor_sig[name] = (cur.version, self._signature(path, cur.version))
        return self._scan_table(name, path, cur, versions, limit, planned)

    def _resume(self, name: str, path: str, cur: Cursor) -> bool:
        """A table's first scan by this capture session, from a cursor an earlier one left: True
        (the cursor's commit file looked at just now) when that file holds the text that session
        read (its digest): the log is the one read and is listed from the cursor on
        (:meth:`_listed_since`: one HEAD, one GET and one listing after the cursor instead of the
        whole log: on S3 one request for every thousand files). False: other text, or none; the
        whole listing tells what happened."""
        if not cur.digest:
            return False  # a cursor capture did not read to (a snapshot's, a promoted replica's, an older one)
        look = self._signature(path, cur.version)  # first: a file replaced before the read is read as
        try:  # another text; one replaced after it has another look than this at the next scan
            text = self.storage.read_text(commit_file(path, cur.version))
        except FileNotFoundError:
            return False
        if look[1] is None or commit_digest(text) != cur.digest:
            return False
        self._cursor_sig[name] = (cur.version, look)
        return True

    def _listed_since(self, name: str, path: str, cur: Cursor, looked: bool = False) -> list[int] | None:
        """The versions of table ``name`` after its cursor, listed from the cursor's commit on
        (:meth:`wlcore.storage.Storage.listdir_after`: on S3 one request, not one for every
        thousand files of a long log; a local folder is listed as before), when
        the commit file a whole listing last checked (at or before the cursor) is still the one
        found then: the same log, read on since (a table made again has other commit files).
        None: list the log whole (a first scan, a table made again or dropped, log clean-up past
        that commit, a hole after the cursor). ``looked``: that commit file was looked at just now
        (:meth:`_resume`), not again."""
        seen = self._cursor_sig.get(name)  # a version a whole listing found, read since as this log's
        if seen is None or seen[0] > cur.version or seen[1][1] is None:
            return None
        if not looked and self._signature(path, seen[0]) != seen[1]:
            return None
        if seen[0] < cur.version:  # read on to the cursor: its commit is the next scan's to look at
            here = self._signature(path, cur.version)
            if here[1] is None:  # gone: a log being deleted file by file (the whole listing waits)
                return None
            self._cursor_sig[name] = (cur.version, here)
        since = versions_after(self.storage, path, cur.version)
        if since and since[0] != cur.version + 1:
            return None  # a hole: the whole listing finds the version Delta can rebuild from
        return since

    def _first_id(self, path: str, version: int) -> str:
        """The Delta table id in force at ``version`` (the log's first; from the checkpoint where log
        clean-up removed the commits), "" when nothing holds that version any more."""
        first = metadata_at(self.storage, path, version)
        return first.table_id if first is not None else ""

    def _same_log(self, path: str, cur: Cursor, versions: list[int]) -> bool:
        """Whether the log at ``path`` is the one capture read up to ``cur.version``, when its
        first commit carries a table id capture did not see (a cursor written before capture
        kept the ids, or a table capture first read after a REPLACE TABLE): the table id in force
        at ``cur.version`` is the cursor's. A log shorter than the cursor is another table's."""
        if versions[-1] < cur.version or cur.meta is None:
            return False
        here = self.meta_at(path, cur.version)
        return here.table_id == cur.meta.table_id

    def _signature(self, path: str, version: int) -> tuple:
        """(version, mtime, size, tag) of a table's commit file (tag: its ETag on object stores): changes
        when the table is made anew."""
        try:
            st = self.storage.stat(commit_file(path, version))  # one look (one HEAD on S3)
        except FileNotFoundError:
            return (version, None, None, None)
        return (version, st.mtime_ms, st.size, st.tag)

    def _scan_table(
        self,
        name: str,
        path: str,
        cur: Cursor | None,
        versions: list[int],
        limit: datetime | None,
        planned: list[Planned],
    ) -> Cursor | None:
        """Plan the versions of one table after ``cur`` (None: a table new to capture),
        committed at or before ``limit``; returns the cursor they lead to (None: nothing new).

        Versions whose commit files log clean-up removed before capture read them (a hole
        after the cursor), and versions Delta can no longer rebuild because of it, are not
        described by the change feed: the first version Delta can rebuild (from a
        checkpoint) is carried by the table's image, the versions between by gap notes.
        """
        found = self._hole(name, path, cur, versions)
        if found is None:
            return None
        start, hole, rebuild = found
        meta = cur.meta if cur else None
        last_time = cur.time if cur else None
        force = cur.force if cur else None
        feed_off = cur.feed_off if cur else False
        ids = cur.with_ids() if cur else ()  # the table ids of this log capture saw (REPLACE TABLE makes new ones)
        new_cursor = None
        for v in versions:
            if v < start:
                continue
            try:
                commit = read_commit(self.storage, path, v, file_time=True)
            except FileNotFoundError:
                break  # dropped while we read: the next scan records the drop
            monotonic(commit, last_time)
            if limit is not None and commit.timestamp > limit:
                self.deferred = True
                break
            last_time = commit.timestamp
            first = cur is None and new_cursor is None
            if rebuild is not None and v < rebuild:  # not rebuildable: neither the feed nor an image
                new_cursor = Cursor(v, meta, last_time, hole, feed_off, ids, commit.digest)
                if commit.data_change:
                    planned.append(Planned.gap_of(name, commit, meta, hole, new_cursor))
                continue
            imaged = rebuild is not None and v == rebuild
            item, new_meta = self._classify(
                name, path, commit, meta, first=first, image="always" if imaged else "if_change" if force else None
            )
            if item is not None and (imaged or (force and item.change)):
                item.gap = hole if imaged else force
                if imaged:
                    self.note(name, f"{hole}; the table is carried by its image at version {v}")
                force = None
            feed_off = self._feed_after(name, v, meta, new_meta, feed_off)
            meta = new_meta
            if meta is not None and meta.table_id and meta.table_id not in ids:
                ids = tuple(sorted({*ids, meta.table_id}))
            new_cursor = Cursor(v, meta, last_time, force, feed_off, ids, commit.digest)
            if item is not None:
                item.cursor = new_cursor
                planned.append(item)
        mine = [p for p in planned if p.table == name and p.version is not None]
        if mine:  # each keeps the same rows up to the version before the next one
            assert new_cursor is not None  # an item is planned with the cursor after it
            stable = [p.version - 1 for p in mine[1:] if p.version is not None] + [new_cursor.version]
            for here, last in zip(mine, stable):
                here.stable = last
        return new_cursor

    def _feed_after(self, name: str, version: int, meta: TableMeta | None, new: TableMeta | None, off: bool) -> bool:
        """Whether the change feed of ``name`` is off after ``version`` by a user's choice (``meta``
        before it, ``new`` its definition when it changed one, ``off``: so before it): switched off,
        or made with ``delta.enableChangeDataFeed = false`` set; noted either way (capture then
        never switches it on: its writes are carried by images)."""
        if new is None:
            return off
        if new.change_feed:
            return False
        how = None
        if meta is not None and meta.change_feed:
            how = "was switched off"
        elif not off and tabledef.feed_switched_off(new):
            how = "is set off (delta.enableChangeDataFeed = false)"
        if how is None:
            return off
        self.note(
            name,
            f"the change feed of {name} {how} at version {version}: every write to it is "
            "carried by the table's full image until it is on again "
            f"(ALTER TABLE ... SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true'))",
        )
        return True

    def _hole(
        self, name: str, path: str, cur: Cursor | None, versions: list[int]
    ) -> tuple[int, str | None, int | None] | None:
        """:func:`wlc.capture.start_after`; None (noted, the scan deferred) while no checkpoint
        lets a version after the hole be read."""
        try:
            return start_after(self.storage, name, path, cur, versions)
        except NoCheckpointYet as wait:
            self.deferred = True
            self.note(name, str(wait))
            return None

    def note(self, table: str, text: str) -> None:
        """Keep a change-feed limit met on ``table`` (status, wlc.log, a warning), once per text.

        Args:
            table (str): the table's qualified name.
            text (str): what was met and how it was carried.
        """
        if self.notices.get(table) != text:
            self.notices[table] = text
            self.new_notices.append((table, text))

    def take_notices(self) -> list[tuple[str, str]]:
        """The change-feed limits met since the last call, ``(table, text)``."""
        out, self.new_notices = self.new_notices, []
        return out

    def _classify(
        self, name: str, path: str, commit: Commit, meta: TableMeta | None, first: bool, image: str | None = None
    ) -> tuple[Planned | None, TableMeta | None]:
        """The transaction ``commit`` is (None: none) and the metadata after it (:func:`classify`)."""

        def read_meta(version: int) -> TableMeta:
            return self.meta_at(path, version)

        return classify(name, commit, meta, first, read_meta, image)

    def start_cursor(self, path: str) -> tuple[Cursor, TableMeta]:
        """A cursor at the table's newest version: where capture starts in a table that a snapshot copies.

        Args:
            path (str): the table's folder.

        Returns:
            tuple[Cursor, TableMeta]: the cursor (version, metadata, commit time) and the definition there.
        """
        cursor = Cursor.newest(self.storage, path)
        if cursor is None:
            raise FileNotFoundError(f"{path} holds no Delta commit")
        if cursor.meta is None:  # only a checkpoint holds it
            cursor.meta = self.meta_at(path, cursor.version)
        return cursor, cursor.meta

    def meta_at(self, path: str, version: int) -> TableMeta:
        """The table's metadata at ``version`` (:func:`wlcore.deltalog.metadata_at`: its commits,
        else the checkpoint log clean-up left).

        Args:
            path (str): the table's folder.
            version (int): the Delta version.

        Raises:
            FileNotFoundError: neither its commits nor a checkpoint hold that version.
        """
        meta = metadata_at(self.storage, path, version)
        if meta is None:
            raise FileNotFoundError(
                f"version {version} of the Delta table at {path} cannot be read: its commits and checkpoint are gone"
            )
        return meta

    # ------------------------------------------------------------------ writing change rows
    def write_rows(self, staging: str, items: list[Planned]) -> Written:
        """Write the change rows of ``items`` into ``staging`` (:meth:`Copier.write`).

        Args:
            staging (str): the open batch's staging folder.
            items (list[Planned]): the staged transactions whose rows to copy.
        """
        return self.copier.write(staging, items)

    def enable_capture_properties(self, cursors: dict[str, Cursor]) -> None:
        """Switch on what capture may switch on (``capture.table_features``,
        :func:`wlcore.tabledef.switch_on`) on tables that lack it; a change feed a user switched
        off stays off (its writes are carried by images). A commit of capture's own is
        marked ``wlc: switch on ...`` in its ``userMetadata``; a failure is logged and tried again.

        Args:
            cursors (dict[str, Cursor]): the tables scanned, by name, with their cursors.
        """
        wanted = tabledef.switch_on()
        self.switched = 0
        for name, cur in cursors.items():
            if cur is None or cur.meta is None or name in self.holds.held:
                continue
            missing = {k: v for k, v in wanted.items() if cur.meta.configuration.get(k) != v}
            if cur.feed_off or tabledef.feed_switched_off(cur.meta):
                missing.pop(tabledef.CHANGE_FEED, None)
            if not missing:
                continue
            uri = self.storage.uri(table_path(self.db_path, name))
            try:
                tabledef.enable(self.copier.spark, delta_ref(uri), missing)
                self.switched += 1
                log.info("switched on %s for %s", ", ".join(missing), name)
            except Exception as exc:  # noqa: BLE001 (a concurrent writer won: try again next scan)
                log.warning("could not switch on %s for %s yet: %s", ", ".join(missing), name, exc)

    def advance(self, cursors: Mapping[str, Cursor | None]) -> None:
        """Move the cursors of the tables whose transactions are staged (a table whose
        transactions this scan took back keeps its own).

        Args:
            cursors (Mapping[str, Cursor | None]): the new cursors (None: the table was dropped).
        """
        for name, cur in cursors.items():
            if name in self.taken_back:
                continue
            if cur is None:
                self.state.tables.pop(name, None)
                self._gone_since.pop(name, None)
                self._first_sig.pop(name, None)
                self._cursor_sig.pop(name, None)
            else:
                self.state.tables[name] = cur
                if name in self._seen_sig:
                    self._first_sig[name] = self._seen_sig[name]


# ---------------------------------------------------------------------- copying change rows
RUN_VERSIONS = 64  # versions a change-feed read may cover (each adds four counters to the write's observation)
# Spark and Delta's words for a file that is not there (removed by VACUUM, or by hand)
_MISSING = re.compile(
    r"FileNotFound|FILE_NOT_EXIST|DELTA_CHANGE_DATA_FILE_NOT_FOUND|No such file|does not exist", re.IGNORECASE
)


def _why(missing: str) -> str:
    """What removed the files: log clean-up says so; a file not found is VACUUM's doing."""
    return missing if "log clean-up" in missing else f"VACUUM: {missing}"


class TableUnreadable(Exception):
    """One table's rows could not be read for a reason of that table (a corrupt file, a
    permission error).

    Args:
        table (str): the table's qualified name (kept as ``table``).
        cause (str): why, one line (kept as ``cause``).
    """

    def __init__(self, table: str, cause: str):
        super().__init__(f"{table}: {cause}")
        self.table, self.cause = table, cause


@dataclass
class Written:
    """What :meth:`Copier.write` made of the items: by item index, the rows' path in the
    batch, the counts by change type, why rows are lost, and the tables left unread."""

    rows: dict[int, str] = field(default_factory=dict)
    counts: dict[int, dict[str, int]] = field(default_factory=dict)
    lost: dict[int, str] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # {table: cause}: its items stay pending


def read_shape(meta) -> str:
    """What a change-feed read depends on: column names, types, nullability and physical
    names (column mapping); versions with the same read shape are read together.

    Args:
        meta (TableMeta | None): the table's metadata at a version.

    Returns:
        str: a JSON text, equal for two versions exactly when one read serves both ("" for None).
    """

    def strip(t):
        if isinstance(t, dict):
            if t.get("type") == "struct":
                return [
                    (
                        f["name"],
                        strip(f["type"]),
                        f.get("nullable", True),
                        (f.get("metadata") or {}).get("delta.columnMapping.physicalName"),
                    )
                    for f in t["fields"]
                ]
            return {k: strip(v) for k, v in t.items()}
        return t

    return json.dumps(strip(meta.schema)) if meta is not None else ""


class Copier:
    """Copies change rows and images of one master database's tables (its own Spark
    session: the change-feed read options it sets never reach the user's).

    Args:
        spark (SparkSession): the master's session (a child session is made from it on first use).
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.
        note (Callable[[str, str], None] | None): called with ``(table, text)`` when a change-feed
            limit is met (None: a warning on the ``wlc.capture`` logger).
    """

    def __init__(self, spark, storage: Storage, db_path: str, note=None):
        self._base = spark
        self._session = None
        self.storage = storage
        self.db_path = db_path
        self.note = note or (lambda table, text: log.warning("%s: %s", table, text))  # a change-feed limit met
        self.deltars = settings().capture.deltars  # change rows through delta-rs where it reads them as Spark

    @property
    def spark(self):
        """The Spark session change rows are read with: a session of its own (made on first use)
        whose change-feed reads take each version's own schema and skip Delta's retention check."""
        if self._session is None:
            session = self._base.newSession()
            # read a version's changes with its own schema: time travel picks the schema
            session.conf.set("spark.databricks.delta.changeDataFeed.allowTimeTravelOptionsForSchema", "true")
            session.conf.set("spark.databricks.delta.changeDataFeed.defaultSchemaModeForColumnMappingTable", "legacy")
            # Delta refuses to read a version older than delta.deletedFileRetentionDuration, its
            # files gone or not; capture reads what is still there (what VACUUM removed is met
            # as missing files and carried by an image, below)
            session.conf.set(
                "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration", "false"
            )
            self._session = session
        return self._session

    def table_path(self, name: str) -> str:
        """The folder of master table ``name``: ``<db>/<schema>/<table>``.

        Args:
            name (str): ``"schema.table"``.

        Raises:
            ConfigError: the name is not two parts, or a part would leave the database folder.
        """
        from wlcore.names import split_name

        schema, table = split_name(name)
        return Storage.join(self.db_path, schema, table)

    # ------------------------------------------------------------------ writing
    def write(self, staging: str, items: list) -> Written:
        """Write the change rows of ``items`` into ``staging``. Items whose version the change feed
        cannot describe any more are changed in place: ``change`` becomes ``"image"`` or None with
        a ``gap`` note.

        Args:
            staging (str): the open batch's staging folder.
            items (list[Planned]): the staged transactions (:class:`wlcore.batch.Planned`), ascending.

        Returns:
            Written: by item index, the rows' folder and counts, why rows are lost; and the tables
            that could not be read (their items stay pending).
        """
        out = Written()
        by_table: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            if item.change in ("cdf", "image"):
                by_table.setdefault(item.table, []).append(i)
        for table, idx in by_table.items():
            try:
                self._write_table(staging, table, [(i, items[i]) for i in idx], out)
            except TableUnreadable as exc:
                out.unreadable[table] = exc.cause
                for i in idx:
                    out.rows.pop(i, None)
                    out.counts.pop(i, None)
                    self._remove(staging, items[i])
        return out

    def _write_table(self, staging: str, table: str, items: list[tuple[int, Any]], out: Written) -> None:
        force: str | None = None  # a gap before: the next version with data is carried by its image
        k = 0
        while k < len(items):
            i, item = items[k]
            if item.change == "image" or force:
                if force and item.change != "image":
                    item.change, item.gap = "image", force
                done = self._image(staging, table, i, item, out)
                if done and force:
                    self.note(table, f"{force}; the table is carried by its image at version {item.version}")
                force = None if done else (force or item.gap)
                k += 1
                continue
            run = [(i, item)]
            while (
                k + len(run) < len(items)
                and len(run) < RUN_VERSIONS
                and items[k + len(run)][1].change == "cdf"
                and items[k + len(run)][1].version == run[-1][1].version + 1
                and read_shape(items[k + len(run)][1].meta) == read_shape(item.meta)
            ):
                run.append(items[k + len(run)])
            k += len(run)
            missing = self._changes(staging, table, run, out)
            if missing is None:
                continue
            # VACUUM (or log clean-up) removed what the feed needs: the run's last version by its
            # image, a gap before it
            reason = (
                f"the change files of versions {run[0][1].version}..{run[-1][1].version} were removed "
                f"before capture read them ({_why(missing)})"
            )
            for _j, it in run[:-1]:
                it.change, it.gap = None, reason
            j, last = run[-1]
            last.change, last.gap = "image", reason
            if self._image(staging, table, j, last, out):
                self.note(table, f"{reason}; the table is carried by its image at version {last.version}")
            else:
                force = reason
                self.note(
                    table,
                    f"{reason}, and the files of version {last.version} too; the table is carried "
                    "by its image at the next version that can be read",
                )

    def _image(self, staging: str, table: str, i: int, item, out: Written) -> bool:
        """Copy the table's image at ``item.version``, or, when VACUUM removed its files, at
        ``item.stable`` (the last version with the same rows: the ones between change no
        data, e.g. OPTIMIZE); False when those files are gone too (the item then carries a
        gap note and no rows)."""
        from pyspark.sql import Observation, functions as F

        rel = f"images/{batch_folder(table)}/{item.version}"
        uri = self.storage.uri(self.table_path(table))
        tries = [item.version] + ([item.stable] if item.stable is not None and item.stable > item.version else [])
        status = ""
        for version in tries:
            seen = Observation()

            def copy():
                df = self.spark.read.format("delta").option("versionAsOf", version).load(uri)
                cols = item.meta.columns if item.meta else df.columns
                (
                    df.select(*[quote_ident(c) for c in cols])
                    .observe(seen, F.count(F.lit(1)).alias("n"))
                    .write.mode("overwrite")
                    .parquet(self.storage.uri(Storage.join(staging, rel)))
                )

            status = self._read(table, [version], copy, staging, rel)
            if status == "ok":
                out.rows[i] = rel
                out.counts[i] = {"image": int(seen.get["n"])}
                return True
            if status.startswith("lost:"):
                out.lost[i] = status[5:]
                return True
        item.change = None
        item.gap = item.gap or (
            f"the data files of version {item.version} were removed before capture read them ({_why(status[8:])})"
        )
        return False

    def _changes(self, staging: str, table: str, run: list, out: Written) -> str | None:
        """Copy the change feed of a run of versions; None when done (or lost with the
        table), else what is missing (the run's change files were vacuumed)."""
        from pyspark.sql import Observation, functions as F

        first, last = run[0][1], run[-1][1]
        uri = self.storage.uri(self.table_path(table))
        base = f"rows/{batch_folder(table)}"
        for _i, it in run:  # a retried write must not append the same version twice
            self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={it.version}"))
        counts = self._through_deltars(staging, table, run)
        if counts is not None:
            for i, it in run:
                out.rows[i] = f"{base}/{VERSION_COLUMN}={it.version}"
                out.counts[i] = counts.get(it.version, {})
            return None
        seen = Observation()

        def copy():
            df = (
                self.spark.read.format("delta")
                .option("readChangeFeed", "true")
                .option("startingVersion", first.version)
                .option("endingVersion", last.version)
                .option("versionAsOf", last.version)
                .load(uri)
            )
            version, kind = F.col(VERSION_COLUMN), F.col(CHANGE_TYPE)
            tallies = [
                F.count_if((version == it.version) & (kind == t)).alias(f"{i}/{t}")
                for i, it in run
                for t in CHANGE_TYPES
            ]
            (
                df.select(
                    *[quote_ident(c) for c in last.meta.columns],
                    CHANGE_TYPE,
                    df["_commit_version"].alias(VERSION_COLUMN),
                )
                .observe(seen, *tallies)
                .write.mode("append")
                .partitionBy(VERSION_COLUMN)
                .parquet(self.storage.uri(Storage.join(staging, base)))
            )

        status = self._read(table, [first.version, last.version], copy, staging, None)
        if status.startswith("missing:"):
            for _i, it in run:
                self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={it.version}"))
            return status[8:]
        if status.startswith("lost:"):
            for i, it in run:
                self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={it.version}"))
                out.lost[i] = status[5:]
            return None
        tally = seen.get
        for i, it in run:
            out.rows[i] = f"{base}/{VERSION_COLUMN}={it.version}"
            out.counts[i] = {t: int(tally[f"{i}/{t}"]) for t in CHANGE_TYPES if tally[f"{i}/{t}"]}
        return None

    def _through_deltars(self, staging: str, table: str, run: list) -> dict[int, dict[str, int]] | None:
        """The run's change rows copied by delta-rs (:func:`deltars_copy`), by version and
        change type; None when Spark copies them: ``capture.deltars`` off, folders not of this
        machine, a commit of the run gone, or a table delta-rs does not read as Spark does."""
        if not self.deltars:
            return None
        path = self.table_path(table)
        local, folder = (
            self.storage.os_path(path),
            self.storage.os_path(Storage.join(staging, f"rows/{batch_folder(table)}")),
        )
        if local is None or folder is None:
            return None
        if not all(self.storage.exists(commit_file(path, it.version)) for _i, it in run):
            return None  # log clean-up: Spark's read tells what is missing
        return deltars_copy(local, run[-1][1].meta, run[0][1].version, run[-1][1].version, folder)

    def _read(self, table: str, versions: list[int], read, staging: str, rel: str | None) -> str:
        """Run ``read()``: ``"ok"``; ``"lost:<cause>"`` when the table was dropped (its
        commits are gone); ``"missing:<what>"`` when files of those versions are gone
        (VACUUM). Raises :class:`TableUnreadable` for any other failure of this table."""
        path = self.table_path(table)

        def gone() -> str | None:
            missing = [v for v in versions if not self.storage.exists(commit_file(path, v))]
            if not missing:
                return None
            if list_versions(self.storage, path):  # the table is there: log clean-up removed the commit
                return "missing:" + (
                    f"the commit of version {missing[0]} was removed by log clean-up (delta.logRetentionDuration)"
                )
            return "lost:" + (
                f"table {table} was dropped (its Delta log is gone) before capture copied the change "
                f"rows of its version {missing[0]}; they no longer exist anywhere"
            )

        cause = gone()
        if cause:
            return cause
        try:
            read()
        except Exception as exc:  # noqa: BLE001 (Py4JJavaError, AnalysisException...: classified below)
            if rel is not None:
                self.storage.rm(Storage.join(staging, rel))
            cause = gone()
            if cause:
                return cause
            text = str(exc)
            if _MISSING.search(text):
                return "missing:" + first_line(exc)
            raise TableUnreadable(table, f"{type(exc).__name__}: {first_line(exc)}") from exc
        return "ok"

    def _remove(self, staging: str, item) -> None:
        if item.version is None:
            return
        self.storage.rm(Storage.join(staging, f"rows/{batch_folder(item.table)}/{VERSION_COLUMN}={item.version}"))
        self.storage.rm(Storage.join(staging, f"images/{batch_folder(item.table)}/{item.version}"))


# ---------------------------------------------------------------------- the same through delta-rs
_READER_FEATURES = frozenset({"timestampNtz"})
_WRITER_VERSIONS = frozenset({1, 2, 3, 4, 6, 7})  # 5: column mapping
_WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "identityColumns",
        "timestampNtz",
    }
)


def deltars_refusal(meta: TableMeta, protocol) -> str | None:
    """Why delta-rs may not read this table's change feed as Spark does, or None when it may.

    Args:
        meta (TableMeta): the table's metadata at the run's last version.
        protocol: delta-rs's ``ProtocolVersions`` of the table at that version.

    Returns:
        str | None: the reason, or None.
    """
    reason = delta_rs_refusal(meta, protocol, _READER_FEATURES, _WRITER_FEATURES, _WRITER_VERSIONS)
    if reason is not None:
        return reason
    for f in meta.schema.get("fields", []):
        if f.get("type") == "timestamp":  # Spark writes INT96, which delta-rs reads in nanoseconds (years 1677-2262)
            return f"column {f.get('name')} is a TIMESTAMP (instants before 1678 or after 2261 would wrap)"
    return None


def deltars_copy(path: str, meta: TableMeta, first: int, last: int, folder: str) -> dict[int, dict[str, int]] | None:
    """Copy the change rows of versions ``first`` to ``last`` of the table at ``path`` into ``folder``.

    Args:
        path (str): the master table's local folder.
        meta (TableMeta): the table's metadata at ``last`` (every version of the run reads with it).
        first (int): the run's first version.
        last (int): the run's last version (inclusive, as Delta's ``endingVersion``).
        folder (str): the local folder of the table's rows in the open batch
            (``<staging>/rows/<table>``); each version's rows go below ``wlc_version=<v>/``.

    Returns:
        dict[int, dict[str, int]] | None: the rows written, by version and change type; None when
        delta-rs may not or could not read them (nothing is left written; Spark copies the run).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    written: dict[int, pq.ParquetWriter] = {}
    counts: dict[int, dict[str, int]] = {}
    try:
        dt = DeltaTable(path, version=last)
        reason = deltars_refusal(meta, dt.protocol())
        if reason is not None:
            log.debug("%s: Spark copies versions %d..%d (%s)", path, first, last, reason)
            return None
        feed = pa.RecordBatchReader.from_stream(dt.load_cdf(starting_version=first, ending_version=last))
        for batch in feed:
            rows = _plain(pa.Table.from_batches([batch]).select([*meta.columns, CHANGE_TYPE, "_commit_version"]))
            versions = rows["_commit_version"]
            for v in pc.unique(versions).to_pylist():  # at most a run's versions, not rows
                part = rows.filter(pc.equal(versions, v)).drop_columns(["_commit_version"])
                if v not in written:
                    os.makedirs(os.path.join(folder, f"{VERSION_COLUMN}={v}"), exist_ok=True)
                    name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
                    written[v] = pq.ParquetWriter(os.path.join(folder, f"{VERSION_COLUMN}={v}", name), part.schema)
                written[v].write_table(part)
                tally = counts.setdefault(v, {})
                for r in part.group_by(CHANGE_TYPE).aggregate([([], "count_all")]).to_pylist():
                    tally[r[CHANGE_TYPE]] = tally.get(r[CHANGE_TYPE], 0) + r["count_all"]
        for w in written.values():
            w.close()
    except Exception as exc:  # deltalake's errors have no common base; Spark reads the run and tells why
        log.debug("%s: Spark copies versions %d..%d (delta-rs: %s)", path, first, last, exc)
        for w in written.values():
            with contextlib.suppress(Exception):  # closed already, or the disk's own failure
                w.close()
        for v in written:
            shutil.rmtree(os.path.join(folder, f"{VERSION_COLUMN}={v}"), ignore_errors=True)
        return None
    return counts


def _plain(rows: pa.Table) -> pa.Table:
    """``rows`` with Arrow's view and large string and binary types as the plain ones Spark's
    Parquet files hold (the same values)."""
    import pyarrow as pa

    plain = {
        pa.string_view(): pa.string(),
        pa.large_string(): pa.string(),
        pa.binary_view(): pa.binary(),
        pa.large_binary(): pa.binary(),
    }
    schema = pa.schema([f.with_type(plain.get(f.type, f.type)) for f in rows.schema])
    return rows if schema.equals(rows.schema) else rows.cast(schema)
