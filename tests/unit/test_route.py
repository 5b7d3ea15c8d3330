"""Where replay starts and which levels it reads, decided from a :class:`wlr.planner.LogView`
value: no storage, no Spark."""

from datetime import datetime, timedelta, timezone

import pytest

from wlcore.batch import Manifest, TxnRecord
from wlcore.errors import BatchError
from wlcore.levels import Start
from wlcore.logstore import BatchRef
from wlr.errors import NoStartError, ReplicaStateError, TargetError
from wlr.planner import (
    LogError,
    LogView,
    Target,
    check_level0,
    check_path,
    first_after,
    level0_suffices,
    start_for,
    units,
)

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
ALL = Target("all")


def at(txn: int) -> datetime:
    return T0 + timedelta(seconds=txn)


def rec(txn: int, first: int | None = None) -> TxnRecord:
    return TxnRecord(txn, f"id1:{txn}", at(txn), "s.t", txn, "WRITE", first=first)


class Manifests(dict):
    """Manifests by folder; one not there is missing, as the log store says it."""

    def __missing__(self, path):
        raise BatchError(f"{path}: manifest.json is missing")


def view(level0=range(2, 8), compacted=((1, 0, 3), (1, 4, 7), (2, 0, 7)), starts=None, dbid="id1") -> LogView:
    """Level-0 batch b holds transactions 2b and 2b+1; batches 0 and 1 were pruned, compacted
    batches (level, first, last) hold them; a snapshot at transaction 3 (batch 1)."""
    manifests = Manifests()
    refs = {}
    for b in level0:
        path = f"logs/m_{b:012d}"
        refs[b] = BatchRef(b, 0, b, path)
        manifests[path] = Manifest("m", "id1", b, at(2 * b + 1), [rec(2 * b), rec(2 * b + 1)])
    listed = []
    for level, first, last in compacted:
        path = f"logs/m_L{level}_{first:012d}_{last:012d}"
        listed.append(BatchRef(first, level, last, path))
        span = (2 * first, 2 * last + 1)
        manifests[path] = Manifest(
            "m", "id1", first, at(span[1]), [rec(span[1], span[0])], level=level, last_batch=last, span=span
        )
    if starts is None:
        starts = (Start(3, at(3), 1, "snap/3"),)
    return LogView("m", dbid, refs, tuple(sorted(listed)), tuple(starts), manifests, "wlc snapshot farm m")


def levels(batches) -> list[str]:
    return [b.path.rsplit("/", 1)[-1] for b in batches]


def test_a_replica_takes_the_coarsest_compacted_batches_that_end_by_its_target():
    v = view()
    assert levels(units(v, -1, 0, ALL)) == ["m_L2_000000000000_000000000007"]
    assert levels(units(v, -1, 0, Target("txn", txn=9))) == ["m_L1_000000000000_000000000003"]
    assert levels(units(v, 7, 4, ALL)) == ["m_L1_000000000004_000000000007"]
    assert units(v, -1, 0, Target("txn", txn=5)) == []  # none ends by then: level 0 from batch 0


def test_a_replica_whose_next_level0_batch_reaches_the_target_reads_level0():
    v = view()
    assert level0_suffices(v, 4, Target("txn", txn=8), None)
    assert units(v, 7, 4, Target("txn", txn=8), published=8) == []
    assert level0_suffices(v, 8, ALL, published=8)  # nothing published after it
    assert level0_suffices(v, 4, ALL, published=5)  # batch 4 is the last one published
    assert not level0_suffices(v, 1, ALL, published=8)  # pruned: a compacted batch may hold it


def test_a_damaged_or_foreign_compacted_batch_is_a_log_error():
    v = view()
    del v.manifests["logs/m_L1_000000000004_000000000007"]
    with pytest.raises(LogError, match="compacted batch m_L1_000000000004_000000000007: .*missing") as err:
        units(v, 7, 4, ALL)
    assert err.value.batch == 4
    with pytest.raises(LogError, match="is not a level-1 batch of this master"):
        units(view(dbid="other"), -1, 0, Target("txn", txn=9))


def test_a_new_replica_starts_from_the_newest_snapshot_by_its_target():
    v = view(starts=(Start(-1, None, -1), Start(3, at(3), 1, "snap/3"), Start(9, at(9), 4, "snap/9")))
    assert start_for(v, Target("txn", txn=8)).txn == 3
    assert start_for(v, ALL).txn == 9
    assert start_for(v, ALL, snapshot=3).path == "snap/3"
    with pytest.raises(TargetError, match="no snapshot at transaction 5; its snapshots are at transactions -1, 3, 9"):
        start_for(v, ALL, snapshot=5)
    with pytest.raises(TargetError, match="the snapshot at transaction 9 is after the target"):
        start_for(v, Target("txn", txn=8), snapshot=9)
    with pytest.raises(TargetError, match="older than the earliest reachable point of master 'm': transaction 3"):
        start_for(view(), Target("txn", txn=2))
    with pytest.raises(NoStartError, match="no reachable starting point") as err:
        start_for(view(starts=()), ALL)
    assert "wlc snapshot farm m" in err.value.cli


def test_the_first_transaction_after_a_snapshot():
    assert first_after(view(), Start(3, at(3), 1)) == (4, at(4))
    assert first_after(view(), Start(-1, None, -1)) is None  # level 0 begins at transaction 4: pruned


def test_a_path_from_a_snapshot_walks_level0_then_compacted_batches():
    check_path(view(), Start(3, at(3), 1), ALL)  # batches 2, 3, then L1 4-7
    check_path(view(), Start(3, at(3), 1), ALL, compacted=False)  # level 0 only


def test_a_pruned_batch_on_a_new_replicas_path_refuses_the_target():
    v = view(level0=range(4, 8))  # batches 2 and 3 pruned too; the compacted L1 0-3 holds them
    with pytest.raises(TargetError, match="level-0 batch 2 .*pruned by retention; it lies inside a compacted batch"):
        check_path(v, Start(3, at(3), 1), ALL)
    with pytest.raises(TargetError, match="earliest reachable point is transaction 3"):
        check_level0(v, 3, 2, True, ALL)


def test_a_replica_further_behind_than_kept_is_refused_and_a_gap_is_left_to_replay():
    v = view(level0=range(4, 8), compacted=((1, 0, 3),))
    with pytest.raises(ReplicaStateError, match="at transaction 3, further behind than the master keeps"):
        check_level0(v, 3, 2, False, ALL)
    with pytest.raises(TargetError, match="compacted batches holding it end at level-0 batch 3"):
        check_level0(v, -1, 0, False, ALL)  # a compacted batch starts there but replay did not take it
    check_level0(v, 7, 4, False, ALL)  # there
    check_level0(v, 15, 8, False, ALL, published=8)  # not published yet
    check_level0(view(level0=(2, 3, 5, 6, 7), compacted=()), 7, 4, False, ALL)  # a gap: read_batches names it


def test_a_missing_level0_manifest_on_the_path_names_its_batch():
    v = view()
    del v.manifests["logs/m_000000000003"]
    with pytest.raises(LogError, match="batch 3: .*missing") as err:
        check_path(v, Start(3, at(3), 1), ALL)
    assert err.value.batch == 3
