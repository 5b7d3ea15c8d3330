"""The batch format: round trip, atomic publish, checksums, truncation and tampering."""

import json
import os
from datetime import datetime, timezone

import pytest

from wlcore import batch as B
from wlcore.batch import CaptureState
from wlcore.errors import BatchError
from wlcore.logstore import LogStore
from wlcore.storage import Storage

T = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone.utc)


def _store(st, logs, db="db"):
    return LogStore(st, os.path.dirname(logs), logs, db)


def make_batch(tmp_path, number=0, payload=b"PAR1 rows PAR1"):
    st = Storage.of(str(tmp_path))
    logs = str(tmp_path / "wlc_logs")
    st.makedirs(logs)
    staging = _store(st, logs).stage(number)
    rows = os.path.join(staging, "rows", "sys.t", "wlc_version=3")
    os.makedirs(rows)
    with open(os.path.join(rows, "part-0.parquet"), "wb") as fh:
        fh.write(payload)
    with open(os.path.join(rows, ".part-0.parquet.crc"), "wb") as fh:
        fh.write(b"crc")
    rec = B.TxnRecord(
        txn=5,
        gtid="db1:5",
        time=T,
        table="sys.t",
        version=3,
        operation="WRITE",
        change="cdf",
        rows="rows/sys.t/wlc_version=3",
    )
    ddl = B.TxnRecord(
        txn=6,
        gtid="db1:6",
        time=T,
        table="sys.u",
        version=0,
        operation="CREATE TABLE",
        ddl="create",
        meta={"schema": "{}", "partition_columns": [], "configuration": {}, "id": "x"},
    )
    man = B.Manifest(
        database="db", dbid="db1", batch=number, watermark=T, txns=[rec, ddl], cursors=CaptureState(next_txn=7)
    )
    path = _store(st, logs).publish(staging, man).path
    return st, logs, path


def test_round_trip(tmp_path):
    st, logs, path = make_batch(tmp_path)
    assert os.path.basename(path) == "db_000000000000"
    assert [(b.number, b.path) for b in _store(st, logs).batches()] == [(0, path)]
    man = B.read_manifest(st, path)
    assert (man.first_txn, man.last_txn, man.watermark) == (5, 6, T)
    assert man.txns[0].time == T and man.txns[1].ddl == "create"
    assert list(man.files) == ["rows/sys.t/wlc_version=3/part-0.parquet"]  # hidden .crc dropped
    assert B.verify_files(st, path, man) == {}
    raw = json.loads(open(os.path.join(path, "manifest.json")).read())
    assert raw["format"] == "wlc-batch" and raw["format_version"] == B.FORMAT_VERSION
    assert not [n for n in os.listdir(logs) if n.startswith(".open-")]


def test_capture_state_and_file_list_are_typed(tmp_path):
    st, _logs, path = make_batch(tmp_path)
    man = B.read_manifest(st, path)
    assert man.cursors == CaptureState(next_txn=7) and man.cursors.tables == {}
    [entry] = man.files.values()
    assert entry.size == len(b"PAR1 rows PAR1") and len(entry.sha256) == 64
    with open(os.path.join(path, "manifest.json"), "rb") as fh:
        assert man.to_bytes() == fh.read()
    assert json.loads(B.Manifest("db", "db1", 0, T, []).to_bytes())["cursors"] == {}  # no state: {} as before


def test_published_name_is_never_overwritten(tmp_path):
    st, logs, _ = make_batch(tmp_path)
    staging = _store(st, logs).stage(0)
    with pytest.raises(FileExistsError):
        _store(st, logs).publish(staging, B.Manifest("db", "db1", 0, T, []))


def test_truncated_data_file_is_detected(tmp_path):
    st, _logs, path = make_batch(tmp_path)
    f = os.path.join(path, "rows/sys.t/wlc_version=3/part-0.parquet")
    with open(f, "r+b") as fh:
        fh.truncate(4)
    problems = B.verify_files(st, path, B.read_manifest(st, path))
    assert "truncated" in problems["rows/sys.t/wlc_version=3/part-0.parquet"]


