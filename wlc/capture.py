"""Capture: turn committed Delta versions of the master's tables into transaction records.

A scan lists the master's tables (``<db>/<schema>/<table>/_delta_log``, schema ``tmp``
excluded), reads the JSON commits after each table's cursor, and classifies each version:

* a new table's first commit -> ``create`` (with its metadata); a change of schema,
  partitioning, CHECK constraints or user properties -> ``alter``;
* a version with ``dataChange`` actions -> change rows: ``cdf`` when the Change Data Feed
  was on at that version, else ``image`` (the full table at that version, correctness first);
* a table whose log disappeared -> ``drop``;
* anything else (OPTIMIZE, VACUUM, wlc's own switching on of the change feed) -> not a transaction.

Versions are taken in commit-time order across tables and only once they are ``settle``
seconds old, so transaction ids follow commit time and a batch's watermark is exact.
Change rows are read by Spark (one Change Data Feed read per table and run of versions,
written as Parquet partitioned by version) straight into the open batch's staging folder:
no row passes through Python.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone


from .batch import TxnRecord
from .deltalog import Commit, TableMeta, commit_file, is_delta_table, list_versions, metadata_at, read_commit
from .names import batch_folder, qualified, quote_ident, split_name, uncarried_reason
from .storage import Storage

log = logging.getLogger("wlc.capture")

RESERVED = {"wlc_logs", "wlc_snapshot"}
NOT_REPLICATED_SCHEMAS = {"tmp"}
VERSION_COLUMN = "wlc_version"
CHANGE_TYPE = "_change_type"
CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")  # Delta's _change_type values
RUN_VERSIONS = 64  # versions a change-feed read may cover (each adds four counters to the write's observation)
CAPTURE_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableInCommitTimestamps": "true"}


def delta_ref(uri: str) -> str:
    """``delta.`<path>``` for SQL on a path-based Delta table."""
    return "delta." + quote_ident(uri)


@dataclass
class Cursor:
    """Capture's position in one table: the last version examined and the metadata in force."""

    version: int
    meta: TableMeta | None

    def to_json(self) -> dict:
        return {"version": self.version, "meta": self.meta.to_json() if self.meta else None}

    @classmethod
    def from_json(cls, data: dict) -> "Cursor":
        return cls(int(data["version"]), TableMeta.from_json(data["meta"]) if data.get("meta") else None)


@dataclass
class CaptureState:
    """Everything capture needs to resume: cursors of every known table and the next ids."""

    tables: dict[str, Cursor] = field(default_factory=dict)
    next_txn: int = 0
    next_batch: int = 0

    def to_json(self) -> dict:
        return {"next_txn": self.next_txn, "next_batch": self.next_batch,
                "tables": {k: v.to_json() for k, v in sorted(self.tables.items())}}

    @classmethod
    def from_json(cls, data: dict) -> "CaptureState":
        return cls({k: Cursor.from_json(v) for k, v in (data.get("tables") or {}).items()},
                   int(data.get("next_txn", 0)), int(data.get("next_batch", 0)))

    def copy(self) -> "CaptureState":
        return CaptureState.from_json(self.to_json())


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


def discover_tables(storage: Storage, db_path: str, skip: set[str] = frozenset(),
                    refused: dict[str, str] | None = None) -> dict[str, str]:
    """Replicated tables of a database: ``{"schema.table": path}`` (see :mod:`wlc.names`).

    Every Delta table at ``<db>/<schema>/<table>`` is replicated, whatever its folder name,
    except schema ``tmp``. A Delta table that cannot be carried (a name with a control
    character or not UTF-8, a table directly under the database folder) is put in
    ``refused`` as ``{path: reason}`` so the master can say so, never skipped silently.
    """
    out = {}
    for schema in storage.subdirs(db_path):
        if schema in RESERVED or schema in skip or schema in NOT_REPLICATED_SCHEMAS:
            continue
        schema_path = Storage.join(db_path, schema)
        if is_delta_table(storage, schema_path):
            if refused is not None:
                refused[schema_path] = ("a Delta table directly in the database folder is not replicated; "
                                        "move it to <db>/<schema>/<table>")
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
    schema, table = split_name(name)
    return Storage.join(db_path, schema, table)


def shape_changed(old: TableMeta | None, new: TableMeta) -> bool:
    return old is None or old.shape() != new.shape()


