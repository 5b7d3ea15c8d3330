"""Change rows copied through delta-rs (the ``deltalake`` package), with no Spark job.

Spark copies a run of versions' change rows with one job a table: the change feed's plan,
Delta's state rebuilt, the write. On 2 cores shared with the master's writers that is about a
second a table a beat, most of what a follower waits for. delta-rs reads the same change feed
(the change-data files where a commit has them, else its added and removed files) in tens of
milliseconds in the capturing process, and the rows are written as Spark writes them: Parquet
files below ``rows/<table>/wlc_version=<v>/``, with the table's columns and ``_change_type``.

Used only where delta-rs reads a table's change feed as Spark's reader does: the master on local
or mounted folders; tables not partitioned, without column mapping, deletion vectors or type
widening (protocol features append-only, invariants, CHECK constraints, change feed, generated
and identity columns, ``TIMESTAMP_NTZ``); columns of flat types but TIMESTAMP (Spark writes it as
INT96, which delta-rs reads through nanoseconds: an instant before 1678 or after 2261 would wrap
in silence; ``TIMESTAMP_NTZ`` is written in microseconds and is read exactly); every commit of
the run still in the log. Anything else, and any failure of delta-rs (a file VACUUM removed, a table dropped),
leaves the run to Spark, which tells those cases apart (:mod:`wlc.changes`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from wlcore.batch import CHANGE_TYPE, VERSION_COLUMN
from wlcore.deltalog import TableMeta, delta_rs_refusal

log = logging.getLogger("wlc.capture")

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
_PLAIN = {
    pa.string_view(): pa.string(),
    pa.large_string(): pa.string(),
    pa.binary_view(): pa.binary(),
    pa.large_binary(): pa.binary(),
}


def why_not(meta: TableMeta, protocol) -> str | None:
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


def copy(path: str, meta: TableMeta, first: int, last: int, folder: str) -> dict[int, dict[str, int]] | None:
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
    from deltalake import DeltaTable

    written: dict[int, pq.ParquetWriter] = {}
    counts: dict[int, dict[str, int]] = {}
    try:
        dt = DeltaTable(path, version=last)
        reason = why_not(meta, dt.protocol())
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
    schema = pa.schema([f.with_type(_PLAIN.get(f.type, f.type)) for f in rows.schema])
    return rows if schema.equals(rows.schema) else rows.cast(schema)
