"""Capture: turn committed Delta versions of the master's tables into transaction records.

A scan lists the master's tables (``<db>/<schema>/<table>/_delta_log``, schema ``tmp``
excluded), reads the JSON commits after each table's cursor, and classifies each version
(:mod:`wlc.classify`: ``create``, ``alter``, ``cdf`` change rows, the table's ``image``, or no
transaction); a table whose log disappeared is a ``drop``.

Versions are taken in commit-time order across tables (Delta's time-travel times:
In-Commit Timestamps, else commit file times made increasing per table) and only once they
are ``settle`` seconds old, so transaction ids follow commit time and a batch's watermark
is exact. Commits log clean-up removed before capture read them are met as a hole: the
first version Delta can rebuild is carried by the table's image, the ones before by gap
notes. A table whose log cannot be read is held (:mod:`wlc.holds`); the others go on.
Change rows are read by Spark (:mod:`wlc.changes`: one change-feed read per table and run
of versions sharing a schema, written as Parquet partitioned by version) straight into the
open batch's staging folder: no row passes through Python.

A hole (:func:`start_after`) is a run of versions whose commit files Delta's log clean-up
(``delta.logRetentionDuration``) removed before capture read them: the change feed cannot describe
them, so the first version Delta can still rebuild (from a checkpoint) is carried by the table's
image and the versions before it by gap notes.

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

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from wlcore import features
from wlcore.batch import CaptureState, Cursor, Planned  # noqa: F401 (re-exported)
from wlcore.deltalog import (  # noqa: F401 (re-exported)
    NOT_REPLICATED_SCHEMAS,
    RESERVED,
    Commit,
    TableMeta,
    commit_file,
    delta_ref,
    discover_tables,
    kernel_metadata_at,
    list_versions,
    log_path,
    metadata_at,
    monotonic,
    read_commit,
    readable_from,
    table_path,
)
from wlcore.errors import first_line
from wlcore.storage import FileStat, Storage

from .changes import CHANGE_TYPE, CHANGE_TYPES, VERSION_COLUMN, Copier, Written  # noqa: F401
from .classify import classify
from .holds import Holds

RACY_MS = 2000  # a log folder modified less than this before its listing is listed again


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
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.
        dbname (str): the master's name.
        dbid (str): the master's database id.
        state (CaptureState): capture's cursors (each table's last captured version).
        skip_schemas (frozenset[str] | set[str]): schema folders not scanned.
        holds (Holds | None): the tables that cannot be read now (:mod:`wlc.holds`; None: new).
        floor (datetime | None): the watermark (UTC) published before this capture began.
    """

    def __init__(
        self,
        spark,
        storage: Storage,
        db_path: str,
        dbname: str,
        dbid: str,
        state: CaptureState,
        skip_schemas: frozenset[str] | set[str] = frozenset(),
        holds: Holds | None = None,
        floor: datetime | None = None,
    ):
        self.spark = spark
        self.storage = storage
        self.db_path = db_path
        self.dbname = dbname
        self.dbid = dbid
        self.state = state
        self.skip = set(skip_schemas)
        self._gone_since: dict[str, datetime] = {}
        self._first_sig: dict[str, tuple] = {}
        self._seen_sig: dict[str, tuple] = {}
        self.deferred = False
        self.refused: dict[str, str] = {}  # {path: reason} of Delta tables the last scan could not carry
        self.notices: dict[str, str] = {}  # {table: the last change-feed limit met there}
        self.new_notices: list[tuple[str, str]] = []  # (table, text) not yet told (the master logs them)
        self.copier = Copier(spark, storage, db_path, self.note)
        self.holds = holds or Holds(1.0, 60.0)  # tables that cannot be read now (wlc.holds)
        self.switched = 0  # tables capture switched a feature on in at the last scan (a commit of its own)
        self.floor = floor  # the watermark published before this capture began
        self.complete: dict[str, datetime] = {}  # {table: the limit of the last scan that read it whole}
        self.taken_back: set[str] = set()  # tables whose transactions this scan took back (held for their rows)
        self.quiet = QuietLogs(storage)  # tables whose log is unchanged since it was read (off until set on)

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
                continue  # held: its cursor stays, the watermark stays before it (wlc.holds)
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
                        born = read_commit(self.storage, path, versions[0]).timestamp
                    except FileNotFoundError:
                        self.deferred = True
                        return None
                    drop_time = min(now, born - timedelta(microseconds=1))
                    planned.append(Planned(name, drop_time, None, "DROP TABLE", "drop", None, None))
                    return self._scan_table(name, path, None, versions, limit, planned)
            if versions[-1] < cur.version:
                self.deferred = True
                return None
            self._first_sig[name] = first_sig  # the same table: no need to look again
        return self._scan_table(name, path, cur, versions, limit, planned)

    def _first_id(self, path: str, version: int) -> str:
        """The Delta table id in force at ``version`` (the log's first), "" when its commits
        do not say (log clean-up left only a checkpoint)."""
        first = metadata_at(self.storage, path, version)
        return first.table_id if first is not None else ""

    def _same_log(self, path: str, cur: Cursor, versions: list[int]) -> bool:
        """Whether the log at ``path`` is the one capture read up to ``cur.version``, when its
        first commit carries a table id capture did not see (a cursor written before capture
        kept the ids, or a table capture first read after a REPLACE TABLE): the table id in force
        at ``cur.version`` is the cursor's. A log shorter than the cursor is another table's."""
        if versions[-1] < cur.version or cur.meta is None:
            return False
        here = metadata_at(self.storage, path, cur.version) or self.meta_at(path, cur.version)
        return here.table_id == cur.meta.table_id

    def _signature(self, path: str, version: int) -> tuple:
        """(version, mtime, size) of a table's first commit file: changes when the table is made anew."""
        try:
            st = self.storage.stat(commit_file(path, version))  # one look (one HEAD on S3)
        except FileNotFoundError:
            return (version, None, None)
        return (version, st.mtime_ms, st.size)

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
                new_cursor = Cursor(v, meta, last_time, hole, feed_off, ids)
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
            new_cursor = Cursor(v, meta, last_time, force, feed_off, ids)
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
        elif not off and features.feed_switched_off(new):
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
        """The transaction ``commit`` is (None: none) and the metadata after it (:func:`wlc.classify.classify`)."""

        def read_meta(version: int) -> TableMeta:
            return metadata_at(self.storage, path, version) or self.meta_at(path, version)

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
        """The table's metadata at ``version`` from its checkpoints (Delta Kernel), for when the
        JSON commits holding it were cleaned up.

        Args:
            path (str): the table's folder.
            version (int): the Delta version.
        """
        return kernel_metadata_at(self.spark, self.storage.uri(path), version)

    # ------------------------------------------------------------------ writing change rows
    def write_rows(self, staging: str, items: list[Planned]) -> Written:
        """Write the change rows of ``items`` into ``staging`` (:meth:`wlc.changes.Copier.write`).

        Args:
            staging (str): the open batch's staging folder.
            items (list[Planned]): the staged transactions whose rows to copy.
        """
        return self.copier.write(staging, items)

    def enable_capture_properties(self, cursors: dict[str, Cursor]) -> None:
        """Switch on what capture may switch on (``capture.table_features``,
        :func:`wlcore.features.switch_on`) on tables that lack it; a change feed a user switched
        off stays off (its writes are carried by images). A commit of capture's own is
        marked ``wlc: switch on ...`` in its ``userMetadata``; a failure is logged and tried again.

        Args:
            cursors (dict[str, Cursor]): the tables scanned, by name, with their cursors.
        """
        wanted = features.switch_on()
        self.switched = 0
        for name, cur in cursors.items():
            if cur is None or cur.meta is None or name in self.holds.held:
                continue
            missing = {k: v for k, v in wanted.items() if cur.meta.configuration.get(k) != v}
            if cur.feed_off or features.feed_switched_off(cur.meta):
                missing.pop(features.CHANGE_FEED, None)
            if not missing:
                continue
            uri = self.storage.uri(table_path(self.db_path, name))
            try:
                features.enable(self.copier.spark, delta_ref(uri), missing)
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
            else:
                self.state.tables[name] = cur
                if name in self._seen_sig:
                    self._first_sig[name] = self._seen_sig[name]