def additive(old: TableMeta, new: TableMeta) -> bool:
    """True when ``new`` only adds columns at the end (and changes properties/constraints)."""
    if tuple(old.partition_columns) != tuple(new.partition_columns):
        return False
    of, nf = old.schema.get("fields", []), new.schema.get("fields", [])
    if len(nf) < len(of):
        return False
    return all(a["name"] == b["name"] and a["type"] == b["type"] for a, b in zip(of, nf))


def added_columns(old: TableMeta | None, new: TableMeta) -> list[str]:
    """The columns ``new`` only adds to ``old``: appended at the end, nullable, without field
    metadata (comments, defaults...), with partitioning and replicated properties unchanged.

    Returns their names, or ``[]`` when anything else changed (or nothing was added). Such
    an ALTER is what replay can land inside a segment's commit (rows before it have no
    value for the new columns, exactly as ``ADD COLUMNS`` leaves them).
    """
    if old is None or not additive(old, new) or old.properties != new.properties:
        return []
    of, nf = old.schema.get("fields", []), new.schema.get("fields", [])
    if nf[:len(of)] != of:  # nullability or metadata of a kept column changed too
        return []
    added = nf[len(of):]
    if any(not f.get("nullable", True) or f.get("metadata") for f in added):
        return []
    return [f["name"] for f in added]


