"""The state files as typed objects (wlcore.state.MasterState, wlcore.state.ReplicaState):
texts written by the dict-based writers before them are read, typed and written back byte for byte.
No Spark."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from wlcore.errors import ConfigError
from wlcore.state import (
    STOPPED,
    WATERMARK_STOPPED,
    MasterState,
    ReplicaState,
    capture_liveness,
    logs_of,
    read_master_state,
    read_replica_state,
    write_master_state,
    write_replica_state,
)
from wlcore.storage import Storage

# written by a master and its replicas (tests/integration/test_replay.py, before the typed objects)
MASTER_TEXT = """\
snapshot=
logs=/farm/test_point_in_time_is_a_consis0/dbfarm/m/wlc_logs
state=1
batches=7
beat=0
write=2026-11-25T05:12:16.394000Z
dbid=eed78245c0274f57a7a4bc6505df89b5
format=1
tick=6
watermark=2026-11-25T05:12:27.416864Z
created=2026-11-25T05:10:39.865854Z
not_replicated=
epoch=54c8c4ed20cb9806
epochs=0:54c8c4ed20cb9806
heartbeat=2026-11-25T05:12:27.735868Z
capture_stopped=2026-11-25T05:12:27.889795Z
"""

MASTER_RUNNING_TEXT = """\
snapshot=
logs=/farm/test_follow_mode_picks_up_new_0/dbfarm/m/wlc_logs
state=1
batches=3
beat=0
write=2026-11-25T05:12:41.386000Z
dbid=b556a42e2e65465294eada6330722315
format=1
tick=2
watermark=2026-11-25T05:12:42.726214Z
created=2026-11-25T05:12:28.211794Z
not_replicated=
epoch=4f94995f2041633c
epochs=0:4f94995f2041633c
heartbeat=2026-11-25T05:12:42.932885Z
capture_stopped=2026-11-25T05:12:42.977114Z
"""

REPLICA_TEXT = """\
master=m
masterfarm=/farm/test_point_in_time_is_a_consis0/dbfarm
dbid=eed78245c0274f57a7a4bc6505df89b5
source=/farm/test_point_in_time_is_a_consis0/dbfarm/m
source_kind=master
select_tables=
select_where=
logs=/farm/test_point_in_time_is_a_consis0/dbfarm/m/wlc_logs
batches=7
tick=6
clock=2026-11-25T05:12:16.394000Z
skipped=
state=idle
error_batch=
error_txn=
error_table=
error_cause=
epochs=0:54c8c4ed20cb9806
epoch=54c8c4ed20cb9806
view=6
version.s.b=3
version.s.a=4
until=
at.s.b=3
at.s.a=4
"""

REPLICA_UNTIL_TEXT = """\
master=m
masterfarm=/farm/test_point_in_time_is_a_consis0/dbfarm
dbid=eed78245c0274f57a7a4bc6505df89b5
source=/farm/test_point_in_time_is_a_consis0/dbfarm/m
source_kind=master
select_tables=
select_where=
logs=/farm/test_point_in_time_is_a_consis0/dbfarm/m/wlc_logs
batches=4
tick=3
clock=2026-11-25T05:11:01.550000Z
skipped=
state=idle
error_batch=
error_txn=
error_table=
error_cause=
epochs=0:54c8c4ed20cb9806
epoch=54c8c4ed20cb9806
view=3
version.s.b=2
version.s.a=2
at.s.b=2
at.s.a=2
until=2026-11-25T05:11:02.784415+00:00
"""

FOLLOWER_TEXT = """\
master=m
masterfarm=/farm/test_follow_mode_picks_up_new_0/dbfarm
dbid=b556a42e2e65465294eada6330722315
source=/farm/test_follow_mode_picks_up_new_0/dbfarm/m
source_kind=master
select_tables=
select_where=
logs=/farm/test_follow_mode_picks_up_new_0/dbfarm/m/wlc_logs
batches=2
tick=1
clock=2026-11-25T05:12:31.774000Z
skipped=
state=idle
error_batch=
error_txn=
error_table=
error_cause=
epochs=0:4f94995f2041633c
epoch=4f94995f2041633c
view=1
version.s.f=2
until=
heartbeat=2026-11-25T05:12:40.816985Z
at.s.f=2
"""


@pytest.mark.parametrize("text", [MASTER_TEXT, MASTER_RUNNING_TEXT])
def test_a_master_state_written_back_is_the_same_text(text):
    assert MasterState.from_text(text).to_text() == text


@pytest.mark.parametrize("text", [REPLICA_TEXT, REPLICA_UNTIL_TEXT, FOLLOWER_TEXT])
def test_a_replica_state_written_back_is_the_same_text(text):
    assert ReplicaState.from_text(text).to_text() == text


def test_the_master_state_is_typed():
    cfg = MasterState.from_text(MASTER_TEXT)
    assert (cfg.state, cfg.batches, cfg.tick, cfg.format, cfg.beat) == (1, 7, 6, 1, 0.0)
    assert cfg.write == datetime(2026, 11, 25, 5, 12, 16, 394000, tzinfo=timezone.utc)
    assert cfg.capture_stopped is not None and cfg.capture_stopped.tzinfo == timezone.utc
    assert cfg.not_replicated == {} and cfg.snapshot == "" and not cfg.stopped
    assert logs_of(cfg, "/elsewhere/m") == "/farm/test_point_in_time_is_a_consis0/dbfarm/m/wlc_logs"
    assert capture_liveness(cfg, datetime(2026, 11, 25, 6, tzinfo=timezone.utc))[0] == "stopped"
    cfg.capture_stopped = None
    cfg.drop("capture_stopped")  # as the heartbeat does: the key goes, not only its value
    assert "capture_stopped" not in cfg.to_text() and not cfg.has("capture_stopped")


def test_the_replica_state_is_typed():
    st = ReplicaState.from_text(REPLICA_TEXT)
    assert (st.master, st.tick, st.batches, st.view, st.relay) == ("m", 6, 7, 6, False)
    assert st.versions == {"s.b": 3, "s.a": 4} and st.views == {"s.b": 3, "s.a": 4}
    assert st.error_batch is None and st.error_cause == "" and st.skipped == []
    assert st.clock == datetime(2026, 11, 25, 5, 12, 16, 394000, tzinfo=timezone.utc)


def test_keys_keep_their_order_and_new_ones_are_appended_as_a_dict_would():
    cfg = MasterState.of(snapshot="", logs="/l", state=1, batches=0, beat=0.5, write=None, tick=-1, watermark=None)
    assert cfg.to_text() == "snapshot=\nlogs=/l\nstate=1\nbatches=0\nbeat=0.5\nwrite=\ntick=-1\nwatermark=\n"
    cfg.heartbeat = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    cfg.state, cfg.watermark = STOPPED, WATERMARK_STOPPED
    assert cfg.to_text().endswith(
        "state=2\nbatches=0\nbeat=0.5\nwrite=\ntick=-1\nwatermark=stopped\nheartbeat=2026-01-02T03:04:05.000000Z\n"
    )
    st = ReplicaState.from_text(FOLLOWER_TEXT)
    st.drop_version("s.f")
    st.set_version("s.g", 7)
    st.set_views({"s.g": 7})
    text = st.to_text()
    assert "version.s.f" not in text and "at.s.f" not in text
    assert text.endswith("until=\nheartbeat=2026-11-25T05:12:40.816985Z\nversion.s.g=7\nat.s.g=7\n")


def test_keys_given_to_the_constructor_are_written_and_stay_keys_when_set_again():
    cfg = MasterState(tick=-1, dbid="abc", state=1)
    assert cfg.to_text() == "state=1\ndbid=abc\ntick=-1\n"  # the fields' order
    cfg.dbid, cfg.batches = "def", 3
    assert cfg.to_text() == "state=1\ndbid=def\ntick=-1\nbatches=3\n"
    cfg.drop("dbid")
    cfg.dbid = "ghi"  # dropped, then set again: appended
    assert cfg.to_text() == "state=1\ntick=-1\nbatches=3\ndbid=ghi\n"


def test_unknown_keys_are_kept_where_they_stood():
    text = MASTER_TEXT.replace("format=1\n", "format=1\nfuture_key=a=b\n") + "later=x\n"
    cfg = MasterState.from_text(text)
    assert cfg.extra == {"future_key": "a=b", "later": "x"}
    cfg.tick = 7
    assert cfg.to_text() == text.replace("tick=6", "tick=7")
    rtext = FOLLOWER_TEXT.replace("state=idle\n", "state=idle\nnewer=1\n")
    assert ReplicaState.from_text(rtext).to_text() == rtext


def test_the_shipped_keys_and_the_notes_are_typed():
    text = (
        MASTER_RUNNING_TEXT + 'held={"s.a": "cannot read"}\ndatabase=m\n'
        "shipped=2026-11-25T05:13:00.000000Z\nshipped_from=/farm/m\n"
    )
    cfg = MasterState.from_text(text)
    assert cfg.is_shipped and cfg.database == "m" and cfg.held == {"s.a": "cannot read"}
    assert cfg.copy().to_text() == text == cfg.to_text()


def test_malformed_values_name_the_file_and_the_key():
    with pytest.raises(ConfigError, match=r"wlc.config: tick='x'"):
        MasterState.from_text("state=1\ntick=x\n", "wlc.config")
    with pytest.raises(ConfigError, match=r"wlr.config: version.s.a='v'"):
        ReplicaState.from_text("tick=1\nversion.s.a=v\n", "wlr.config")


def test_read_and_write_in_one_place(tmp_path):
    st = Storage.of(str(tmp_path))
    db = str(tmp_path / "m")
    assert read_master_state(st, db) is None and read_replica_state(st, db) is None
    st.makedirs(db)
    write_master_state(st, db, MasterState.from_text(MASTER_TEXT))
    assert (tmp_path / "m" / "wlc.config").read_text() == MASTER_TEXT
    assert read_master_state(st, db).to_text() == MASTER_TEXT
    write_replica_state(st, db, ReplicaState.from_text(REPLICA_TEXT))
    assert (tmp_path / "m" / "wlr.config").read_text() == REPLICA_TEXT
    assert read_replica_state(st, db).versions == {"s.b": 3, "s.a": 4}


def test_a_keys_typed_value_reads_as_the_file_holds_it():
    cfg = MasterState.from_text(MASTER_TEXT)
    assert cfg.tick == 6 and cfg.dbid == "eed78245c0274f57a7a4bc6505df89b5"
    assert not cfg.has("shipped") and cfg.has("not_replicated") and cfg.not_replicated == {}  # there, empty
    assert not cfg.has("held")
    assert ReplicaState.from_text(REPLICA_TEXT).versions["s.a"] == 4


def test_replays_typed_writes_give_the_text_the_dict_based_writer_gave():
    """The order replay sets the keys in (wlr.replay's first copy, a round, the end of a call,
    a later round) lists them as REPLICA_TEXT does, written by replay before the typed state."""
    farm = "/farm/test_point_in_time_is_a_consis0/dbfarm"
    st = ReplicaState.of(
        master="m",
        masterfarm=farm,
        dbid="eed78245c0274f57a7a4bc6505df89b5",
        source=farm + "/m",
        source_kind="master",
        select_tables=[],
        select_where={},
        logs=farm + "/m/wlc_logs",
        batches=0,
        tick=-1,
        clock=None,
        skipped=[],
        state="restoring",
    )
    st.set_error(None, None, "", "")
    st.epochs, st.epoch = "0:54c8c4ed20cb9806", "54c8c4ed20cb9806"
    st.set_views({})
    st.view, st.state = -1, "new"
    st.set_version("s.b", 3)
    st.set_version("s.a", 4)
    st.tick, st.clock, st.batches = 6, datetime(2026, 11, 25, 5, 12, 16, 394000, tzinfo=timezone.utc), 7
    st.set_views({"s.b": 3, "s.a": 4})
    st.view = 6
    st.until, st.state = "", "idle"  # the end of the first replicate()
    st.set_views({"s.b": 3, "s.a": 4})  # a later round moves the view again
    assert st.to_text() == REPLICA_TEXT
