"""The log store's contract (Litestream's replica-client tests: one contract, every kind of
store): the same behaviour from a local folder and from an object store (the test's own
S3-compatible server)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from wlcore.batch import Manifest, TxnRecord
from wlcore.errors import LockHeldError
from wlcore.logstore import BatchRef, LogStore
from wlcore.state import MasterState
from wlcore.storage import Storage

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "db")
    return request.getfixturevalue("s3") + "/db"


def _manifest(db: str, batch: int, level: int = 0, last: int | None = None) -> Manifest:
    rec = TxnRecord(txn=batch, gtid=f"id:{batch}", time=T0, table="s.t", version=batch, operation="WRITE")
    man = Manifest(database=db, dbid="id", batch=batch, watermark=T0, txns=[rec], level=level, last_batch=last)
    if level:
        man.span = (batch, last)
    return man


def test_batches_are_staged_then_published_whole_listed_typed_and_deleted(root):
    st = Storage.of(root)
    store = LogStore(st, root, Storage.join(root, "wlc_logs"), "db")
    other = LogStore(st, root, store.logs, "db2")  # a master sharing the log folder
    assert store.batches() == [] and store.compacted() == []
    staged = store.stage(0)
    st.write_atomic(Storage.join(staged, "s.t/part-0.parquet"), b"rows")
    assert store.batches() == []  # staged: not there for readers
    first = store.publish(staged, _manifest("db", 0))
    assert first == BatchRef(0, 0, 0, first.path) and first.name == "db_000000000000" and first.number == 0
    assert store.manifest(first).files["s.t/part-0.parquet"].size == 4
    for n in (1, 2):
        store.publish(store.stage(n), _manifest("db", n))
    other.publish(other.stage(0), _manifest("db2", 0))
    merged = store.publish(store.stage(0), _manifest("db", 0, level=1, last=2))
    assert [b.number for b in store.batches()] == [0, 1, 2] and [b.number for b in store.batches(start=2)] == [2]
    assert store.compacted() == [BatchRef(0, 1, 2, merged.path)] and merged.name == "db_L1_000000000000_000000000002"
    assert sorted(store.batches() + store.compacted())[:2] == [first, merged]  # replay's order: first batch, level
    with pytest.raises(FileExistsError):
        store.publish(store.stage(1), _manifest("db", 1))  # a number is published once
    store.clear_staging()
    assert [b.number for b in other.batches()] == [0]  # another database's batches stay
    store.delete(store.batches()[:2])
    assert [b.number for b in store.batches()] == [2] and not st.exists(first.path)
    assert store.batch(2) == store.batches()[0] and store.batch(0) is None  # looked up by name, no listing
    assert [(b.number, b.path) for b in LogStore(st, root, store.logs, "db").batches()] == [
        (2, store.batches()[0].path)
    ]


def test_capture_and_compaction_stage_apart_and_each_clears_only_its_own(root):
    st = Storage.of(root)
    store = LogStore(st, root, Storage.join(root, "wlc_logs"), "db")
    other = LogStore(st, root, store.logs, "db2")
    capture, compaction, theirs = store.stage(3), store.stage(0, level=2), other.stage(0, level=1)
    for folder in (capture, compaction, theirs):
        st.write_atomic(Storage.join(folder, "s.t/part-0.parquet"), b"rows")
    names = sorted(n.rsplit("-", 1)[0] for n in st.listdir(store.logs))
    assert names == [".compact-db-L2-000000000000", ".compact-db2-L1-000000000000", ".open-db-000000000003"]
    store.clear_staging()  # capture's, under the capture lock: a compaction in flight keeps its folder
    assert not st.exists(Storage.join(capture, "s.t/part-0.parquet"))
    assert st.exists(Storage.join(compaction, "s.t/part-0.parquet"))
    store.clear_staging(level=1)  # compaction's, under the life-cycle lock
    assert not st.exists(Storage.join(compaction, "s.t/part-0.parquet"))
    assert st.exists(Storage.join(theirs, "s.t/part-0.parquet"))  # another database's stays
    other.discard(theirs)
    assert not st.exists(Storage.join(theirs, "s.t/part-0.parquet")) and store.batches() == []


def test_the_state_file_and_the_lock_sit_in_the_root(root):
    st = Storage.of(root)
    store = LogStore(st, root, Storage.join(root, "wlc_logs"), "db")
    assert store.state() is None
    store.write_state(MasterState.of(dbid="id", tick=4))
    assert (store.state().dbid, store.state().tick) == ("id", 4)
    with store.lock("capture of db"):
        with pytest.raises(LockHeldError):
            LogStore(st, root, store.logs, "db").lock("capture of db")
    with store.lock("capture of db"):  # let go: taken again
        pass
