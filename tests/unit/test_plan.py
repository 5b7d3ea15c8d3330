"""until parsing and replay planning: inclusive bounds, consistent cut, no going back."""
from datetime import datetime, timedelta, timezone

import pytest

from wlr.errors import TargetError
from wlr.plan import Target, TxnRef, check_not_passed, parse_until, plan

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)


def refs(start, n, batch=0, step=1.0):
    return [TxnRef(start + i, T0 + timedelta(seconds=(start + i) * step), batch) for i in range(n)]


def test_parse_until_kinds():
    assert parse_until(None).kind == "all"
    assert parse_until(7) == Target("txn", txn=7)
    assert parse_until("2026-11-22T10:00:05Z").time == T0 + timedelta(seconds=5)
    assert parse_until("2026-11-22 11:00:05+01:00").time == T0 + timedelta(seconds=5)
    naive = parse_until(datetime(2026, 11, 22, 10, 0, 5))
    assert naive.time == T0 + timedelta(seconds=5)  # naive means UTC


@pytest.mark.parametrize("bad", ["halo", "", "12:xx", 3.5, True, -1, object()])
def test_parse_until_rejects(bad):
    with pytest.raises(TargetError):
        parse_until(bad)


def test_malformed_timestamp_message_is_monetdb_like():
    with pytest.raises(TargetError, match="Timestamp 'halo' has incorrect format"):
        parse_until("halo")


def test_txn_target_is_inclusive():
    p = plan(-1, refs(0, 10), Target("txn", txn=3), None, False)
    assert [r.txn for r in p.apply] == [0, 1, 2, 3] and p.reached


def test_txn_target_not_yet_published_waits():
    p = plan(-1, refs(0, 3), Target("txn", txn=5), None, False)
    assert [r.txn for r in p.apply] == [0, 1, 2] and not p.reached
    assert "transaction 5" in p.waiting_for


def test_txn_target_already_there():
    p = plan(4, refs(5, 3), Target("txn", txn=4), None, False)
    assert p.apply == [] and p.reached


def test_time_target_is_inclusive_and_a_cut():
    published = refs(0, 10)  # txn i committed at T0 + i s
    p = plan(-1, published, Target("time", time=T0 + timedelta(seconds=4)), None, False)
    assert [r.txn for r in p.apply] == [0, 1, 2, 3, 4] and p.reached  # txn 5 is later: proof


def test_time_target_needs_watermark_when_no_later_txn():
    published = refs(0, 3)
    target = Target("time", time=T0 + timedelta(seconds=10))
    p = plan(-1, published, target, T0 + timedelta(seconds=9), False)
    assert len(p.apply) == 3 and not p.reached
    assert plan(-1, published, target, T0 + timedelta(seconds=10), False).reached
    assert plan(-1, published, target, None, True).reached  # stopped master publishes nothing more


def test_all_target_applies_everything():
    p = plan(2, refs(3, 4), Target("all"), None, False)
    assert [r.txn for r in p.apply] == [3, 4, 5, 6] and p.reached


def test_gap_is_refused():
    with pytest.raises(ValueError, match="gap-free"):
        plan(-1, [TxnRef(0, T0, 0), TxnRef(2, T0, 0)], Target("all"), None, False)
    with pytest.raises(ValueError):
        plan(3, refs(5, 2), Target("all"), None, False)


def test_going_back_is_refused():
    check_not_passed(Target("txn", txn=6), 6, T0)  # same point: fine
    with pytest.raises(TargetError, match="cannot go back"):
        check_not_passed(Target("txn", txn=4), 6, T0)
    with pytest.raises(TargetError, match="cannot go back"):
        check_not_passed(Target("time", time=T0 - timedelta(seconds=1)), 6, T0)
    check_not_passed(Target("time", time=T0), 6, T0)