class Capture:
    """Scans a master database and stages transaction records (no threads; the Master drives it)."""

    def __init__(self, spark, storage: Storage, db_path: str, dbname: str, dbid: str,
                 state: CaptureState, skip_schemas: set[str] = frozenset()):
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

    # ------------------------------------------------------------------ finding transactions
    def plan(self, limit: datetime | None, now: datetime) -> tuple[list[Planned], dict[str, Cursor]]:
        """Find new transactions committed at or before ``limit`` (None: all visible).

        Returns the planned transactions in commit order and the cursors they lead to;
        ``self.state`` is not changed (the caller commits the cursors once rows are written).
        """
        self.deferred = False
        refused: dict[str, str] = {}
        tables = discover_tables(self.storage, self.db_path, self.skip, refused)
        self.refused = refused
        planned: list[Planned] = []
        cursors: dict[str, Cursor] = {}
        for name, path in tables.items():
            self._gone_since.pop(name, None)
            cur = self.state.tables.get(name)
            versions = list_versions(self.storage, path)
            if not versions:
                continue
            first_sig = self._signature(path, versions[0])
            changed = self._first_sig.get(name) != first_sig
            self._seen_sig[name] = first_sig  # kept by advance(), once this scan's transactions are staged
            if cur is not None and (versions[-1] != cur.version or changed):
                # Same folder, other table? A table dropped and made again between two scans
                # has another Delta table id. A log that shrank with the same id is a table
                # being deleted file by file: wait, the scan that finds it gone records the drop.
                first_meta = metadata_at(self.storage, path, versions[0])
                old_id = cur.meta.table_id if cur.meta else ""
                new_id = first_meta.table_id if first_meta else ""
                if new_id and old_id and new_id != old_id:
                    try:
                        born = read_commit(self.storage, path, versions[0]).timestamp
                    except FileNotFoundError:
                        self.deferred = True
                        continue
                    drop_time = min(now, born - timedelta(microseconds=1))
                    planned.append(Planned(name, drop_time, None, "DROP TABLE", "drop", None, None))
                    cur = None
                elif versions[-1] < cur.version:
                    self.deferred = True
                    continue
                else:
                    self._first_sig[name] = first_sig  # the same table: no need to look again
            start = cur.version + 1 if cur else versions[0]
            meta = cur.meta if cur else None
            last_time = None
            new_cursor = None
            for v in versions:
                if v < start:
                    continue
                try:
                    commit = read_commit(self.storage, path, v)
                except FileNotFoundError:
                    break  # dropped while we read: the next scan records the drop
                if last_time is not None and commit.timestamp < last_time:
                    commit.timestamp = last_time  # keep per-table order without in-commit timestamps
                if limit is not None and commit.timestamp > limit:
                    self.deferred = True
                    break
                last_time = commit.timestamp
                item, meta = self._classify(name, path, commit, meta, first=(cur is None and new_cursor is None))
                if item is not None:
                    planned.append(item)
                new_cursor = Cursor(v, meta)
            if new_cursor is not None:
                cursors[name] = new_cursor
        for name in sorted(set(self.state.tables) - set(tables)):
            seen = self._gone_since.setdefault(name, now)
            if limit is not None and seen > limit:
                self.deferred = True
            else:
                planned.append(Planned(name, seen, None, "DROP TABLE", "drop", None, None))
                cursors[name] = None  # type: ignore[assignment]
        planned.sort(key=lambda p: (p.time, p.table, -1 if p.version is None else p.version))
        return planned, cursors

    def _signature(self, path: str, version: int) -> tuple:
        """(version, mtime, size) of a table's first commit file: changes when the table is made anew."""
        try:
            info = self.storage.fs.info(commit_file(path, version))
        except FileNotFoundError:
            return (version, None, None)
        return (version, info.get("mtime") or info.get("LastModified"), info.get("size"))

    def _classify(self, name: str, path: str, commit: Commit, meta: TableMeta | None,
                  first: bool) -> tuple[Planned | None, TableMeta | None]:
        new_meta = commit.metadata
        if first and new_meta is None:
            new_meta = metadata_at(self.storage, path, commit.version) or self._meta_via_spark(path, commit.version)
        ddl = None
        change = None
        if new_meta is not None and (first or shape_changed(meta, new_meta)):
            ddl = "create" if first or meta is None else "alter"
        current = new_meta or meta
        if commit.data_change:
            change = "cdf" if current is not None and current.change_feed and not (first and commit.version > 0) else "image"
        if ddl == "alter" and meta is not None and not additive(meta, new_meta):
            change = "image"  # replay rebuilds the table from the image with the new shape
        if first and commit.version > 0 and change is None:
            change = "image"  # history before this version is gone: start from the table's image
        if ddl is None and change is None:
            return None, current
        adds = tuple(added_columns(meta, new_meta)) if ddl == "alter" and change != "image" else ()
        return Planned(name, commit.timestamp, commit.version, commit.operation, ddl, change,
                       current, commit.user, adds), current

    def _meta_via_spark(self, path: str, version: int) -> TableMeta:
        uri = self.storage.uri(path)
        df = self.spark.read.format("delta").option("versionAsOf", version).load(uri)
        detail = self.spark.sql(f"DESCRIBE DETAIL {delta_ref(uri)}").collect()[0]
        return TableMeta(df.schema.json(), tuple(detail["partitionColumns"] or ()),
                         dict(detail["properties"] or {}), str(detail["id"] or ""))

    # ------------------------------------------------------------------ writing change rows
    def write_rows(self, staging: str, items: list[Planned]
                   ) -> tuple[dict[int, str], dict[int, dict[str, int]], dict[int, str]]:
        """Write the change rows of ``items`` into ``staging``.

        One Change Data Feed read per table and run of adjacent versions (at most
        ``RUN_VERSIONS`` a run), written partitioned by version; one image read per ``image``
        item. The rows are counted while they are written (a Spark ``Observation``, no
        second job) and the counts kept in the record, so replay picks its method without a
        Spark job. Returns ``({index: relative rows path}, {index: {change type: rows}},
        {index: why its rows are lost})``: a table dropped (its folder removed) before its
        staged versions were read has no rows left to copy; its records say so, and replay
        stops there with that cause instead of capture retrying forever.
        """
        from pyspark.sql import Observation, functions as F

        out: dict[int, str] = {}
        counts: dict[int, dict[str, int]] = {}
        lost: dict[int, str] = {}
        runs: dict[str, list[list[int]]] = {}
        for i, item in enumerate(items):
            if item.change == "cdf":
                table_runs = runs.setdefault(item.table, [])
                last = table_runs[-1] if table_runs else None
                if last and items[last[-1]].version + 1 == item.version and item.ddl is None \
                        and len(last) < RUN_VERSIONS:
                    last.append(i)
                else:
                    table_runs.append([i])
            elif item.change == "image":
                rel = f"images/{batch_folder(item.table)}/{item.version}"
                uri = self.storage.uri(table_path(self.db_path, item.table))
                seen = Observation()

                def copy_image():  # called right away, in this iteration
                    df = self.spark.read.format("delta").option("versionAsOf", item.version).load(uri)
                    cols = item.meta.columns if item.meta else df.columns
                    (df.select(*[quote_ident(c) for c in cols]).observe(seen, F.count(F.lit(1)).alias("n"))
                       .write.mode("overwrite").parquet(self.storage.uri(Storage.join(staging, rel))))
                gone = self._read_or_gone(item.table, [item.version], copy_image)
                if gone:
                    lost[i] = gone
                    continue
                out[i] = rel
                counts[i] = {"image": int(seen.get["n"])}
        for table, table_runs in runs.items():
            uri = self.storage.uri(table_path(self.db_path, table))
            base = f"rows/{batch_folder(table)}"
            for run in table_runs:
                first, last = items[run[0]], items[run[-1]]
                for i in run:  # a retried write must not append the same version twice
                    self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={items[i].version}"))
                seen = Observation()

                def copy_changes():  # called right away, in this iteration
                    df = (self.spark.read.format("delta").option("readChangeFeed", "true")
                          .option("startingVersion", first.version).option("endingVersion", last.version)
                          .load(uri))
                    version, kind = F.col(VERSION_COLUMN), F.col(CHANGE_TYPE)
                    tallies = [F.count_if((version == items[i].version) & (kind == t)).alias(f"{i}/{t}")
                               for i in run for t in CHANGE_TYPES]
                    (df.select(*[quote_ident(c) for c in first.meta.columns], CHANGE_TYPE,
                               df["_commit_version"].alias(VERSION_COLUMN))
                       .observe(seen, *tallies)
                       .write.mode("append").partitionBy(VERSION_COLUMN)
                       .parquet(self.storage.uri(Storage.join(staging, base))))
                gone = self._read_or_gone(table, [first.version, last.version], copy_changes)
                if gone:
                    for i in run:
                        self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={items[i].version}"))
                        lost[i] = gone
                    continue
                tally = seen.get
                for i in run:
                    out[i] = f"{base}/{VERSION_COLUMN}={items[i].version}"
                    counts[i] = {t: int(tally[f"{i}/{t}"]) for t in CHANGE_TYPES if tally[f"{i}/{t}"]}
        return out, counts, lost

    def _read_or_gone(self, table: str, versions: list[int], read) -> str | None:
        """Run ``read()`` (a Spark read of ``table`` at ``versions``); None when it worked, the
        cause when the table's commits are gone (the table was dropped before capture read
        them). Any other failure is raised (capture retries it at the next scan)."""
        path = table_path(self.db_path, table)

        def gone() -> str | None:
            missing = [v for v in versions if not self.storage.exists(commit_file(path, v))]
            if not missing:
                return None
            return (f"table {table} was dropped (its Delta log is gone) before capture copied the change rows "
                    f"of its version {missing[0]}; they no longer exist anywhere")
        cause = gone()
        if cause:
            return cause
        try:
            read()
        except Exception:
            cause = gone()
            if cause:
                return cause
            raise
        return None

    def enable_capture_properties(self, cursors: dict[str, Cursor]) -> None:
        """Switch on the Change Data Feed and In-Commit Timestamps on tables that lack them."""
        for name, cur in cursors.items():
            if cur is None or cur.meta is None:
                continue
            missing = {k: v for k, v in CAPTURE_PROPERTIES.items() if cur.meta.configuration.get(k) != v}
            if not missing:
                continue
            uri = self.storage.uri(table_path(self.db_path, name))
            props = ", ".join(f"'{k}' = '{v}'" for k, v in missing.items())
            try:
                self.spark.sql(f"ALTER TABLE {delta_ref(uri)} SET TBLPROPERTIES ({props})")
                log.info("switched on %s for %s", ", ".join(missing), name)
            except Exception as exc:  # a concurrent writer won; try again next scan
                log.warning("could not switch on the change feed for %s yet: %s", name, exc)

    # ------------------------------------------------------------------ records
    def to_records(self, items: list[Planned]) -> list[TxnRecord]:
        """Give ``items`` their transaction ids (gap-free, in order) and make records.

        The records' ``rows`` and ``counts`` are filled in by the caller once
        :meth:`write_rows` has written them.
        """
        records = []
        for i, item in enumerate(items):
            txn = self.state.next_txn
            self.state.next_txn += 1
            records.append(TxnRecord(
                txn=txn, gtid=f"{self.dbid}:{txn}", time=item.time, table=item.table,
                version=item.version, operation=item.operation, ddl=item.ddl, change=item.change,
                meta=item.meta.to_json() if (item.meta is not None and (item.ddl or item.change == "image")) else None,
                user=item.user, adds=list(item.adds),
            ))
        return records

    def advance(self, cursors: dict[str, Cursor | None]) -> None:
        for name, cur in cursors.items():
            if cur is None:
                self.state.tables.pop(name, None)
                self._gone_since.pop(name, None)
                self._first_sig.pop(name, None)
            else:
                self.state.tables[name] = cur
                if name in self._seen_sig:
                    self._first_sig[name] = self._seen_sig[name]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def settle_limit(now: datetime, settle: float) -> datetime:
    return now - timedelta(seconds=settle)
