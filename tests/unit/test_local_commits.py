"""A local Delta table's state read from its log (:func:`wlcore.deltalog.read_snapshot`), the
commits replay writes itself (:func:`wlcore.deltalog.write_commit`) and their file statistics
(:func:`wlcore.deltalog.file_stats`), checked against delta-rs on real tables (no Spark)."""

import json
import os
import shutil
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from wlcore.deltalog import TableMeta, file_stats, read_snapshot, stats_columns, write_commit


def rows(*ids):
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])})


def live(dt: DeltaTable) -> set[str]:
    """delta-rs's live data files of ``dt``, relative to the table."""
    return {os.path.basename(u) for u in dt.file_uris()}


def meta_of(schema: pa.Schema, conf: dict | None = None) -> TableMeta:
    from deltalake import Schema

    return TableMeta(Schema.from_arrow(schema).to_json(), (), dict(conf or {}))


def add_file(path: str, name: str, data: pa.Table) -> dict:
    """An ``add`` action for ``data`` written as the Parquet file ``name`` in the table ``path``."""
    pq.write_table(data, os.path.join(path, name))
    return {
        "path": name,
        "partitionValues": {},
        "size": os.path.getsize(os.path.join(path, name)),
        "modificationTime": 1,
        "dataChange": True,
        "stats": file_stats(data, meta_of(data.schema)),
    }


def test_the_state_is_the_one_delta_rs_rebuilds_through_checkpoints_and_commits_since(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(1, 2))
    dt = DeltaTable(path)
    for i in range(3, 15):
        mode = "overwrite" if i % 5 == 0 else "append"
        props = CommitProperties(app_transactions=[Transaction("wlc:x", i)])
        write_deltalake(dt, rows(i), mode=mode, commit_properties=props)
        if i == 9:
            dt.create_checkpoint()
    dt = DeltaTable(path)
    snap = read_snapshot(path)
    assert snap is not None and snap.version == dt.version() == 12
    assert set(snap.files) == live(dt)
    assert snap.txns == {"wlc:x": dt.transaction_version("wlc:x")} == {"wlc:x": 14}
    assert snap.size == sum(os.path.getsize(os.path.join(path, p)) for p in snap.files)
    assert json.loads(snap.metadata["schemaString"]) == json.loads(dt.schema().to_json())
    assert snap.protocol["minWriterVersion"] == dt.protocol().min_writer_version
    # the commits before the checkpoint cleaned up: the checkpoint holds them
    for v in range(0, 7):
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    again = read_snapshot(path)
    assert again is not None and (set(again.files), again.txns, again.version) == (set(snap.files), snap.txns, 12)
    # a commit missing after the checkpoint: not rebuilt here
    os.remove(os.path.join(path, "_delta_log", f"{11:020d}.json"))
    assert read_snapshot(path) is None


def test_a_state_held_is_brought_up_to_date_unless_the_table_was_made_again(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(1))
    held = read_snapshot(path)
    write_deltalake(path, rows(2), mode="append")
    newer = read_snapshot(path, since=held)
    assert newer is not None and newer.version == 1 and set(newer.files) == live(DeltaTable(path))
    shutil.rmtree(path)  # dropped and made again, up to the same version
    write_deltalake(path, rows(7))
    write_deltalake(path, rows(8), mode="append")
    afresh = read_snapshot(path, since=newer)
    assert (
        afresh is not None and set(afresh.files) == live(DeltaTable(path)) and not set(afresh.files) & set(newer.files)
    )
    assert read_snapshot(str(tmp_path / "missing")) is None


def test_a_table_only_a_v2_checkpoint_describes_is_left_to_delta_rs_and_spark(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(1))
    write_deltalake(path, rows(2), mode="append")
    log = os.path.join(path, "_delta_log")
    open(os.path.join(log, f"{1:020d}.checkpoint.0123456789abcdef0123456789abcdef0123.json"), "w").close()
    os.remove(os.path.join(log, f"{0:020d}.json"))
    assert read_snapshot(path) is None


def test_a_commit_written_here_is_put_in_place_only_once_and_delta_rs_reads_it(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(1, 2))
    snap = read_snapshot(path)
    assert snap is not None
    data = rows(3, 4)
    name = "part-00000-new-c000.snappy.parquet"
    info = {"commitInfo": {"timestamp": 1, "operation": "WRITE", "operationParameters": {"mode": "Overwrite"}}}
    removes = [
        {"remove": {"path": p, "deletionTimestamp": 1, "dataChange": True, "size": a["size"]}}
        for p, a in snap.files.items()
    ]
    add = {"add": add_file(path, name, data)}
    actions = [info, {"txn": {"appId": "wlc:x", "version": 9, "lastUpdated": 1}}, *removes, add]
    stamp = write_commit(path, 1, actions)
    with pytest.raises(FileExistsError):  # another writer's version 1 is never replaced
        write_commit(path, 1, [info])
    assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == [f"{0:020d}.json", f"{1:020d}.json"]
    dt = DeltaTable(path)
    assert dt.version() == 1 and dt.transaction_version("wlc:x") == 9
    assert sorted(dt.to_pyarrow_table()["id"].to_pylist()) == [3, 4]
    after = snap.after(1, actions, stamp)
    assert after == read_snapshot(path) and set(after.files) == {name}


