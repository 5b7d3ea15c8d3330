"""Pure logic of the log's levels: restore path planning, which runs compaction merges,
what retention deletes, and the interval settings (no Spark)."""

from datetime import datetime, timedelta, timezone

import pytest

from wlcore.levels import Span, Start, choose_start, restore_path, runs_to_merge
from wlcore.retention import retain
from wlcore.settings import ConfigError, Every, every
from wlcore.target import Target

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def level0(n: int, per: int = 2, minutes: int = 10) -> list[Span]:
    """``n`` level-0 batches of ``per`` transactions, one every ``minutes``."""
    return [
        Span(
            0,
            b,
            b,
            b * per,
            b * per + per - 1,
            T0 + timedelta(minutes=minutes * b),
            first_time=T0 + timedelta(minutes=minutes * b - 1),
        )
        for b in range(n)
    ]


def merged(level: int, parts: list[Span]) -> Span:
    return Span(
        level, parts[0].first_batch, parts[-1].last_batch, parts[0].first_txn, parts[-1].last_txn, parts[-1].last_time
    )


def ladder():
    """24 level-0 batches (48 txns), level 1 per 4 batches, level 2 per 2 level-1 batches."""
    l0 = level0(24)
    l1 = [merged(1, l0[i : i + 4]) for i in range(0, 24, 4)]
    l2 = [merged(2, l1[i : i + 2]) for i in range(0, 6, 2)]
    return l0, l1, l2


# ----------------------------------------------------------------------------- restore path


def test_restore_path_takes_the_coarsest_batches_that_fit_then_finer():
    l0, l1, l2 = ladder()
    # to transaction 41 (inside level-0 batch 20): L2 0-7, L2 8-15, L1 16-19, then level 0 does the rest
    path = restore_path(-1, l1 + l2, Target("txn", txn=41))
    assert [(s.level, s.first_batch, s.last_batch) for s in path] == [(2, 0, 7), (2, 8, 15), (1, 16, 19)]
    assert path[-1].last_txn == 39
    # everything: all level 2
    assert [s.level for s in restore_path(-1, l1 + l2)] == [2, 2, 2]


def test_restore_path_starts_only_where_the_replica_stands():
    l0, l1, l2 = ladder()
    # a replica at transaction 9 (end of level-0 batch 4) is inside L1 0-3's successor: L1 4-7 begins at txn 8
    assert restore_path(9, l1 + l2) == []
    # at transaction 15 (end of batch 7): L1 8-11 or L2 8-15 begin at 16; the coarser wins
    assert [(s.level, s.first_batch) for s in restore_path(15, l1 + l2)] == [(2, 8), (2, 16)]


def test_restore_path_by_instant_uses_the_last_commit_time():
    l0, l1, l2 = ladder()
    # batch b's last commit is at b * 10 minutes; until 75 minutes: batches 0..7 fit
    path = restore_path(-1, l1 + l2, Target("time", time=T0 + timedelta(minutes=75)))
    assert [(s.level, s.first_batch, s.last_batch) for s in path] == [(2, 0, 7)]
    assert restore_path(-1, l1 + l2, Target("time", time=T0 - timedelta(minutes=1))) == []


def test_choose_start_is_the_newest_snapshot_at_or_before_the_target():
    starts = [
        Start(-1, None, -1, "initial"),
        Start(9, T0 + timedelta(minutes=40), 4, "9"),
        Start(29, T0 + timedelta(minutes=140), 14, "29"),
    ]
    assert choose_start(starts).txn == 29
    assert choose_start(starts, Target("txn", txn=28)).txn == 9
    assert choose_start(starts, Target("txn", txn=29)).txn == 29
    assert choose_start(starts, Target("time", time=T0 + timedelta(minutes=139))).txn == 9
    assert choose_start(starts[1:], Target("txn", txn=3)) is None


# ----------------------------------------------------------------------------- compaction runs


def test_runs_by_count_are_complete_consecutive_and_never_overlap():
    l0 = level0(10)
    runs = runs_to_merge(l0, [], Every(4, "batches"), T0)
    assert [[s.first_batch for s in r] for r in runs] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    done = [merged(1, runs[0])]
    assert [[s.first_batch for s in r] for r in runs_to_merge(l0, done, Every(4, "batches"), T0)] == [[4, 5, 6, 7]]
    # a gap stops merging: nothing after it is merged
    gap = [s for s in l0 if s.first_batch != 5]
    assert [[s.first_batch for s in r] for r in runs_to_merge(gap, done, Every(4, "batches"), T0)] == []


def test_runs_by_time_window_wait_until_the_window_is_over():
    l0 = level0(13)  # one every 10 minutes: 0:00 .. 2:00
    hour = Every(3600)
    # the watermark at 1:35: only the first hour's window is over
    runs = runs_to_merge(l0, [], hour, T0 + timedelta(minutes=95))
    assert [[s.first_batch for s in r] for r in runs] == [[0, 1, 2, 3, 4, 5]]
    runs = runs_to_merge(l0, [], hour, T0 + timedelta(hours=3))
    assert [[s.first_batch for s in r] for r in runs] == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11], [12]]


# ----------------------------------------------------------------------------- retention