def test_flipped_byte_is_detected(tmp_path):
    st, _logs, path = make_batch(tmp_path)
    f = os.path.join(path, "rows/sys.t/wlc_version=3/part-0.parquet")
    data = bytearray(open(f, "rb").read())
    data[5] ^= 0xFF
    open(f, "wb").write(bytes(data))
    assert B.verify_files(st, path, B.read_manifest(st, path)) == {
        "rows/sys.t/wlc_version=3/part-0.parquet": "SHA-256 mismatch"
    }


def test_missing_and_extra_files_are_detected(tmp_path):
    st, _logs, path = make_batch(tmp_path)
    d = os.path.join(path, "rows/sys.t/wlc_version=3")
    open(os.path.join(d, "part-9.parquet"), "wb").write(b"injected")
    os.remove(os.path.join(d, "part-0.parquet"))
    problems = B.verify_files(st, path, B.read_manifest(st, path), ["rows/sys.t/wlc_version=3"])
    assert problems["rows/sys.t/wlc_version=3/part-0.parquet"] == "missing"
    assert "not listed" in problems["rows/sys.t/wlc_version=3/part-9.parquet"]


def test_truncated_or_edited_manifest_is_refused(tmp_path):
    st, _logs, path = make_batch(tmp_path)
    mpath = os.path.join(path, "manifest.json")
    text = open(mpath).read()
    open(mpath, "w").write(text.replace('"txn": 5', '"txn": 50'))
    with pytest.raises(BatchError, match="checksum"):
        B.read_manifest(st, path)
    open(mpath, "w").write(text[: len(text) // 2])
    with pytest.raises(BatchError, match="truncated"):
        B.read_manifest(st, path)
    os.remove(mpath)
    with pytest.raises(BatchError, match="missing"):
        B.read_manifest(st, path)


def test_unknown_format_version_is_refused(tmp_path):
    st, _logs, path = make_batch(tmp_path)
    mpath = os.path.join(path, "manifest.json")
    body = json.loads(open(mpath).read())
    body["format_version"] = 99
    open(mpath, "w").write(json.dumps(body))
    with pytest.raises(BatchError, match="version 99"):
        B.read_manifest(st, path)


def test_staging_leftovers_are_not_batches(tmp_path):
    st, logs, _ = make_batch(tmp_path)
    _store(st, logs).stage(1)
    other = _store(st, logs, "other").stage(0)  # another master sharing the log folder
    assert [b.number for b in _store(st, logs).batches()] == [0]
    _store(st, logs).clear_staging()
    assert [n for n in os.listdir(logs) if n.startswith(".open-")] == [os.path.basename(other)]
    assert _store(st, logs, "other").batches() == []


def test_the_files_a_record_reads_come_from_its_manifest(tmp_path):
    """Replay takes a record's change-row files from the manifest it verified (no listing of the
    folder again): the Parquet files below the record's folder, without the names Spark's reader
    leaves out (starting with '.' or '_')."""
    from wlr.replay import read_by_spark

    st, _logs, path = make_batch(tmp_path)
    man = B.read_manifest(st, path)
    assert man.listed_under("rows/sys.t/wlc_version=3/") == ["rows/sys.t/wlc_version=3/part-0.parquet"]
    assert man.listed_under("rows/sys.t/wlc_version=4") == [] and man.listed_under("rows/sys") == []
    assert read_by_spark(man, "rows/sys.t/wlc_version=3") == ("rows/sys.t/wlc_version=3/part-0.parquet",)
    assert read_by_spark(man, None) == ()
    entry = man.files["rows/sys.t/wlc_version=3/part-0.parquet"]
    man.files["rows/sys.t/wlc_version=3/_SUCCESS/part-1.parquet"] = entry
    man.files["rows/sys.t/wlc_version=3/.part-3.parquet"] = entry
    man.files["rows/sys.t/wlc_version=3/part-2.parquet"] = entry
    assert read_by_spark(man, "rows/sys.t/wlc_version=3") == (  # the index follows files added since
        "rows/sys.t/wlc_version=3/part-0.parquet",
        "rows/sys.t/wlc_version=3/part-2.parquet",
    )
