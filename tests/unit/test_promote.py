"""Promotion of a replica to master, on state files and batch manifests only (no Spark)."""

import os
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

import wlr
from wlcore import batch as B, epochs
from wlcore.batch import CaptureState, Cursor
from wlcore.errors import MasterStateError
from wlcore.logstore import LogStore
from wlcore.promotion import (
    FENCE_FILE,
    PromotionStart,
    check_not_fenced,
    log_name,
    read_fence,
    read_start,
    resume_point,
)
from wlcore.state import ReplicaState, read_master_state, write_replica_state
from wlcore.storage import Storage
from wlr.cli import main as wlr_main
from wlr.promote import missing, ranges

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)


def test_missing_and_ranges():
    assert missing(4, [4], []) == []
    assert missing(4, [7], [5]) == [5, 6, 7]
    assert missing(4, [3], [6, 5, 2]) == [5, 6]  # a batch newer than the config claims counts
    assert ranges([3, 4, 5, 9, 11, 12]) == "3..5, 9, 11..12"
    assert ranges([]) == ""


def test_resume_point_only_until_the_new_history_publishes():
    cursors = CaptureState({"s.t": Cursor(7, None)})
    start = PromotionStart(first_batch=5, first_txn=12, cursors=cursors)
    assert PromotionStart.from_text(start.to_text(), "x").cursors.tables["s.t"].version == 7
    state = resume_point(start, 4)  # the newest batch is the old history's
    assert state is not None and (state.next_txn, state.next_batch, state.tables["s.t"].version) == (12, 5, 7)
    assert resume_point(start, None) is not None
    assert resume_point(start, 5) is None  # the new history published: capture resumes from it
    assert resume_point(None, 4) is None


def _master(farm, name="m", txns=3, epochs="0:aa"):
    """Master ``name`` that published batches 0..txns-1, one transaction each."""
    st = Storage.of(str(farm))
    logs = str(farm / name / "wlc_logs")
    st.makedirs(logs)
    for k in range(txns):
        rec = B.TxnRecord(txn=k, gtid=f"abc:{k}", time=T0 + timedelta(seconds=k), table="s.t", version=k,
                          operation="WRITE")  # fmt: skip
        man = B.Manifest(database=name, dbid="abc", batch=k, watermark=rec.time, txns=[rec], epochs=epochs)
        store = LogStore(st, str(farm / name), logs, name)
        store.publish(store.stage(k), man)
    text = f"logs={logs}\nstate=1\nbatches={txns}\nbeat=0\ndbid=abc\ntick={txns - 1}\nepoch=aa\nepochs={epochs}\n"
    (farm / name / "wlc.config").write_text(text)


def _replica(farm, name, tick, master="m", source=None, kind="master"):
    os.makedirs(farm / name, exist_ok=True)
    state = ReplicaState.of(
        master=master,
        masterfarm=str(farm),
        dbid="abc",
        source=source or str(farm / master),
        source_kind=kind,
        logs=str(farm / master / "wlc_logs"),
        batches=tick + 1,
        tick=tick,
        clock=T0 + timedelta(seconds=tick),
        state="idle",
        epochs="0:aa",
        epoch="aa",
    )
    write_replica_state(Storage.of(str(farm)), str(farm / name), state)


