"""Small segments landed through delta-rs (the ``deltalake`` package), with no Spark job.

A segment landed by Spark pays about eleven Spark jobs whatever its size (the change rows'
schema, Delta's state rebuilt, the file listing, the write, the commit's own): about a second
per table on 2 cores for a handful of rows, which a follower of many quiet tables pays every
round. delta-rs commits the same MERGE or append in tens of milliseconds, in this process.

The commit is the one Spark would make: the same net change (the Arrow functions of
:mod:`wlcore.collapse`, by Spark's rules), one MERGE (or one append when only inserts remain) with the
replay tag in ``commitInfo.userMetadata`` and Delta's idempotent ``txn`` action (``appId``
``wlc:<master dbid>``, ``version`` the segment's last transaction), and the change-data files a
MERGE writes where the table's change feed is on. A key whose first change in the segment was a
delete or an update must be on the table: it is checked against the table's version the MERGE
reads, before it, so a diverged replica gets :class:`~wlr.errors.ApplyError` and no commit.

Used only where delta-rs writes the table exactly as Spark would, else :meth:`DeltaRs.land`
answers None and Spark lands the segment: local folders; tables of at most ``limit`` bytes
(``replica.deltars_bytes``); not partitioned; protocol features delta-rs writes (append-only,
invariants, change feed, TIMESTAMP_NTZ; no constraints, generated or identity columns, column
mapping, deletion vectors, row tracking or In-Commit Timestamps); columns of flat types, TIMESTAMP
columns whose files' statistics show instants from 1678 to 2261 only (delta-rs reads Spark's
INT96 timestamps through nanoseconds, and a MERGE copies untouched rows); keys of
integer, string, decimal or date types, never NULL; change rows with the table's columns. A segment
whose ALTERs add nullable columns of flat types at the end (``ALTER TABLE ADD COLUMNS``) lands in
two: the columns added at the end in the order the master has them (a part commit, as Spark's
replay makes for an ALTER; delta-rs's ``merge_schema`` would order them its own way), then the
rows; change rows from before the ALTER hold NULL there, as when Spark reads them with the
segment's final schema.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from wlcore import collapse
from wlcore.collapse import FIRST, OP
from wlcore.deltalog import TableMeta, delta_rs_refusal

from .errors import ApplyError
from .tables import OpenTables, open_table

log = logging.getLogger("wlr.deltars")

_WRITER_FEATURES = frozenset({"appendOnly", "invariants", "changeDataFeed", "timestampNtz"})
_WRITER_VERSIONS = frozenset({1, 2, 3, 4, 7})  # 5: column mapping; 6: identity columns
_READER_FEATURES = frozenset({"timestampNtz"})
_KEY_TYPES = {"byte", "short", "integer", "long", "string", "date"}
_FIELD_METADATA = {"comment", "__CHAR_VARCHAR_TYPE_STRING"}  # what a column may carry here


def why_not(meta: TableMeta, protocol) -> str | None:
    """Why delta-rs may not write this table as Spark would, or None when it may.

    Args:
        meta (TableMeta): the table's metadata now.
        protocol: delta-rs's ``ProtocolVersions`` of the table.

    Returns:
        str | None: the reason, or None.
    """
    reason = delta_rs_refusal(meta, protocol, _READER_FEATURES, _WRITER_FEATURES, _WRITER_VERSIONS)
    if reason is not None:
        return reason
    if any(k.startswith("delta.constraints.") for k in meta.configuration):
        return "CHECK constraints"
    for f in meta.schema.get("fields", []):
        extra = set(f.get("metadata") or {}) - _FIELD_METADATA
        if extra:
            return f"column {f.get('name')} carries {sorted(extra)}"
    return None


class DeltaRs:
    """Lands small segments through delta-rs for :class:`wlr.apply.Applier`.

    Args:
        app_id (str): Delta's ``txnAppId`` of this master's replay (``wlc:<master dbid>``).
        limit (Callable[[], int]): gives the size in bytes up to which a table takes a segment
            here (the Applier's ``deltars_limit``, set by replay from ``replica.deltars_bytes``;
            0: none).
        rewrite_limit (Callable[[], int]): gives the size in bytes up to which a table may be
            rewritten whole (the Applier's :class:`wlr.rewrite.Rewriter` limit; 0: never): an
            unkeyed table's segment lands through delta-rs as a rewrite only up to it.
        tables (OpenTables | None): the tables kept open between segments (shared by the
            appliers of one replay's threads; None: a new one).
    """

    def __init__(
        self,
        app_id: str,
        limit: Callable[[], int],
        rewrite_limit: Callable[[], int] = lambda: 0,
        tables: OpenTables | None = None,
    ):
        self.app_id = app_id
        self.limit = limit
        self.rewrite_limit = rewrite_limit
        self.tables = tables if tables is not None else OpenTables()

    def land(
        self,
        path: str,
        meta: TableMeta,
        files: Sequence[str],
        keys: list[str],
        insert_only: bool,
        text: str,
        version: int,
        shape: TableMeta | None = None,
        part: str = "",
    ) -> tuple[int, str] | None:
        """Land a segment's change rows on the table at ``path`` in one commit, or leave it to Spark.

        Args:
            path (str): the replica table's local folder.
            meta (TableMeta): the table's metadata now.
            files (Sequence[str]): the segment's change-row files (local paths).
            keys (list[str]): the key columns (``wlc.key``; empty: none).
            insert_only (bool): every change row is an insert (one append lands them as they are).
            text (str): the replay tag of the commit.
            version (int): the segment's last transaction (Delta's idempotent ``txn`` version).
            shape (TableMeta | None): the table's definition after the segment's ALTERs, which only
                add nullable columns (None: the segment alters nothing).
            part (str): the replay tag of the part commit that adds the columns ``shape`` adds.

        Returns:
            tuple[int, str] | None: the rows after collapse and how they landed (``"append"``,
            ``"merge"``, or ``"rewrite"``: an unkeyed table's rows after the segment overwrite it,
            one commit, tables up to ``rewrite_limit()`` bytes); None when delta-rs may not land this
            segment (Spark lands it).

        Raises:
            ApplyError: a key to delete or update is not on the table, or an unkeyed segment deletes
                more copies of a row than the table holds (the replica has diverged).
        """
        if self.limit() <= 0 or not (insert_only or keys or self.rewrite_limit() > 0):
            return None
        dt = self.tables.take(path)
        landed = self._land(dt, path, meta, files, keys, insert_only, text, version, shape, part)
        self.tables.keep(path, dt)  # not reached when the segment raised: the table is opened again
        return landed

    def _land(self, dt, path, meta, files, keys, insert_only, text, version, shape, part) -> tuple[int, str] | None:
        """:meth:`land` on ``dt``, the table at ``path`` (None: delta-rs cannot read it)."""
        from deltalake import CommitProperties, Field, Schema, Transaction, write_deltalake

        found = self._eligible(dt, meta, keys, insert_only, shape)
        if isinstance(found, str):
            log.debug("%s: Spark lands it (%s)", path, found)
            return None
        added = found  # the fields the segment's ALTERs add
        before = dt.version()
        done = dt.transaction_version(self.app_id)
        if done is not None and done >= version:  # Delta's idempotent write: already in the log
            return 0, "merge"
        target = pa.schema((dt.schema() if shape is None else Schema.from_json(shape.schema_json)).to_arrow())
        try:
            rows = _rows(files, target, added)
            if insert_only:
                data, how, count = rows.select(target.names).cast(target), "append", rows.num_rows
            elif keys:
                net = collapse.net_by_key_arrow(rows, keys)
                data, how, count = net.select(target.names).cast(target), "merge", net.num_rows
            else:
                now = _with_columns(dt.to_pyarrow_table(), target)
                data, short, count = collapse.after_images(now, rows)
                how = "rewrite"
        except (collapse.ArrowUnsupported, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            log.debug("%s: Spark lands it (%s)", path, exc)
            return None
        if how == "merge":
            _check_present(dt, net, keys)
        elif how == "rewrite" and short.num_rows:
            _diverged(short.slice(0, 1).to_pylist()[0])
        commit = CommitProperties(
            custom_metadata={"userMetadata": text}, app_transactions=[Transaction(self.app_id, version)]
        )
        if added:
            fields = [Field.from_json(json.dumps(f)) for f in added]
            dt.alter.add_columns(fields, commit_properties=CommitProperties(custom_metadata={"userMetadata": part}))
        if how != "merge":
            mode = "append" if how == "append" else "overwrite"
            write_deltalake(dt, data, mode=mode, commit_properties=commit)
        else:
            source = data.append_column(OP, net[OP])
            on = " AND ".join(f"t.{_ident(k)} = s.{_ident(k)}" for k in keys)
            (
                dt.merge(source, on, source_alias="s", target_alias="t", streamed_exec=False, commit_properties=commit)
                .when_matched_update_all(predicate=f"s.{_ident(OP)}", except_cols=[OP])
                .when_matched_delete(predicate=f"NOT s.{_ident(OP)}")
                .when_not_matched_insert_all(predicate=f"s.{_ident(OP)}", except_cols=[OP])
                .execute()
            )
        _checkpoint(dt, before, meta)
        return count, how

    def _eligible(self, dt, meta: TableMeta, keys: list[str], insert_only: bool, shape: TableMeta | None):
        """The fields the segment's ALTERs add (``shape``; empty: none) when delta-rs may land the
        segment on ``dt``, else why not (a str)."""
        if dt is None:
            return "delta-rs cannot read its log"
        reason = why_not(meta, dt.protocol()) or (why_not(shape, dt.protocol()) if shape is not None else None)
        if reason is not None:
            return reason
        added = _added(meta, shape) if shape is not None else []
        if isinstance(added, str):
            return added
        if keys and not insert_only:
            types = {f["name"]: f["type"] for f in meta.schema.get("fields", [])}
            bad = [k for k in keys if not (types.get(k) in _KEY_TYPES or str(types.get(k)).startswith("decimal("))]
            if bad:
                return f"key columns {bad} of types delta-rs matches otherwise"
        adds = _adds(dt)
        size = _bytes(adds)
        reason = _instants_out_of_range(meta, adds)
        if reason is not None:
            return reason
        if size > self.limit():
            return f"{size} bytes"
        if not (keys or insert_only) and size > self.rewrite_limit():
            return f"an unkeyed table of {size} bytes (a whole rewrite up to replica.rewrite_bytes)"
        return added


def _checkpoint(dt, before: int, meta: TableMeta) -> None:
    """A checkpoint of ``dt`` (just committed, from version ``before``) when its commits passed a
    multiple of the table's ``delta.checkpointInterval`` (Delta Spark's default, 10): delta-rs
    writes one only every 100 versions by default, and every later open of the table (replay's
    next segment, a Spark reader) replays each JSON commit since the last. The checkpoint keeps
    the ``txn`` markers replay's idempotence reads. A failure to write it is logged: the commit
    stands, and readers replay the JSON commits as before."""
    try:
        interval = max(1, int(meta.configuration.get("delta.checkpointInterval", "10")))
    except ValueError:
        interval = 10
    if dt.version() // interval == before // interval:
        return
    try:
        dt.create_checkpoint()
    except Exception as exc:  # deltalake's errors have no common base
        log.warning(
            "%s: no checkpoint at version %d (%s); readers replay its JSON commits", dt.table_uri, dt.version(), exc
        )


# delta-rs reads Spark's INT96 timestamps through nanoseconds: instants outside these wrap in silence
_SAFE_INSTANTS = (datetime(1678, 1, 1, tzinfo=timezone.utc), datetime(2262, 1, 1, tzinfo=timezone.utc))


def _instants_out_of_range(meta: TableMeta, adds: pa.Table) -> str | None:
    """Why a TIMESTAMP column of the table may hold an instant delta-rs would misread (its files'
    statistics, ``adds``: delta-rs's add actions, say one is before 1678 or after 2261, or do not
    say), else None. A MERGE copies untouched rows of the files it rewrites, and Spark writes
    TIMESTAMP as INT96, which delta-rs reads in nanoseconds (years 1677 to 2262)."""
    for f in meta.schema.get("fields", []):
        if f.get("type") != "timestamp" or not adds.num_rows:
            continue
        name = f["name"]
        if f"min.{name}" not in adds.column_names:
            return f"column {name} has no statistics (a TIMESTAMP delta-rs may misread)"
        low, high, nulls = adds[f"min.{name}"], adds[f"max.{name}"], adds[f"null_count.{name}"]
        unknown = pc.and_(pc.or_(pc.is_null(low), pc.is_null(high)), pc.not_equal(nulls, adds["num_records"]))
        if pc.any(pc.fill_null(unknown, True)).as_py():
            return f"column {name} has files without statistics (a TIMESTAMP delta-rs may misread)"
        first, last = pc.min(low).as_py(), pc.max(high).as_py()
        if first is not None and (first < _SAFE_INSTANTS[0] or last >= _SAFE_INSTANTS[1]):
            return f"column {name} holds instants before 1678 or after 2261, which delta-rs misreads"
    return None


def _rows(files: Sequence[str], target: pa.Schema, added: list[dict]) -> pa.Table:
    """The change rows of ``files`` with the columns of ``target`` (the table's schema after the
    segment); columns ``added`` after the segment's last change row are NULL in every row.

    Raises:
        collapse.ArrowUnsupported: the rows cannot be read here, or their columns are not the table's.
    """
    rows = _with_columns(collapse.read_rows_arrow(files, missing=bool(added)), target, [f["name"] for f in added])
    if set(collapse.data_columns_arrow(rows)) != set(target.names):
        raise collapse.ArrowUnsupported("the change rows' columns are not the table's")
    return rows


def _with_columns(rows: pa.Table, target: pa.Schema, names: Sequence[str] | None = None) -> pa.Table:
    """``rows`` with a NULL column for each field of ``target`` it lacks (of ``names``; None: any)."""
    for f in target:
        if f.name not in rows.column_names and (names is None or f.name in names):
            rows = rows.append_column(f, pa.nulls(rows.num_rows, f.type))
    return rows if names is not None else rows.select(target.names).cast(target)


def _diverged(row: dict) -> None:
    """Raise ApplyError naming ``row``, a row to delete or update the replica lacks."""
    raise ApplyError(
        f"rows to delete or update are not on the replica (e.g. {json.dumps(row, default=str)}); "
        "the replica has diverged from the master"
    )


def _added(meta: TableMeta, shape: TableMeta) -> list[dict] | str:
    """The fields ``shape`` adds at the end of ``meta``'s, each nullable, of a flat type and with no
    metadata (what Spark's ``ADD COLUMNS`` makes of them); else why delta-rs may not add them."""
    old = meta.schema.get("fields", [])
    new = shape.schema.get("fields", [])
    if new[: len(old)] != old or meta.partition_columns != shape.partition_columns:
        return "the segment's ALTERs change more than added columns at the end"
    for f in new[len(old) :]:
        if not f.get("nullable", True) or f.get("metadata") or not isinstance(f.get("type"), str):
            return f"added column {f.get('name')} is not a nullable flat column without metadata"
    return new[len(old) :]


def detail(dt) -> tuple[int, int]:
    """The size in bytes and the number of data files of delta-rs's DeltaTable ``dt`` (its log only)."""
    adds = _adds(dt)
    return _bytes(adds), adds.num_rows


def _adds(dt) -> pa.Table:
    """delta-rs's add actions of ``dt`` (a data file a row: path, size, statistics), from its log."""
    return pa.table(dt.get_add_actions(flatten=True))


def _bytes(adds: pa.Table) -> int:
    """The size in bytes of the data files ``adds`` (:func:`_adds`) lists."""
    return int(pc.sum(adds["size_bytes"]).as_py() or 0)


def size_of(path: str) -> tuple[int, int] | None:
    """The size in bytes and the number of data files of the Delta table at local ``path``, read
    from its log by delta-rs in milliseconds; None when delta-rs cannot read it."""
    dt = open_table(path)
    return None if dt is None else detail(dt)


def _ident(name: str) -> str:
    """``name`` as a delta-rs (DataFusion SQL) identifier."""
    return '"' + name.replace('"', '""') + '"'


def _check_present(dt, net: pa.Table, keys: list[str]) -> None:
    """Raise ApplyError naming a key of ``net`` whose first change was not an insert and that the
    table (``dt``, at the version the MERGE reads) lacks."""
    need = net.filter(pc.equal(net[FIRST], 0))
    if not need.num_rows:
        return
    table = dt.to_pyarrow_dataset()
    kind = table.schema.field(keys[0]).type
    low, high = (v.cast(kind) for v in pc.min_max(need[keys[0]]).values())
    within = (ds.field(keys[0]) >= low) & (ds.field(keys[0]) <= high)  # other files are skipped by their stats
    have = table.to_table(columns=keys, filter=within)
    missing = need.join(have.cast(need.select(keys).schema), keys=keys, join_type="left anti")
    if missing.num_rows:
        _diverged(missing.drop_columns([OP, FIRST]).slice(0, 1).to_pylist()[0])
