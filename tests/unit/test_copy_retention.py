"""Pure rules of copy retention (no Spark): what a prune notes in a folder's wlc.retention,
which folders a shipping pass then skips, the copy's own retention over master.retention,
the --retention arguments, and the promise said by wlc prune and wlr status."""

from datetime import timedelta

import pytest

from wlcore.errors import ConfigError
from wlcore.levels import Start
from wlcore.retention import RetentionState, add_range, covered, promise_lines, promise_of, retain, retention_args
from wlcore.settings import Every

from .test_levels import T0, ladder, level0


def test_ranges_merge_when_they_touch_and_cover_only_whole_ranges():
    r = add_range([], 5, 5)
    r = add_range(r, 6, 6)  # next to it: one range
    r = add_range(r, 9, 12)
    assert r == [[5, 6], [9, 12]]
    assert add_range(r, 7, 8) == [[5, 12]]
    assert covered(r, 9, 12) and covered(r, 5, 5) and not covered(r, 6, 9) and not covered(r, 13, 13)
    # snapshots: one range from the lowest to the highest (older ones are deletable too)
    assert add_range([[-1, -1]], 40, 40, hull=True) == [[-1, 40]]
    assert add_range([], 3, 3) == [[3, 3]] and add_range([[1, 2]], 1, 2) == [[1, 2]]


def test_a_prune_noted_makes_shipping_skip_exactly_what_it_deleted():
    l0, l1, l2 = ladder()
    now = T0 + timedelta(minutes=230, hours=4)
    starts = [Start(-1, None, -1, "initial"), Start(15, T0 + timedelta(minutes=70), 7, "15")]
    keep = {"level0": Every(5 * 3600), "level1": Every(10 * 3600), "level2": None, "snapshots": Every(60)}
    d = retain(starts, l0 + l1 + l2, now, keep)
    state = RetentionState()
    state.record(d.delete, d.delete_snapshots, promise_of(d), now)
    assert state.pruned == now and state.deleted["level0"] == [[0, 15]]
    for s in l0 + l1 + l2:
        assert state.skips_batch(s.level, s.first_batch, s.last_batch) == (s in d.delete), s
    # the initial snapshot went: it and anything older is skipped, newer ones are shipped
    assert state.skips_snapshot(-1) and not state.skips_snapshot(15) and not state.skips_snapshot(60)
    # the file keeps it, as text read back the same
    again = RetentionState.from_text(state.to_text())
    assert again.deleted == state.deleted and again.promise == state.promise and again.pruned == now
    # a later prune adds to what was deleted
    later = retain(starts[1:], l0[16:], now + timedelta(hours=2), {**keep, "level0": Every(3600)})
    again.record(later.delete, later.delete_snapshots, promise_of(later), now + timedelta(hours=2))
    assert again.deleted["level0"][0][0] == 0 and again.skips_batch(0, 16, 16) == (l0[16] in later.delete)


def test_a_copys_own_retention_overrides_the_masters_level_by_level():
    master = {"level0": Every(86400), "level1": None, "level2": None, "snapshots": Every(30 * 86400)}
    state = RetentionState()
    assert state.keep(master) == master  # nothing set: the master's
    state.set_keep({"level0": "2h", "level1": "off"})
    assert state.keep(master) == {**master, "level0": Every(7200), "level1": None}
    assert "level0 2h" in state.described() and "snapshots as master.retention" in state.described()
    state.set_keep({"level0": None})  # back to the master's
    assert state.keep(master)["level0"] == Every(86400) and not state.has("level0")
    # bad input changes nothing and names the fix
    with pytest.raises(ConfigError, match="not a level: use one of level0, level1, level2, snapshots"):
        state.set_keep({"level3": "1d", "level2": "1d"})
    with pytest.raises(ConfigError, match="retention level2"):
        state.set_keep({"level2": "a while"})
    assert state.level2 == ""


def test_retention_arguments_of_the_command_lines():
    assert retention_args(None) == {}
    assert retention_args(["level0=1d,snapshots=30d", "level1=master"]) == {
        "level0": "1d",
        "snapshots": "30d",
        "level1": None,
    }
    with pytest.raises(ConfigError, match="write LEVEL=DURATION"):
        retention_args(["1d"])
    with pytest.raises(ConfigError, match="retention level0"):
        retention_args(["level0=soon"])


def test_the_promise_says_the_earliest_point_what_each_level_keeps_and_the_snapshots():
    l0 = level0(12)
    now = T0 + timedelta(days=10)
    starts = [Start(5, T0 + timedelta(minutes=20), 2, "/copy/wlc_snapshot/5")]
    d = retain(starts, l0, now, {"level0": None, "level1": None, "level2": None, "snapshots": None})
    promise = promise_of(d)
    assert promise["earliest"] == {"txn": 5, "time": "2026-11-01T00:20:00.000000Z", "snapshot": "5"}
    lines = promise_lines(promise)
    assert lines[0] == "earliest reachable point: transaction 5 (2026-11-01T00:20:00.000000Z), the snapshot 5"
    assert lines[1].strip().startswith("every transaction from transaction 6 (")
    assert lines[-1].strip() == "snapshots at transactions 5"
    assert promise_lines({}) == ["nothing reachable (no snapshot)"]
    empty = promise_of(retain([Start(-1, None, -1, "")], l0, now, {}))
    assert "an empty start" in promise_lines(empty)[0] and "the start of master mode" in promise_lines(empty)[0]


def test_status_says_the_promise_on_one_line():
    from wlr.monitor import promised

    d = retain([Start(5, T0, 2, "/c/wlc_snapshot/5")], level0(12), T0 + timedelta(days=1), {})
    line = promised(promise_of(d))
    assert line.startswith("earliest reachable point: transaction 5") and "; every transaction from" in line
    assert promised({}) == "all it holds (never pruned)" and "cannot be read" in promised(None)


def test_bad_retention_arguments_and_names_are_refused_before_anything_is_done(tmp_path, capsys):
    from wlc.cli import main as wlc_main
    from wlr.cli import main as wlr_main

    far = tmp_path / "far"
    assert wlc_main(["ship", str(tmp_path), "m", str(far), "--retention", "level9=1d"]) == 2
    assert "not a level: use one of level0" in capsys.readouterr().err and not far.exists()
    assert wlc_main(["prune", str(tmp_path), "m", "--retention", "level0=1d"]) == 2
    assert "name the copy with --copy URL" in capsys.readouterr().err
    assert wlr_main(["prune", str(tmp_path), "nope"]) == 3  # no such replica: not found
    assert wlr_main(["prune", str(tmp_path), "nope", "--retention", "level0"]) == 2
    assert "write LEVEL=DURATION" in capsys.readouterr().err
