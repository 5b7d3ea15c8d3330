"""Reading published logs for replay: every batch-level problem names its batch (no Spark)."""

import os
import shutil
from datetime import datetime, timedelta, timezone

import pytest

from wlcore import batch as batchfmt
from wlcore.batch import Manifest, TxnRecord
from wlcore.logstore import LogStore
from wlcore.state import ReplicaState
from wlcore.storage import Storage
from wlr import failure
from wlr.errors import ReplicaStateError
from wlr.planner import LogError, Target, manifest_of, read_batches

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
ALL = Target("all")


def store_of(logs: str, storage: Storage | None = None, db: str = "m") -> LogStore:
    return LogStore(storage or Storage.of(logs), os.path.dirname(logs), logs, db)


def publish(logs: str, number: int, txns: list[int], db: str = "m", dbid: str = "id1") -> None:
    store = store_of(logs, db=db)
    staging = store.stage(number)
    recs = [TxnRecord(t, f"{dbid}:{t}", T0 + timedelta(seconds=t), "s.t", t, "WRITE") for t in txns]
    store.publish(staging, Manifest(db, dbid, number, T0 + timedelta(seconds=max(txns)), recs))


@pytest.fixture
def logs(tmp_path):
    path = str(tmp_path / "logs")
    os.makedirs(path)
    for n, txns in enumerate([[0, 1], [2], [3, 4], [5]]):
        publish(path, n, txns)
    return path


def read(logs, next_batch=0, tick=-1, target=ALL):
    return [b.number for b in read_batches(store_of(logs), "id1", next_batch, tick, target)]


def batch(logs, n):
    return os.path.join(logs, batchfmt.batch_name("m", n))


def test_intact_logs_are_read_in_order_and_stop_at_the_target(logs):
    assert read(logs) == [0, 1, 2, 3]
    assert read(logs, next_batch=2, tick=3) == [2, 3]
    assert read(logs, target=Target("txn", txn=2)) == [0, 1]
    assert read(logs, target=Target("time", time=T0 + timedelta(seconds=2.5))) == [0, 1, 2]


def test_a_damaged_batch_past_the_target_does_not_matter(logs):
    os.remove(os.path.join(batch(logs, 3), "manifest.json"))
    assert read(logs, target=Target("txn", txn=4)) == [0, 1, 2]
    # batch 2's watermark (txn 4's time) proves every commit by then is published
    assert read(logs, target=Target("time", time=T0 + timedelta(seconds=4))) == [0, 1, 2]


def test_a_missing_log_folder_is_a_failure_not_an_empty_log(tmp_path):
    with pytest.raises(LogError, match="is not there"):
        read(str(tmp_path / "unmounted"), next_batch=3, tick=9)


@pytest.mark.parametrize(
    "damage, number, message",
    [
        (lambda lg: os.remove(os.path.join(batch(lg, 1), "manifest.json")), 1, "batch 1: .*manifest.json is missing"),
        (lambda lg: open(os.path.join(batch(lg, 2), "manifest.json"), "r+b").truncate(40), 2, "batch 2: .*not JSON"),
        (lambda lg: shutil.rmtree(batch(lg, 1)), 1, "batch 1 is missing .*batch 2 follows"),
        (
            lambda lg: (
                os.rename(batch(lg, 1), batch(lg, 9)),
                os.rename(batch(lg, 2), batch(lg, 1)),
                os.rename(batch(lg, 9), batch(lg, 2)),
            ),
            1,
            "batch 1: its folder holds the manifest of batch 2",
        ),
        (
            lambda lg: shutil.copytree(batch(lg, 3), batch(lg, 4)),
            4,
            "batch 4: its folder holds the manifest of batch 3",
        ),
        (
            lambda lg: (shutil.rmtree(batch(lg, 2)), publish(lg, 2, [4])),
            2,
            "batch 2 holds transactions 4-4 but 3 was expected",
        ),
        (lambda lg: (shutil.rmtree(batch(lg, 2)), publish(lg, 2, [3, 4], dbid="other")), 2, "database id other"),
    ],
)
def test_each_batch_level_problem_names_its_batch(logs, damage, number, message):
    damage(logs)
    with pytest.raises(LogError, match=message) as err:
        read(logs)
    assert err.value.batch == number


def test_the_first_batch_must_hold_the_next_transaction(logs):
    with pytest.raises(LogError, match="batch 2 holds transactions 3-4 but 2 was expected"):
        read(logs, next_batch=2, tick=1)
    assert read(logs, next_batch=2, tick=3) == [2, 3]  # 4 is the next one, inside batch 2
    assert read(logs, next_batch=2, tick=4) == [2, 3]  # batch 2 done, its number not yet saved
    with pytest.raises(LogError, match="batch 1 holds transactions 2-2 but 4 was expected"):
        read(logs, next_batch=1, tick=3)  # a stale batch number: batch 1 lies wholly behind the tick


def test_manifest_of(logs):
    assert manifest_of(store_of(logs), 2).last_txn == 4
    assert manifest_of(store_of(logs), 7) is None