def test_a_replica_behind_is_refused_then_forced(tmp_path, capsys):
    _master(tmp_path)
    _replica(tmp_path, "r", 1)
    with pytest.raises(wlr.PromotionError) as err:
        wlr.promote("r", dbfarm=str(tmp_path))
    assert err.value.left_out == [2] and "transaction 2 is published" in str(err.value)
    assert not (tmp_path / "r" / "wlc.config").exists() and not (tmp_path / "m" / FENCE_FILE).exists()
    assert wlr_main(["promote", str(tmp_path), "r"]) == 2
    assert f"wlr replicate {tmp_path} m r and promote it, or promote it with --force" in capsys.readouterr().err

    done = wlr.promote("r", dbfarm=str(tmp_path), force=True)
    assert (done.database, done.tick, done.first_batch, done.left_out) == ("m", 1, 2, [2])
    assert done.left_out_gtids == ["abc:2"] and done.fenced == str(tmp_path / "m") and done.copied == 2
    st = Storage.of(str(tmp_path))
    cfg = read_master_state(st, str(tmp_path / "r"))
    assert (cfg.database, cfg.dbid, cfg.tick, cfg.batches, cfg.promoted_tick) == ("m", "abc", 1, 2, 1)
    assert cfg.promoted_from == str(tmp_path / "m") and cfg.epochs == f"0:aa,2:{done.epoch}"
    assert cfg.logs == str(tmp_path / "r" / "wlc_logs") and cfg.write == T0 + timedelta(seconds=1)
    assert [b.number for b in LogStore(st, str(tmp_path / "r"), cfg.logs, "m").batches()] == [
        0,
        1,
    ]  # the old history up to the tick
    assert not (tmp_path / "r" / "wlr.config").exists() and (tmp_path / "r" / "wlr.config.promoted").exists()
    assert log_name(st, str(tmp_path / "r"), "r") == "m"  # capture names its batches m_<number>
    start = read_start(st, str(tmp_path / "r"))
    assert (start.first_batch, start.first_txn) == (2, 2)
    fence = read_fence(st, str(tmp_path / "m"))
    assert (fence.promoted, fence.database, fence.tick, fence.epoch) == (str(tmp_path / "r"), "m", 1, done.epoch)
    with pytest.raises(MasterStateError, match="is fenced"):
        check_not_fenced(st, str(tmp_path / "m"))
    import wlc

    with pytest.raises(MasterStateError, match="is fenced"):
        wlc.attach("m", dbfarm=str(tmp_path))  # a writer pointed at the old master is told where to go
    assert "promoted to master" in (tmp_path / "r" / "wlc.log").read_text()
    from wlc.cli import main as wlc_main

    assert wlc_main(["status", str(tmp_path), "m"]) == 0  # wlc status says the old master is fenced, and by whom
    assert "FENCED at " in capsys.readouterr().out
    assert wlc_main(["status", str(tmp_path), "r"]) == 0
    assert "promoted  " in (out := capsys.readouterr().out) and f"from {tmp_path / 'm'} after transaction 1" in out
    assert [t["txn"] for t in wlr.transactions("r", dbfarm=str(tmp_path))] == [0, 1]  # wlr log of the new master
    # capture's first session on it keeps the promotion's epoch; once it published, sessions begin their own
    assert "continues epoch" in epochs.start_session(cfg) and cfg.epochs == f"0:aa,2:{done.epoch}"
    cfg.tick = 2
    epochs.start_session(cfg)
    assert cfg.epochs.startswith(f"0:aa,2:{done.epoch},3:")


def test_replicas_switch_to_the_promoted_master_or_are_refused(tmp_path):
    _master(tmp_path, txns=4)
    _replica(tmp_path, "r", 3)  # caught up
    _replica(tmp_path, "behind", 1)
    done = wlr.promote("r", dbfarm=str(tmp_path))
    assert done.left_out == [] and done.tick == 3
    farm = str(tmp_path)
    # a replica behind reads the promoted master under the database's name, from its tick
    rep = wlr.Replica(source="r", replica="behind", dbfarm=farm)
    assert rep.master == "m"
    rep.validate()
    named = wlr.Replica("r", replica="behind", dbfarm=farm)  # the promoted folder named as the master
    assert (named.master, named.source.root) == ("m", str(tmp_path / "r"))
    named.validate()
    # the old master is fenced: refused as a source, naming the promoted one
    with pytest.raises(wlr.ReplicaStateError, match="source='r'"):
        wlr.Replica("m", replica="behind", dbfarm=farm).validate()
    # a replica that applied a transaction the promoted one never got
    _replica(tmp_path, "ahead", 4)
    with pytest.raises(wlr.DivergedError) as err:
        wlr.Replica(source="r", replica="ahead", dbfarm=farm).validate()
    assert err.value.txn == 4 and "promoted to master at transaction 3" in str(err.value)
    assert "make a new replica" in str(err.value)
    # a replica that read the promoted replica's relay is told to read it as a master
    _replica(tmp_path, "via", 2, source=str(tmp_path / "r" / "wlr_relay"), kind="relay")
    with pytest.raises(wlr.ReplicaStateError, match="relay 'r' was promoted to master of 'm'.*source='r'"):
        wlr.Replica("m", replica="via", dbfarm=farm).validate()