def test_retention_keeps_the_base_snapshot_and_the_chain_to_every_promised_point():
    l0, l1, l2 = ladder()  # batch b ends at b*10 minutes; now is 4 h after batch 23
    now = T0 + timedelta(minutes=230, hours=4)
    starts = [Start(-1, None, -1, "initial"), Start(15, T0 + timedelta(minutes=70), 7, "15")]
    keep = {"level0": Every(4 * 3600 + 60 * 60), "level1": Every(10 * 3600), "level2": None, "snapshots": Every(60)}
    d = retain(starts, l0 + l1 + l2, now, keep)
    # level 0 of the last 5 hours stays (batches ending at or after 2:50: 17..23), and batch 16:
    # from the base (txn 15, the end of batch 7) level 2 reaches the end of batch 15, and
    # level 1 16-19 ends past batch 17's transactions, so batch 16 is what reaches 17's start
    kept0 = sorted(s.first_batch for s in d.kept if s.level == 0)
    assert kept0 == list(range(16, 24))
    # the snapshot at 15 is the base; the initial snapshot goes
    assert [s.txn for s in d.kept_snapshots] == [15] and [s.txn for s in d.delete_snapshots] == [-1]
    assert d.earliest.txn == 15
    # level 1 and 2 are within retention: all kept
    assert {(s.level, s.first_batch) for s in d.kept if s.level} == {(s.level, s.first_batch) for s in l1 + l2}


def test_retention_never_deletes_what_a_kept_snapshot_needs():
    l0 = level0(12)
    now = T0 + timedelta(days=10)
    starts = [Start(5, T0 + timedelta(minutes=20), 2, "5")]
    keep = {"level0": Every(3600), "level1": None, "level2": None, "snapshots": Every(3600)}
    d = retain(starts, l0, now, keep)
    # everything is old; the only snapshot is the base; the newest batch is always kept (capture
    # resumes from it) and the chain from the snapshot to it is needed
    assert [s.first_batch for s in d.kept] == list(range(3, 12))
    assert [s.first_batch for s in d.delete] == [0, 1, 2]
    assert d.earliest.txn == 5


def test_retention_forever_deletes_nothing():
    l0, l1, l2 = ladder()
    starts = [Start(-1, None, -1, "initial")]
    d = retain(
        starts,
        l0 + l1 + l2,
        T0 + timedelta(days=400),
        {"level0": None, "level1": None, "level2": None, "snapshots": None},
    )
    assert d.delete == [] and d.delete_snapshots == []
    assert d.earliest.txn == -1


def test_level0_pruned_but_compacted_kept_leaves_boundaries_reachable():
    l0, l1, l2 = ladder()
    starts = [Start(-1, None, -1, "")]  # a master that began with no table
    d = retain(
        starts,
        l0 + l1 + l2,
        T0 + timedelta(days=2),
        {"level0": Every(3600), "level1": None, "level2": None, "snapshots": Every(3600)},
    )
    assert {s.level for s in d.delete} == {0}
    # the newest batch stays (capture resumes from it), and so do the level-0 batches that
    # reach its first transaction from level 1's boundary before it
    assert [s.first_batch for s in d.kept if s.level == 0] == [20, 21, 22, 23]
    assert d.earliest.txn == -1  # the empty start stays: level 2 begins there
    # one point, one time: level 0 promises every transaction from the oldest kept batch's first one (at its
    # commit time), a compacted level every boundary from its oldest kept batch's end (at that end's time)
    assert ("level 2", l2[0].last_txn, l2[0].last_time) in d.granularity
    assert ("level 0", l0[23].first_txn, l0[23].first_time) in d.granularity


# ----------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        (False, None),
        ("off", None),
        (0, None),
        (3600, Every(3600)),
        ("90s", Every(90)),
        ("15m", Every(900)),
        ("6h", Every(21600)),
        ("1d", Every(86400)),
        ("2w", Every(1209600)),
        ("500 transactions", Every(500, "transactions")),
        ("4 batches", Every(4, "batches")),
    ],
)
def test_every_parses_durations_and_counts(value, expected):
    assert every(value, "x", ("transactions", "batches")) == expected


@pytest.mark.parametrize("value", ["soon", "5 parsecs", True, "-3", "4 batches"])
def test_every_refuses_other_values_naming_the_setting(value):
    with pytest.raises(ConfigError, match="master.snapshot_interval must be"):
        every(value, "master.snapshot_interval", ("transactions",))


def test_next_due_says_when_the_next_window_closes():
    from wlcore.levels import next_due

    l0 = level0(3, minutes=10)  # last transactions at T0, T0+10min, T0+20min
    line = next_due(l0, [], Every(3600), T0 + timedelta(minutes=30), 1)
    assert line.startswith("level 1: due once the master's watermark passes 2026-11-01T01:00:00Z")
    assert "level-0 batches 0-2" in line
    assert next_due(l0, [], Every(10, "batches"), T0, 1).startswith("level 1: 3 of 10 level-0 batches")
    done = [Span(1, 0, 2, 0, 5, l0[-1].last_time)]
    assert "no level-0 batch since the last level-1 batch" in next_due(l0, done, Every(3600), T0, 1)
