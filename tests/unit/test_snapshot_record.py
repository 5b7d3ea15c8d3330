"""A snapshot's record (``snapshot.json``) as a typed value: a damaged one is refused by name,
not read half-way. No Spark."""

from __future__ import annotations

import json

import pytest

from wlcore import snapshots as snap
from wlcore.errors import TargetError
from wlcore.storage import Storage
from wlcore.target import Target


def _write(tmp_path, text: str) -> str:
    folder = tmp_path / "wlc_snapshot" / "5"
    folder.mkdir(parents=True)
    (folder / snap.SNAPSHOT_MANIFEST).write_text(text)
    return str(folder)


def test_an_initial_record_without_txn_is_the_initial_snapshot(tmp_path):
    path = _write(tmp_path, json.dumps({"dbid": "d", "created": "2026-11-25T05:18:21.393285Z", "tables": {}}))
    record = snap.read(Storage.of(str(tmp_path)), path)
    assert (record.txn, record.time, record.watermark, record.batch, record.epochs) == (-1, None, None, -1, None)


@pytest.mark.parametrize(
    "text", ["{not json", json.dumps({"dbid": "d"}), json.dumps({"dbid": "d", "tables": {"s.t": {"meta": None}}})]
)
def test_a_damaged_record_is_refused_by_name(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(snap.SnapshotRecordError, match="snapshot.json"):
        snap.read(Storage.of(str(tmp_path)), path)


def test_a_target_without_its_bound_is_refused():
    with pytest.raises(TargetError):
        Target("txn")
    with pytest.raises(TargetError):
        Target("time")