def test_an_interrupted_promotion_is_done_again(tmp_path):
    _master(tmp_path)
    _replica(tmp_path, "r", 2)
    os.rename(tmp_path / "r" / "wlr.config", tmp_path / "r" / "wlr.config.promoted")  # stopped before wlc.config
    assert wlr.promote("r", dbfarm=str(tmp_path)).tick == 2
    assert (tmp_path / "r" / "wlc.config").exists() and not (tmp_path / "r" / "wlr.config").exists()


def test_refusals(tmp_path):
    _master(tmp_path)
    _replica(tmp_path, "r", 2)
    (tmp_path / "r" / "wlr.config").write_text(
        (tmp_path / "r" / "wlr.config").read_text() + "error_txn=3\nerror_cause=boom\n"
    )
    with pytest.raises(wlr.PromotionError, match="failed at transaction 3"):
        wlr.promote("r", dbfarm=str(tmp_path))
    with pytest.raises(wlr.ReplicaStateError, match="is a master, not a replica"):
        wlr.promote("m", dbfarm=str(tmp_path))
    with pytest.raises(wlr.NotFoundError):
        wlr.promote("nope", dbfarm=str(tmp_path))


def test_a_lost_master_needs_force(tmp_path):
    _master(tmp_path)
    _replica(tmp_path, "r", 1)
    os.rename(tmp_path / "m", tmp_path / "gone")  # the master's folder and logs are lost
    with pytest.raises(wlr.PromotionError, match="cannot be read.*force=True"):
        wlr.promote("r", dbfarm=str(tmp_path))
    done = wlr.promote("r", dbfarm=str(tmp_path), force=True)
    assert (done.tick, done.left_out, done.fenced, done.copied) == (1, [], None, 0)
    assert any("not all in" in n for n in done.notes)  # replicas behind it need a new copy
    cfg = read_master_state(Storage.of(str(tmp_path)), str(tmp_path / "r"))
    assert cfg.promoted_tick == 1 and cfg.batches == 2


def _lost_and_promoted(tmp_path, beat_seen=3.0):
    """Master m lost (its folder moved away) after replica r applied all it published; r promoted
    with force, as an operator does when the master's machine is gone; returns the promotion."""
    _master(tmp_path)
    _replica(tmp_path, "r", 2)
    text = (tmp_path / "r" / "wlr.config").read_text()
    (tmp_path / "r" / "wlr.config").write_text(text + f"master_beat={beat_seen:g}\n")  # as the follower read it
    os.rename(tmp_path / "m", tmp_path / "m.moved")
    return wlr.promote("r", dbfarm=str(tmp_path), force=True)


def test_a_lost_masters_folder_that_comes_back_is_superseded_and_capture_refuses(tmp_path, capsys):
    import wlc
    from wlc.cli import main as wlc_main
    from wlcore.databases import Dbfarm

    done = _lost_and_promoted(tmp_path)
    assert done.fenced is None  # the folder could not be reached: no fence written
    os.rename(tmp_path / "m.moved", tmp_path / "m")  # the old folder is back
    farm = str(tmp_path)
    dbs = Dbfarm(farm)
    assert (dbs.current_master("m"), dbs.folder_of("m"), dbs.folder_of("r")) == ("r", "m", "r")
    assert dbs.successor("m", read_master_state(Storage.of(farm), str(tmp_path / "m")))[0] == str(tmp_path / "r")
    before = (tmp_path / "m" / "wlc.config").read_text()
    assert wlc_main(["capture", farm, "m"]) == 2  # refused before Spark starts or anything is written
    err = capsys.readouterr().err
    assert f"{tmp_path / 'm'} is no longer the master of database 'm': {tmp_path / 'r'} was promoted" in err
    assert f"wlc capture {farm} r" in err and "Traceback" not in err
    assert (tmp_path / "m" / "wlc.config").read_text() == before
    assert wlc_main(["status", farm, "m"]) == 0
    assert "FENCED superseded: r was promoted to master of 'm'" in capsys.readouterr().out
    with pytest.raises(MasterStateError, match="is no longer the master of database 'm'"):
        wlc.attach("m", dbfarm=farm)  # a writer's commits there would never be captured
    # the fix the refusal gives: the folder made a new database (a new database id), captured again
    os.rename(tmp_path / "m" / "wlc.config", tmp_path / "m.config.aside")
    os.rename(tmp_path / "m" / "wlc_logs", tmp_path / "m.logs.aside")
    assert wlc_main(["master", farm, "m"]) == 0 and "m is a master now" in capsys.readouterr().out
    again = read_master_state(Storage.of(farm), str(tmp_path / "m"))
    assert again.dbid != "abc" and Dbfarm(farm).successor("m", again) is None
    assert (Dbfarm(farm).current_master("m"), Dbfarm(farm).require_master("m")) == ("m", "m")


