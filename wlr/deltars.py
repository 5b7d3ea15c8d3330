"""Small segments landed through delta-rs (the ``deltalake`` package), with no Spark job.

A segment landed by Spark pays about eleven Spark jobs whatever its size (the change rows'
schema, Delta's state rebuilt, the file listing, the write, the commit's own): about a second
per table on 2 cores for a handful of rows, which a follower of many quiet tables pays every
round. delta-rs commits the same MERGE or append in tens of milliseconds, in this process.

The commit is the one Spark would make: the same net change (:mod:`wlcore.collapse_arrow`, the
rules of :mod:`wlcore.collapse`), one MERGE (or one append when only inserts remain) with the
replay tag in ``commitInfo.userMetadata`` and Delta's idempotent ``txn`` action (``appId``
``wlc:<master dbid>``, ``version`` the segment's last transaction), and the change-data files a
MERGE writes where the table's change feed is on. A key whose first change in the segment was a
delete or an update must be on the table: it is checked against the table's version the MERGE
reads, before it, so a diverged replica gets :class:`~wlr.errors.ApplyError` and no commit.

Used only where delta-rs writes the table exactly as Spark would, else :meth:`DeltaRs.land`
answers None and Spark lands the segment: local folders; tables of at most ``limit`` bytes
(``replica.deltars_bytes``); not partitioned; protocol features delta-rs writes (append-only,
invariants, change feed, TIMESTAMP_NTZ; no constraints, generated or identity columns, column
mapping, deletion vectors, row tracking or In-Commit Timestamps); columns of flat types; keys of
integer, string, decimal or date types, never NULL; change rows with the table's columns.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from wlcore import collapse_arrow
from wlcore.collapse import FIRST, OP
from wlcore.tablemeta import TableMeta

from .errors import ApplyError

log = logging.getLogger("wlr.deltars")

_WRITER_FEATURES = {"appendOnly", "invariants", "changeDataFeed", "timestampNtz"}
_READER_FEATURES = {"timestampNtz"}
_FLAT = {
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
    if protocol.min_reader_version > 3 or protocol.min_reader_version == 2:
        return f"reader version {protocol.min_reader_version}"
    if not set(protocol.reader_features or ()) <= _READER_FEATURES:
        return f"reader features {sorted(set(protocol.reader_features or ()) - _READER_FEATURES)}"
    if protocol.min_writer_version in (5, 6) or protocol.min_writer_version > 7:
        return f"writer version {protocol.min_writer_version}"
    if not set(protocol.writer_features or ()) <= _WRITER_FEATURES:
        return f"writer features {sorted(set(protocol.writer_features or ()) - _WRITER_FEATURES)}"
    if meta.partition_columns:
        return "partitioned"
    config = meta.configuration
    if any(k.startswith("delta.constraints.") for k in config):
        return "CHECK constraints"
    if config.get("delta.columnMapping.mode", "none") != "none":
        return "column mapping"
    for f in json.loads(meta.schema_json).get("fields", []):
        kind = f.get("type")
        if not isinstance(kind, str) or not (kind in _FLAT or kind.startswith("decimal(")):
            return f"column {f.get('name')} of a nested type"
        extra = set(f.get("metadata") or {}) - _FIELD_METADATA
        if extra:
            return f"column {f.get('name')} carries {sorted(extra)}"
    return None


class DeltaRs:
    """Lands small segments through delta-rs for :class:`wlr.apply.Applier`.

    Args:
        app_id (str): Delta's ``txnAppId`` of this master's replay (``wlc:<master dbid>``).
    """

    def __init__(self, app_id: str):
        self.app_id = app_id
        self.limit = 0  # tables up to this many bytes (0: none); set by replay from replica.deltars_bytes

    def land(
        self,
        path: str,
        meta: TableMeta,
        files: Sequence[str],
        keys: list[str],
        insert_only: bool,
        text: str,
        version: int,
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

        Returns:
            tuple[int, str] | None: the rows after collapse and how they landed (``"append"`` or
            ``"merge"``); None when delta-rs may not land this segment (Spark lands it).

        Raises:
            ApplyError: a key to delete or update is not on the table (the replica has diverged).
        """
        from deltalake import CommitProperties, Transaction, write_deltalake

        if self.limit <= 0 or not (insert_only or keys):
            return None
        dt = _open(path)
        reason = "delta-rs cannot read its log" if dt is None else why_not(meta, dt.protocol())
        if reason is None and not insert_only:
            types = {f["name"]: f["type"] for f in json.loads(meta.schema_json).get("fields", [])}
            bad = [k for k in keys if not (types.get(k) in _KEY_TYPES or str(types.get(k)).startswith("decimal("))]
            reason = f"key columns {bad} of types delta-rs matches otherwise" if bad else None
        if reason is None and (size := detail(dt)[0]) > self.limit:
            reason = f"{size} bytes"
        if reason is not None:
            log.debug("%s: Spark lands it (%s)", path, reason)
            return None
        done = dt.transaction_version(self.app_id)
        if done is not None and done >= version:  # Delta's idempotent write: already in the log
            return 0, "merge"
        try:
            rows = collapse_arrow.read_rows(files)
            target = pa.schema(dt.schema().to_arrow())
            if set(collapse_arrow.data_columns(rows)) != set(target.names):
                raise collapse_arrow.Unsupported("the change rows' columns are not the table's")
            net = rows.select(target.names) if insert_only else collapse_arrow.net_by_key(rows, keys)
            data = net.select(target.names).cast(target)
        except (collapse_arrow.Unsupported, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            log.debug("%s: Spark lands it (%s)", path, exc)
            return None
        commit = CommitProperties(
            custom_metadata={"userMetadata": text}, app_transactions=[Transaction(self.app_id, version)]
        )
        if insert_only:
            write_deltalake(dt, data, mode="append", commit_properties=commit)
            return data.num_rows, "append"
        _check_present(dt, net, keys)
        source = data.append_column(OP, net[OP])
        on = " AND ".join(f"t.{_ident(k)} = s.{_ident(k)}" for k in keys)
        (
            dt.merge(source, on, source_alias="s", target_alias="t", streamed_exec=False, commit_properties=commit)
            .when_matched_update_all(predicate=f"s.{_ident(OP)}", except_cols=[OP])
            .when_matched_delete(predicate=f"NOT s.{_ident(OP)}")
            .when_not_matched_insert_all(predicate=f"s.{_ident(OP)}", except_cols=[OP])
            .execute()
        )
        return data.num_rows, "merge"


def _open(path: str):
    """delta-rs's DeltaTable at local ``path``, or None when delta-rs cannot read its log (a
    reader feature it lacks)."""
    from deltalake import DeltaTable

    try:
        return DeltaTable(path)
    except Exception as exc:  # deltalake's errors for unknown features and versions have no common base
        log.debug("%s: delta-rs cannot read it (%s)", path, exc)
        return None


def detail(dt) -> tuple[int, int]:
    """The size in bytes and the number of data files of delta-rs's DeltaTable ``dt`` (its log only)."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    return int(pc.sum(adds["size_bytes"]).as_py() or 0), adds.num_rows


def size_of(path: str) -> tuple[int, int] | None:
    """The size in bytes and the number of data files of the Delta table at local ``path``, read
    from its log by delta-rs in milliseconds; None when delta-rs cannot read it."""
    dt = _open(path)
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
    have = dt.to_pyarrow_dataset().to_table(columns=keys)
    missing = need.join(have.cast(need.select(keys).schema), keys=keys, join_type="left anti")
    if missing.num_rows:
        row = missing.drop_columns([OP, FIRST]).slice(0, 1).to_pylist()[0]
        raise ApplyError(
            f"rows to delete or update are not on the replica (e.g. {json.dumps(row, default=str)}); "
            "the replica has diverged from the master"
        )