def test_statistics_are_exact_bounds_or_left_out():
    us = 1_000_000
    data = pa.table(
        {
            "i": pa.array([5, None, -3], pa.int32()),
            "f": pa.array([1.5, float("nan"), 0.0]),
            "g": pa.array([-0.0, 2.25, None], pa.float32()),
            "s": pa.array(["b" * 40, "a" * 40, "ab"]),
            "t": pa.array([us * 1_700_000_000 + 123_456, -us * 10 - 1, None], pa.timestamp("us", tz="UTC")),
            "n": pa.array([0, 1, 2], pa.timestamp("us")),
            "d": pa.array([date(1500, 1, 1), date(2024, 2, 29), None]),
            "b": pa.array([True, None, False]),
            "x": pa.array([Decimal("1.25"), None, Decimal("-3.50")], pa.decimal128(5, 2)),
            "raw": pa.array([b"\x00", b"", None]),
        }
    )
    stats = json.loads(file_stats(data, meta_of(data.schema)), parse_float=Decimal)
    assert stats["numRecords"] == 3
    assert stats["nullCount"] == {"i": 1, "f": 0, "g": 1, "s": 0, "t": 1, "n": 0, "d": 1, "b": 1, "x": 1, "raw": 1}
    low, high = stats["minValues"], stats["maxValues"]
    assert (low["i"], high["i"]) == (-3, 5)
    assert "f" not in low and "f" not in high  # NaN: Spark orders it above every number
    assert (low["g"], high["g"]) == (Decimal("-0.0"), Decimal("2.25"))
    assert (low["s"], high["s"]) == ("a" * 32, "b" * 31 + "c")  # cut to 32: a prefix, and the least string above
    assert low["s"] <= min(data["s"].to_pylist()) and high["s"] > max(data["s"].to_pylist())
    assert (low["t"], high["t"]) == ("1969-12-31T23:59:49.999Z", "2023-11-14T22:13:20.124Z")  # down, up to the ms
    assert (low["n"], high["n"]) == ("1970-01-01T00:00:00.000", "1970-01-01T00:00:00.001")
    assert (low["d"], high["d"]) == ("1500-01-01", "2024-02-29")
    assert (low["b"], high["b"]) == (False, True)
    assert (low["x"], high["x"]) == (Decimal("-3.50"), Decimal("1.25"))  # exact numbers, not floats
    assert "raw" not in low and "raw" not in high
    # the bounds hold every value
    assert datetime.fromisoformat(high["t"]) >= datetime.fromtimestamp(1_700_000_000.123456, tz=timezone.utc)


def test_statistics_cover_the_columns_delta_collects_them_on():
    data = pa.table({"a": [1], "b": [2], "c": [3]})
    schema = data.schema
    assert stats_columns(meta_of(schema)) == ["a", "b", "c"]
    assert stats_columns(meta_of(schema, {"delta.dataSkippingNumIndexedCols": "2"})) == ["a", "b"]
    assert stats_columns(meta_of(schema, {"delta.dataSkippingNumIndexedCols": "-1"})) == ["a", "b", "c"]
    assert stats_columns(meta_of(schema, {"delta.dataSkippingStatsColumns": "c, `a`"})) == ["a", "c"]
    stats = json.loads(file_stats(data, meta_of(schema, {"delta.dataSkippingNumIndexedCols": "1"})))
    assert stats["nullCount"] == {"a": 0} and stats["minValues"] == {"a": 1}


def test_delta_rs_skips_files_by_these_statistics_and_finds_every_row(tmp_path):
    """delta-rs's data skipping, on files whose statistics were written here, keeps the file of a
    timestamp just below its millisecond maximum and of a long string."""
    path = str(tmp_path / "t")
    first = pa.table({"ts": pa.array([1_000_999], pa.timestamp("us", tz="UTC")), "s": ["x" * 50], "f": [2.5]})
    write_deltalake(path, first.slice(0, 0))
    name = "part-00000-a-c000.snappy.parquet"
    add = add_file(path, name, first)
    write_commit(path, 1, [{"commitInfo": {"timestamp": 1, "operation": "WRITE"}}, {"add": add}])
    dt = DeltaTable(path)
    import pyarrow.dataset as ds

    found = dt.to_pyarrow_dataset()
    when = pa.scalar(1_000_999, pa.timestamp("us", tz="UTC"))
    assert found.to_table(filter=ds.field("ts") == when).num_rows == 1
    assert found.to_table(filter=ds.field("s") == "x" * 50).num_rows == 1
    assert found.to_table(filter=ds.field("s") > "x" * 49).num_rows == 1
    assert found.to_table(filter=ds.field("f") >= 2.5).num_rows == 1
    assert dt.to_pyarrow_table(filters=[("ts", ">=", when)]).num_rows == 1
