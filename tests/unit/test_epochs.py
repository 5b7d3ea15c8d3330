"""Epoch histories (wlcore.epochs): a restored master's new history is told apart from a restart."""

from __future__ import annotations

import pytest

from wlcore import epochs
from wlcore.state import MasterState


def test_parse_and_format_round_trip():
    h = [(0, "ab12"), (151, "cd34")]
    assert epochs.parse(epochs.format(h)) == h
    assert epochs.parse("") == [] and epochs.parse(None) == []
    with pytest.raises(ValueError, match="malformed"):
        epochs.parse("0:xyz")
    with pytest.raises(ValueError, match="out of order"):
        epochs.parse("5:aa,5:bb")


def test_begin_replaces_a_session_that_wrote_nothing():
    h = epochs.begin([], 0, "a1")
    h = epochs.begin(h, 151, "b2")
    assert h == [(0, "a1"), (151, "b2")]
    assert epochs.begin(h, 151, "c3") == [(0, "a1"), (151, "c3")]  # b2 published nothing
    # a copy restored at tick 100 starts its epoch there: the later history is cut off
    assert epochs.begin(h, 101, "d4") == [(0, "a1"), (101, "d4")]


def test_at_names_the_epoch_of_a_transaction():
    h = [(0, "a1"), (151, "b2")]
    assert epochs.at(h, 150) == "a1" and epochs.at(h, 151) == "b2" and epochs.at(h, 10**9) == "b2"
    assert epochs.at(h, -1) is None


def test_a_restart_is_not_a_divergence():
    replica = [(0, "a1")]  # applied up to 150 in the first session
    master = [(0, "a1"), (151, "b2")]  # restarted, wrote 151..
    assert epochs.diverged(replica, 150, master, 400) is None
    # a source behind the replica (a relay that has not caught up) agrees up to its own tick
    assert epochs.diverged([(0, "a1"), (151, "b2")], 300, [(0, "a1")], 120) is None


def test_a_restored_master_diverges_where_its_new_epoch_begins():
    replica = [(0, "a1")]  # applied up to 200
    restored = [(0, "a1"), (101, "r9")]  # copy restored at 100, then wrote 101..
    assert epochs.diverged(replica, 200, restored, 130) == 101
    # ... but a replica that stood at or before the restore point continues
    assert epochs.diverged(replica, 100, restored, 130) is None
    # the restored master has not written yet: nothing to compare past its tick
    assert epochs.diverged(replica, 200, [(0, "a1"), (101, "r9")], 100) is None
    # after a restart of the original, a restore from before it
    assert epochs.diverged([(0, "a1"), (151, "b2")], 170, [(0, "a1"), (101, "r9")], 120) == 101


def test_unknown_histories_are_not_compared():
    assert epochs.diverged([], 50, [(0, "a1")], 60) is None
    assert epochs.diverged([(0, "a1")], 50, [], 60) is None


def test_start_session_updates_the_config_of_a_master():
    cfg = MasterState.of(tick=-1)
    line = epochs.start_session(cfg)
    first = cfg.epoch
    assert cfg.epochs == f"0:{first}" and "begins at transaction 0" in line
    cfg.tick = 150
    epochs.start_session(cfg)
    assert epochs.parse(cfg.epochs) == [(0, first), (151, cfg.epoch)] and cfg.epoch != first
