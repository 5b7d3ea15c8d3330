"""Held tables: backoff, the watermark kept before them, late transactions placed in order (pure)."""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from wlc.capture import Holds, place_in_order
from wlr.errors import TargetError
from wlr.planner import Target, TxnRef, plan

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_backoff_doubles_up_to_the_longest_wait_and_keeps_the_first_bound():
    holds = Holds(interval=1.0, longest=5.0)
    h = holds.hold("s.a", "corrupt", at(10), at(0))
    assert not holds.due("s.a") and holds.due("s.b")
    waits = []
    for _ in range(4):
        h = holds.hold("s.a", "corrupt", at(20), at(0))
        waits.append((h.next_at - at(0)).total_seconds())
    assert waits == [2.0, 4.0, 5.0, 5.0] and h.attempts == 5 and h.bound == at(10)
    assert "5 attempts" in holds.status()["s.a"]
    assert holds.watermark(at(30)) == at(10) - timedelta(microseconds=1)
    assert holds.watermark(at(5)) == at(5)
    assert holds.release("s.a") and not holds.release("s.a") and holds.watermark(at(30)) == at(30)


def test_a_table_held_for_its_rows_is_released_by_writing_them_not_by_a_scan():
    holds = Holds(interval=1.0, longest=5.0)
    holds.hold("s.a", "corrupt file", at(10), at(0), kind="rows")
    assert not holds.release("s.a", "log") and "s.a" in holds.held  # its log read well: still held
    h = holds.hold("s.a", "corrupt file", at(12), at(0), kind="rows")
    assert h.attempts == 2 and h.bound == at(10)  # the backoff goes on
    assert holds.release("s.a", "rows") and not holds.held


@dataclass
class Item:
    time: datetime
    committed: datetime | None = None


def test_late_transactions_take_their_place_and_keep_their_commit_time():
    items = [Item(at(1)), Item(at(2)), Item(at(9))]
    place_in_order(items, at(5))  # a transaction at 5 s was published before them
    assert [i.committed for i in items] == [at(1), at(2), None]
    assert items[0].time < items[1].time < items[2].time and items[0].time > at(5)
    same = [Item(at(5))]
    place_in_order(same, at(5))  # the same millisecond is not late
    assert same[0].committed is None and same[0].time == at(5)


def test_an_instant_inside_a_late_window_is_refused_and_others_are_exact():
    refs = [
        TxnRef(0, at(1), 0, "s.b"),
        TxnRef(1, at(5), 1, "s.b"),
        TxnRef(2, at(5) + timedelta(microseconds=1), 2, "s.a", committed=at(3)),
    ]
    assert [r.txn for r in plan(-1, refs, Target("time", time=at(2)), at(10), False).apply] == [0]
    assert [r.txn for r in plan(-1, refs, Target("time", time=at(6)), at(10), False).apply] == [0, 1, 2]
    with pytest.raises(TargetError, match="captured late"):
        plan(-1, refs, Target("time", time=at(4)), at(10), False)
