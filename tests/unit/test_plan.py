"""until parsing and replay planning: inclusive bounds, consistent cut, no going back."""

from datetime import datetime, timedelta, timezone

import pytest

from wlr.errors import TargetError
from wlr.planner import Target, TxnRef, check_not_passed, consistent_tick, is_barrier, parse_until, plan, segments

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


@pytest.mark.parametrize("bad", ["halo", "", "12:xx", 3.5, True, -2, object()])
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


# ----------------------------------------------------------------------------- segments


def mix(spec, batch_size=3):
    """``spec``: "a a A b a" -> refs: lower case DML on table s.<x>, upper case a barrier."""
    out = []
    for i, code in enumerate(spec.split()):
        out.append(TxnRef(i, T0 + timedelta(seconds=i), i // batch_size, f"s.{code.lower()}", code.isupper()))
    return out


def spans(segs):
    return {t: [(s.first, s.last) for s in ss] for t, ss in segs.items()}


def test_segments_group_a_tables_run_across_batches_and_other_tables():
    segs = segments(mix("a b a a b a b b"))
    assert spans(segs) == {"s.a": [(0, 5)], "s.b": [(1, 7)]}
    assert [r.txn for r in segs["s.a"][0].txns] == [0, 2, 3, 5]  # only its own table's transactions
    assert {r.batch for r in segs["s.a"][0].txns} == {0, 1}


def test_ddl_in_the_middle_cuts_the_run():
    segs = segments(mix("a a A a a b"))
    assert spans(segs)["s.a"] == [(0, 1), (2, 2), (3, 4)]
    assert [s.barrier for s in segs["s.a"]] == [False, True, False]
    assert spans(segs)["s.b"] == [(5, 5)]


def test_drop_and_recreate_are_barriers_in_order():
    # DML, drop (barrier), create (barrier), DML, image (barrier), DML
    segs = segments(mix("a a A A a a A a"))
    assert spans(segs)["s.a"] == [(0, 1), (2, 2), (3, 3), (4, 5), (6, 6), (7, 7)]


def test_collapse_false_keeps_one_segment_a_transaction():
    segs = segments(mix("a b a a"), collapse=False)
    assert spans(segs) == {"s.a": [(0, 0), (2, 2), (3, 3)], "s.b": [(1, 1)]}


def test_target_in_the_middle_of_a_run_ends_the_segment_there():
    published = mix("a a b a a a b a")
    p = plan(-1, published, Target("txn", txn=4), None, False)
    assert spans(segments(p.apply)) == {"s.a": [(0, 4)], "s.b": [(2, 2)]}
    # the next round starts after the target
    p2 = plan(4, published[5:], Target("all"), None, False)
    assert spans(segments(p2.apply)) == {"s.a": [(5, 7)], "s.b": [(6, 6)]}


def test_target_by_instant_ends_every_segment_at_the_cut():
    published = mix("a b a b a b")  # txn i commits at T0 + i s
    p = plan(-1, published, parse_until((T0 + timedelta(seconds=3.5)).isoformat()), None, False)
    assert p.reached and spans(segments(p.apply)) == {"s.a": [(0, 2)], "s.b": [(1, 3)]}


def test_consistent_tick_is_the_highest_gap_free_point():
    todo = mix("a b a b a")
    assert consistent_tick(-1, todo, {"s.a": 4, "s.b": 3}) == 4
    assert consistent_tick(-1, todo, {"s.a": 4, "s.b": 1}) == 2  # b stopped before 3
    assert consistent_tick(-1, todo, {"s.a": 0}) == 0
    assert consistent_tick(-1, todo, {}) == -1
    assert consistent_tick(9, [], {}) == 9


def test_an_alter_that_only_adds_columns_does_not_cut_the_run():
    assert not is_barrier("alter", None, ["note"]) and not is_barrier("alter", "cdf", ["note"])
    assert is_barrier("alter", None, []) and is_barrier("create", None, []) and is_barrier("drop", None)
    assert is_barrier("alter", "image", ["note"]) and is_barrier(None, "image") and not is_barrier(None, "cdf")
    kinds = [(None, "cdf", []), ("alter", None, ["note"]), (None, "cdf", []), ("alter", None, [])]
    todo = [TxnRef(i, T0 + timedelta(seconds=i), 0, "s.a", is_barrier(*k)) for i, k in enumerate(kinds)]
    assert spans(segments(todo)) == {"s.a": [(0, 2), (3, 3)]}