def test_failure_records_retries_and_skips():
    state = ReplicaState.of(tick=4, logs="/l")
    err = failure.record(state, 5, None, None, "batch 5: manifest.json is missing")
    assert err.txn is None and str(err).startswith("replication stopped at batch 5")
    assert failure.stored(state).batch == 5
    with pytest.raises(ReplicaStateError, match="Restore the batch"):
        failure.skippable(state, "r")
    assert failure.clear_if_passed(state, read_up_to=4) is None  # batch 5 not read yet
    assert "RECOVERED at batch 5" in failure.clear_if_passed(state, read_up_to=5)
    assert failure.stored(state) is None

    failure.record(state, 5, 5, "s.t", "checksum\nmismatch")
    assert state.error_cause == "checksum mismatch"
    assert failure.skippable(state, "r") == (5, 5)
    assert failure.clear_if_passed(state, read_up_to=99) is None  # tick 4 has not passed txn 5
    state.tick = 5
    assert "RECOVERED at transaction 5" in failure.clear_if_passed(state, read_up_to=5)
    with pytest.raises(ReplicaStateError, match="no failed transaction"):
        failure.skippable(state, "r")


def test_a_new_replicas_path_is_read_once(logs, monkeypatch):
    """The set-up's path check (done by a call's check and again by its run) reads each manifest once
    and hands them to the first round; a batch published meanwhile makes the check walk again."""
    from wlcore.levels import Start
    from wlr.planner import Route

    read_paths = []
    real = batchfmt.read_manifest
    monkeypatch.setattr(batchfmt, "read_manifest", lambda s, p: read_paths.append(p) or real(s, p))
    route, start = (
        Route(Storage.of(logs), os.path.dirname(logs), "m", "id1", "wlc snapshot farm m"),
        Start(-1, None, -1),
    )
    route.check_path(store_of(logs, route.storage), None, start, ALL)
    route.check_path(store_of(logs, route.storage), None, start, ALL)
    assert len(read_paths) == 4
    walked = route.take_walked()
    got = list(read_batches(store_of(logs), "id1", 0, -1, ALL, walked))
    assert [b.number for b in got] == [0, 1, 2, 3] and len(read_paths) == 4 and route.take_walked() == {}
    publish(logs, 4, [6])
    route.check_path(store_of(logs, route.storage), None, start, ALL)
    assert len(read_paths) == 9


def counting(logs):
    """The log folder's storage, counting how often a folder is listed."""
    storage, listed = Storage.of(logs), []
    real = storage.published
    storage.published = lambda path: listed.append(path) or real(path)
    return storage, listed


def test_a_replica_near_the_end_looks_its_batches_up_by_name_without_listing(logs):
    """Published 4 batches (wlc.config's ``batches``): reading from batch 2 or from the end lists nothing."""
    storage, listed = counting(logs)
    got = [b.number for b in read_batches(store_of(logs, storage), "id1", 2, 3, ALL, None, 4)]
    assert got == [2, 3] and listed == []
    assert list(read_batches(store_of(logs, storage), "id1", 4, 5, ALL, None, 4)) == [] and listed == []
    # the config read before capture published batch 4: it is read all the same
    publish(logs, 4, [6])
    got = [b.number for b in read_batches(store_of(logs, storage), "id1", 3, 5, ALL, None, 4)]
    assert got == [3, 4] and listed == []
    # far behind, or the count unknown: one listing, as before
    assert [b.number for b in read_batches(store_of(logs, storage), "id1", 0, -1, ALL, None, None)] == [0, 1, 2, 3, 4]
    assert len(listed) == 1


def test_a_batch_missing_below_the_published_count_is_named_as_a_gap(logs):
    storage, listed = counting(logs)
    shutil.rmtree(batch(logs, 2))
    with pytest.raises(LogError, match="batch 2 is missing .*batch 3 follows") as err:
        list(read_batches(store_of(logs, storage), "id1", 1, 1, ALL, None, 4))
    assert err.value.batch == 2 and listed == [logs]


def test_a_follower_waiting_at_the_end_lists_no_compacted_batches(logs):
    from wlr.planner import Route

    storage, listed = counting(logs)
    route = Route(storage, os.path.dirname(logs), "m", "id1", "wlc snapshot farm m")
    assert route.units(store_of(logs, route.storage), 5, 4, ALL, published=4) == [] and listed == []  # nothing left
    assert (
        route.units(store_of(logs, route.storage), 4, 3, ALL, published=4) == [] and listed == []
    )  # batch 3 there: level 0 it is
    shutil.rmtree(batch(logs, 3))
    assert route.units(store_of(logs, route.storage), 4, 3, ALL, published=4) == [] and listed == [
        logs
    ]  # batch 3 gone: listed
    assert route.units(store_of(logs, route.storage), 1, 1, ALL, published=4) == [] and len(listed) == 2
    from wlcore.state import MasterState

    listed.clear()
    route.check_level0(
        store_of(logs, route.storage), 5, 4, MasterState.of(batches=4), False, ALL
    )  # waiting for batch 4
    assert listed == []


def test_a_replica_one_batch_before_its_target_lists_no_compacted_batches(logs):
    from wlr.planner import Route

    storage, listed = counting(logs)
    route = Route(storage, os.path.dirname(logs), "m", "id1", "wlc snapshot farm m")
    assert route.units(store_of(logs, route.storage), 1, 1, Target("txn", txn=2), published=4) == [] and listed == []
    walked = route.take_walked()  # batch 1's manifest, read once for the round
    assert [b.number for b in read_batches(store_of(logs, storage), "id1", 1, 1, Target("txn", txn=2), walked, 4)] == [
        1
    ]
    assert route.units(store_of(logs, route.storage), 1, 1, Target("txn", txn=3), published=4) == [] and listed == [
        logs
    ]  # two batches