def test_a_capture_that_kept_running_stops_publishing_once_it_sees_the_promoted_master(tmp_path, monkeypatch):
    # capture of m runs on a machine cut off from the dbfarm's other folders; r is promoted in
    # its place meanwhile (no fence reaches m); once m's capture looks again, it may not publish
    import wlc.master_record as mr

    _master(tmp_path)
    st = Storage.of(str(tmp_path))
    record = mr.MasterRecord(st, str(tmp_path / "m"), "m", 1.0)
    record.config = read_master_state(st, str(tmp_path / "m"))
    record.check_current(record.config)  # capture's start: nobody holds m's database but m
    record.check_publishing()
    os.rename(tmp_path / "m", tmp_path / "m.away")
    _replica(tmp_path, "r", 2)
    assert wlr.promote("r", dbfarm=str(tmp_path), force=True).fenced is None
    os.rename(tmp_path / "m.away", tmp_path / "m")
    record.check_publishing()  # within a minute of the last look: the fence only (none here)
    now = mr.time.monotonic()
    monkeypatch.setattr(mr.time, "monotonic", lambda: now + record.CURRENT_EVERY)
    with pytest.raises(MasterStateError, match=f"{tmp_path / 'm'} is no longer the master of database 'm'"):
        record.check_publishing()


def test_a_shipped_copy_of_the_promoted_master_supersedes_the_old_one(tmp_path):
    from wlcore.promotion import supersedes

    _lost_and_promoted(tmp_path)
    st = Storage.of(str(tmp_path))
    new = read_master_state(st, str(tmp_path / "r"))
    old = read_master_state(st, str(tmp_path / "m.moved"))
    assert supersedes(new, old) and not supersedes(old, new) and not supersedes(new, new)
    copy = read_master_state(st, str(tmp_path / "r"))
    copy.shipped, copy.shipped_from = T0, str(tmp_path / "r")  # what wlc ship writes into a copy's wlc.config
    assert supersedes(copy, old)
    other = read_master_state(st, str(tmp_path / "m.moved"))
    other.dbid = "another"
    assert not supersedes(new, other)  # a new database in the old folder (wlc master again) is not


def test_a_promoted_master_seen_only_in_a_shipped_copy_is_named_by_status_and_capture(tmp_path, capsys):
    # m ships to a copy; r, promoted while m was out of reach, lives in another dbfarm now and ships
    # to the same copy: m's own dbfarm has no newer master, the copy says there is one
    from wlc.cli import main as wlc_main
    from wlcore.ship import add_copy
    from wlcore.state import write_master_state

    farm, other = tmp_path / "farm", tmp_path / "dr"
    farm.mkdir()
    other.mkdir()
    _lost_and_promoted(farm)
    os.rename(farm / "m.moved", farm / "m")
    os.rename(farm / "r", other / "r")
    st = Storage.of(str(tmp_path))
    copy = read_master_state(st, str(other / "r"))
    copy.shipped, copy.shipped_from = T0, str(other / "r")  # as wlc ship writes a copy's wlc.config
    write_master_state(st, str(tmp_path / "copy"), copy)
    add_copy(st, str(farm / "m"), str(tmp_path / "copy"))
    assert wlc_main(["status", str(farm), "m"]) == 0
    assert f"FENCED superseded: {other / 'r'} (seen in its shipped copy {tmp_path / 'copy'}) was promoted" in (
        capsys.readouterr().out
    )
    assert wlc_main(["capture", str(farm), "m"]) == 2
    assert f"(capture: wlc capture {other} r)" in capsys.readouterr().err


