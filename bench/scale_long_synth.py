"""The long log of ``bench/scale_long.py``: a real master captured at beat 0, then thousands of
level-0 batches written with the product's own batch writer (:mod:`wlcore.batch`), as capture
would have published them for one small insert per transaction.

* :func:`make_master`: ``wlc.master`` on a new dbfarm, the keyed table ``s.t`` made by Spark,
  two inserts captured at beat 0 (three batches: the create and the inserts); capture is stopped
  with ``Master.close()`` (not ``wlc.stop()``, which ends logging). The last real batch is the
  :class:`Template`: its record, its cursor and the Parquet schema of its change rows.
* :func:`append_rows`: one Spark append of the rows the next synthetic transactions insert, so
  the master table holds exactly what a replica replaying them holds.
* :func:`synthesize`: one level-0 batch per synthetic transaction, continuing the numbering.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq

import wlc
from wlcore import batch as batchfmt
from wlcore.batch import CaptureState, Cursor, Manifest, TxnRecord
from wlcore.deltalog import list_versions, monotonic, read_commit
from wlcore.logstore import LogStore
from wlcore.names import batch_folder
from wlcore.state import LOG_FILE, read_master_state, write_master_state
from wlcore.storage import Storage
from wlcore.utc import utc_iso

DB, TABLE = "long", "s.t"
COLS = ["id", "v"]
_US = timedelta(microseconds=1)


@dataclass
class Template:
    """What the real capture wrote, which every synthetic batch repeats.

    Attributes:
        storage: the dbfarm's storage.
        db_path: the master's folder.
        table_path: the master table's folder.
        logs: the log folder.
        dbid: the master's database id (in every GTID).
        epochs: the epoch history every manifest carries.
        record: the last real insert's record (operation, user, change kind).
        cursor: the last real batch's cursor of the table (its metadata).
        schema: the Arrow schema (with Spark's metadata) of the change rows capture wrote.
        next_id: the first key not used yet.
    """

    storage: Storage
    db_path: str
    table_path: str
    logs: str
    dbid: str
    epochs: str
    record: TxnRecord
    cursor: Cursor
    schema: pa.Schema
    next_id: int

    @property
    def store(self) -> LogStore:
        """The master's log store."""
        return LogStore(self.storage, self.db_path, self.logs, DB)


def rows_of(first_id: int, count: int) -> list[tuple[int, str]]:
    """The rows keys ``first_id``..``first_id + count - 1`` insert (the same text in Spark and Arrow)."""
    return [(i, f"row {i}") for i in range(first_id, first_id + count)]


def make_master(spark, farm: str, real_rows: int = 3) -> Template:
    """A master ``long`` in ``farm`` with ``s.t`` created and two inserts of ``real_rows`` rows
    captured at beat 0; capture stopped (``Master.close()``) afterwards."""
    m = wlc.master(DB, dbfarm=farm)
    wlc.beat(0)
    m.create_schema("s")
    spark.sql(f"CREATE TABLE {TABLE} (id BIGINT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    for k in range(2):
        values = ", ".join(f"({i}, '{v}')" for i, v in rows_of(k * real_rows, real_rows))
        spark.sql(f"INSERT INTO {TABLE} VALUES {values}")
    wlc.flush()
    m.close()
    storage = Storage.of(farm)
    db_path = Storage.join(farm, DB)
    cfg = read_master_state(storage, db_path)
    assert cfg is not None and cfg.tick == 2, "the real capture did not publish the create and two inserts"
    logs = cfg.logs or Storage.join(db_path, "wlc_logs")
    last = batchfmt.read_manifest(storage, Storage.join(logs, batchfmt.batch_name(DB, cfg.batches - 1)))
    record = last.txns[-1]
    assert record.change == "cdf" and record.rows, f"the real insert is not a change-feed record: {record}"
    part = next(f for f in last.files if f.startswith(record.rows + "/") and f.endswith(".parquet"))
    schema = pq.read_schema(os.path.join(logs, batchfmt.batch_name(DB, cfg.batches - 1), part))
    assert schema.names == [*COLS, batchfmt.CHANGE_TYPE], f"capture wrote other columns: {schema.names}"
    return Template(
        storage,
        db_path,
        Storage.join(db_path, "s", "t"),
        logs,
        cfg.dbid,
        last.epochs,
        record,
        last.cursors.tables[TABLE],
        schema,
        2 * real_rows,
    )


def append_rows(spark, tpl: Template, count: int) -> tuple[int, int, datetime]:
    """Append ``count`` new rows (the next keys) to the master table in one Spark commit.

    Returns:
        ``(first key, its Delta version, its commit time)``: the time by Delta's rule, as capture
        reads it (the commit file's time, made later than the previous version's).
    """
    first = tpl.next_id
    (
        spark.range(first, first + count)
        .selectExpr("id", "concat('row ', CAST(id AS STRING)) AS v")
        .write.format("delta")
        .mode("append")
        .save(tpl.storage.uri(tpl.table_path))
    )
    tpl.next_id += count
    version = list_versions(tpl.storage, tpl.table_path)[-1]
    commit = read_commit(tpl.storage, tpl.table_path, version, file_time=True)
    monotonic(commit, tpl.cursor.time)
    return first, version, commit.timestamp


def _write_rows(tpl: Template, staging: str, rel: str, first_id: int, count: int) -> None:
    rows = rows_of(first_id, count)
    table = pa.Table.from_arrays(
        [pa.array([r[0] for r in rows], pa.int64()), pa.array([r[1] for r in rows]), pa.array(["insert"] * count)],
        schema=tpl.schema,
    )
    folder = Storage.join(staging, rel)
    os.makedirs(folder, exist_ok=True)
    pq.write_table(table, os.path.join(folder, f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"), compression="snappy")


def synthesize(tpl: Template, txns: int, rows_per_txn: int, first_id: int, version: int, at: datetime, settle: float):
    """Publish ``txns`` level-0 batches after the master's last one, each one transaction
    inserting ``rows_per_txn`` rows (keys from ``first_id`` on), as capture at beat 0 would have.

    Their commit times are spread evenly after the master's last transaction and watermark, the
    last one at ``at`` (the append holding their rows, Delta ``version``); each batch's watermark
    stops just before the next transaction, the last one's is now less ``settle`` (capture's rule);
    every record names ``version`` and every cursor the table at ``version``, so a restarted capture
    starts after the append. ``wlc.config`` (batches, tick, write, watermark) and ``wlc.log``
    follow, as capture writes them.

    Returns:
        int: the last transaction id.
    """
    storage, cfg = tpl.storage, read_master_state(tpl.storage, tpl.db_path)
    assert cfg is not None and cfg.write is not None and cfg.watermark_time is not None
    lo = max(cfg.write, cfg.watermark_time)
    if (at - lo) / _US < txns:
        raise RuntimeError(f"no room for {txns} increasing commit times between {lo} and {at}")
    step = (at - lo) / txns
    times = [lo + step * (k + 1) for k in range(txns - 1)] + [at]  # whole microseconds, increasing
    cursor = dataclasses.replace(tpl.cursor, version=version, time=at)
    rel = f"rows/{batch_folder(TABLE)}/{batchfmt.VERSION_COLUMN}={version}"
    number, txn, lines = cfg.batches, cfg.tick + 1, []
    store = tpl.store
    for k in range(txns):
        last = k == txns - 1
        watermark = max(at, datetime.now(timezone.utc) - timedelta(seconds=settle)) if last else times[k + 1] - _US
        staging = store.stage(number)
        _write_rows(tpl, staging, rel, first_id + k * rows_per_txn, rows_per_txn)
        record = TxnRecord(
            txn=txn,
            gtid=f"{tpl.dbid}:{txn}",
            time=times[k],
            table=TABLE,
            version=version,
            operation=tpl.record.operation,
            change="cdf",
            rows=rel,
            counts={"insert": rows_per_txn},
            user=tpl.record.user,
        )
        state = CaptureState({TABLE: cursor}, next_txn=txn + 1, next_batch=number + 1)
        manifest = Manifest(DB, tpl.dbid, number, watermark, [record], cursors=state, epochs=tpl.epochs)
        store.publish(staging, manifest)
        lines.append(
            f"{utc_iso(datetime.now(timezone.utc))} published batch {number}: transactions {txn}..{txn} (1), "
            f"watermark {utc_iso(watermark)}"
        )
        number, txn = number + 1, txn + 1
    cfg.batches, cfg.tick, cfg.write, cfg.watermark = number, txn - 1, times[-1], watermark
    write_master_state(storage, tpl.db_path, cfg)
    storage.append_text(Storage.join(tpl.db_path, LOG_FILE), "\n".join(lines) + "\n")
    tpl.cursor = cursor
    return txn - 1
