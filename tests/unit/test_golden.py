"""The on-disk formats as the code wrote them once (tests/data/, made by tests/data/make_fixtures.py):
a level-0 batch, a level-1 batch, a snapshot and both state files stay readable by the readers of
today's code, with the content they had. No Spark: the files are read as replay and status read them."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

from wlcore import batch as batchfmt, snapshots as snap
from wlcore.deltalog import list_versions, metadata_at
from wlcore.levels import Span
from wlcore.state import capture_liveness, read_master_state
from wlcore.storage import Storage
from wlr.monitor import read_replica_state

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
DBID = "47e80c569b994836a7b86c7e0ccb7ad1"
EPOCHS = "0:68584c6b023d3205"


def _manifest(name: str) -> batchfmt.Manifest:
    store = Storage.of(DATA)
    path = os.path.join(DATA, name)
    manifest = batchfmt.read_manifest(store, path)
    assert batchfmt.verify_files(store, path, manifest) == {}  # every file's size and SHA-256
    return manifest


def test_a_level0_batch_holds_the_insert_of_two_rows():
    manifest = _manifest("batch_level0")
    assert (manifest.database, manifest.dbid, manifest.batch, manifest.level) == ("m", DBID, 1, 0)
    assert (manifest.first_txn, manifest.last_txn, manifest.end_batch, manifest.epochs) == (1, 1, 1, EPOCHS)
    [rec] = manifest.txns
    assert (rec.txn, rec.table, rec.version, rec.ddl, rec.change) == (1, "s.t", 1, None, "cdf")
    assert rec.gtid == f"{DBID}:1" and rec.counts == {"insert": 2} and rec.rows == "rows/s.t/wlc_version=1"
    assert manifest.cursors.next_txn == 2 and manifest.cursors.tables["s.t"].version == 1


def test_a_level1_batch_spans_batches_0_to_2_as_a_create_and_one_piece():
    manifest = _manifest("batch_level1")
    assert (manifest.level, manifest.batch, manifest.end_batch) == (1, 0, 2)
    span = Span.of(manifest, "batch_level1")
    assert (span.level, span.first_batch, span.last_batch, span.first_txn, span.last_txn) == (1, 0, 2, 0, 2)
    assert span.name == "level-1 batch 0-2"
    create, piece = manifest.txns
    assert (create.txn, create.ddl, create.change, create.meta["partition_columns"]) == (0, "create", None, [])
    assert create.meta["configuration"] == {"delta.enableChangeDataFeed": "true", "wlc.key": "id"}
    assert (piece.first, piece.txn, piece.change, piece.rows) == (1, 2, "cdf", "rows/s.t/1-2")
    assert piece.start == 1 and piece.counts == {"insert": 2}


def test_a_manifest_is_written_back_as_it_was_read():
    for name in ("batch_level0", "batch_level1"):
        with open(os.path.join(DATA, name, batchfmt.MANIFEST), "rb") as f:
            raw = f.read()
        assert _manifest(name).to_bytes() == raw  # typed records, files and capture state render the same JSON


def test_a_snapshot_record_and_its_table():
    store = Storage.of(DATA)
    path = os.path.join(DATA, "snapshot")
    record = snap.read(store, path)
    assert (record.txn, record.batch, record.dbid, record.epochs) == (3, 3, DBID, EPOCHS)
    assert record.tables["s.t"].version == 3
    start = snap.start_of(store, path)
    assert (start.txn, start.batch) == (3, 3)
    table = os.path.join(path, "s", "t")
    assert list_versions(store, table) == [0, 1]
    meta = metadata_at(store, table, 1)
    assert meta.columns == ["id", "v"] and meta.configuration["wlc.key"] == "id"


def test_a_snapshot_record_is_written_back_as_it_was_read():
    path = os.path.join(DATA, "snapshot", snap.SNAPSHOT_MANIFEST)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert snap.SnapshotRecord.from_json(json.loads(text)).to_text() == text


def test_the_masters_state_file():
    store = Storage.of(DATA)
    cfg = read_master_state(store, os.path.join(DATA, "master"))
    assert (cfg.tick, cfg.batches, cfg.format, cfg.state, cfg.beat) == (3, 4, 1, 2, 0)
    assert (cfg.dbid, cfg.epochs, cfg.watermark) == (DBID, EPOCHS, "stopped")
    state, when = capture_liveness(cfg, datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert state == "stopped" and when is not None and when == cfg.capture_stopped


def test_the_replicas_state_file():
    state = read_replica_state(Storage.of(DATA), os.path.join(DATA, "replica"))
    assert (state.master, state.dbid, state.tick, state.batches, state.state) == ("m", DBID, 3, 4, "idle")
    assert (state.versions["s.t"], state.views["s.t"], state.epochs, state.view) == (1, 1, EPOCHS, -1)