def test_tools_find_the_promoted_master_by_its_folder_and_its_database_name(tmp_path, capsys):
    from wlc.cli import main as wlc_main
    from wlc.lifecycle import Lifecycle
    from wlcore.databases import Dbfarm

    _lost_and_promoted(tmp_path)
    farm = str(tmp_path)
    assert Dbfarm(farm).require_master("m") == "r" and Dbfarm(farm).require_master("r") == "r"
    assert Lifecycle.of(farm, "m").path == str(tmp_path / "r") and Lifecycle.of(farm, "m").dbname == "m"
    assert wlc_main(["status", farm, "m"]) == 0  # the database's name finds its master's folder
    out = capsys.readouterr().out
    assert out.startswith("master      r\ndatabase    m\n")
    assert wlr.transactions("m", dbfarm=farm) == []  # wlr log by the database's name: r's (the old history not copied)
    # a replica of the promoted master: the messages name the folder that works
    _replica(tmp_path, "r2", 1, source=str(tmp_path / "r"))
    assert wlc_main(["status", farm, "r2"]) == 2
    assert (
        "a replica of database 'm', whose master is 'r', not a master: name its master 'r'" in capsys.readouterr().err
    )
    assert wlr_main(["status", farm, "r"]) == 3
    assert "its replicas here: r2" in capsys.readouterr().err
    # a replica named by the database reads the promoted master; one reading the old folder is told where to
    _replica(tmp_path, "r3", 1)
    named = wlr.Replica("m", replica="r3", dbfarm=farm)
    assert (named.master, named.source.root) == ("m", str(tmp_path / "r"))
    named.validate()
    gone = wlr.source.master_source(farm, "m").missing("m")
    assert isinstance(gone, wlr.ReplicaStateError) and "held by the promoted master 'r'" in str(gone)
    assert "--source r" in gone.cli


def test_a_promoted_master_keeps_the_old_masters_beat_and_says_so(tmp_path, capsys):
    from wlc.cli import main as wlc_main

    done = _lost_and_promoted(tmp_path, beat_seen=3)
    cfg = read_master_state(Storage.of(str(tmp_path)), str(tmp_path / "r"))
    assert cfg.beat == 3.0  # the old master's folder was out of reach: the beat the replica last read
    assert done.kept.startswith("the old master's beat 3 s (as this replica last read it)")
    assert any(line.startswith("kept: the old master's beat 3 s") for line in done.lines(str(tmp_path), "r"))
    assert wlc_main(["status", str(tmp_path), "r"]) == 0
    assert "beat        3 s\n" in capsys.readouterr().out


def test_status_shows_the_configured_beat_where_the_master_recorded_none(tmp_path, capsys):
    from wlc.cli import main as wlc_main
    from wlcore.settings import settings

    _master(tmp_path)
    text = (tmp_path / "m" / "wlc.config").read_text().replace("beat=0\n", "")
    (tmp_path / "m" / "wlc.config").write_text(text)
    assert wlc_main(["status", str(tmp_path), "m"]) == 0
    assert f"beat        {settings().master.beat:g} s (master.beat of config)" in capsys.readouterr().out


def test_a_source_out_of_reach_is_a_state_of_its_own_in_status_and_metrics(tmp_path, capsys):
    from wlr.monitor import ReplicaMetrics

    _master(tmp_path)
    _replica(tmp_path, "r", 1)
    farm = str(tmp_path)
    rep = wlr.Replica("m", replica="r", dbfarm=farm)
    assert rep.status()["state"] == "idle" and rep.status()["lag_transactions"] == 1
    rep.close()
    os.rename(tmp_path / "m", tmp_path / "m.moved")  # the master's folder is gone
    s = wlr.Replica("m", replica="r", dbfarm=farm).status()
    assert (s["state"], s["master_tick"], s["lag_transactions"], s["exit"]) == ("unreachable", None, None, 6)
    assert s["lag_seconds"] > 0 and "no database 'm'" in s["unreachable"]  # counted from the last commit applied
    assert wlr_main(["status", farm, "r"]) == 6
    out = capsys.readouterr().out
    assert "state               unreachable" in out and "lag (transactions)  unknown" in out
    assert "source error        no database 'm'" in out
    metrics = ReplicaMetrics("m", "r")
    metrics.reported = SimpleNamespace(status=lambda: s, following=lambda: True)
    samples = {(n, labels.get("state")): v for n, labels, v in metrics.samples()}
    assert samples[("wlr_state", "unreachable")] == 1 and samples[("wlr_state", "following")] == 0
    assert ("wlr_master_tick", None) not in samples and ("wlr_lag_transactions", None) not in samples
    assert samples[("wlr_lag_seconds", None)] == s["lag_seconds"]
