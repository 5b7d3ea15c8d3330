"""The status commands read state files only: no Spark."""

import json
import os
from datetime import datetime, timedelta, timezone

from wlc.cli import main as wlc_main
from wlcore.utc import utc_iso
from wlr.cli import main as wlr_main


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def _published(tmp_path, times, db="db"):
    """A master ``db`` whose one published batch holds txns 0.. at ``times``; returns its logs folder."""
    from wlcore import batch as B
    from wlcore.logstore import LogStore
    from wlcore.storage import Storage

    st = Storage.of(str(tmp_path))
    logs = str(tmp_path / db / "wlc_logs")
    st.makedirs(logs)
    recs = [
        B.TxnRecord(txn=k, gtid=f"abc:{k}", time=t, table="s.t", version=k, operation="WRITE")
        for k, t in enumerate(times)
    ]
    store = LogStore(st, str(tmp_path / db), logs, db)
    store.publish(
        store.stage(0),
        B.Manifest(database=db, dbid="abc", batch=0, watermark=times[-1], txns=recs),
    )
    return logs


def test_wlr_status_shows_lag_liveness_and_error(tmp_path, capsys):
    now = datetime.now(timezone.utc)
    times = [now - timedelta(seconds=100 - k) for k in range(10)]  # txn 7 committed 93 s ago
    logs = _published(tmp_path, times)
    write(
        tmp_path / "db" / "wlc.config",
        f"state=1\ndbid=abc\ntick=9\nwrite={utc_iso(times[9])}\nlogs={logs}\nheartbeat={utc_iso(now)}\n",
    )
    write(
        tmp_path / "rep" / "wlr.config",
        f"master=db\ndbid=abc\ntick=6\nclock={utc_iso(times[6])}\nbatches=0\nstate=failed\nskipped=3\n"
        "error_batch=0\nerror_txn=7\nerror_table=sys.tmp\nerror_cause=checksum verification failed\n",
    )
    rc = wlr_main(["status", str(tmp_path), "rep"])
    out = capsys.readouterr().out
    assert rc == 1
    lag = float(out.split("lag (seconds)")[1].split()[0])
    assert "lag (transactions)  3" in out and 93 <= lag < 120  # from txn 7's commit, not from the last write
    assert "capture             alive" in out
    assert "batch 0 txn 7 table sys.tmp: checksum verification failed" in out and "skipped             3" in out
    assert "wlr accept" in out
    assert wlr_main(["status", str(tmp_path), "rep", "--json"]) == 1
    s = json.loads(capsys.readouterr().out)
    assert s["lag_transactions"] == 3 and s["capture"] == "alive" and s["error"]["txn"] == "7"


def test_wlr_status_of_a_killed_follower_is_stale(tmp_path, capsys):
    now = datetime.now(timezone.utc)
    logs = _published(tmp_path, [now - timedelta(seconds=5)])
    old = utc_iso(now - timedelta(hours=1))
    write(tmp_path / "db" / "wlc.config", f"state=1\ndbid=abc\ntick=0\nlogs={logs}\nheartbeat={old}\n")
    write(
        tmp_path / "rep" / "wlr.config", f"master=db\ndbid=abc\ntick=0\nbatches=1\nstate=following\nheartbeat={old}\n"
    )
    assert wlr_main(["status", str(tmp_path), "rep", "--json"]) == 5  # stale: a health check fails
    s = json.loads(capsys.readouterr().out)
    assert (s["state"], s["lag_transactions"], s["lag_seconds"]) == ("stale", 0, 0.0)
    assert s["capture"] == "stale" and s["heartbeat"].startswith(old[:19])


def test_wlr_status_of_a_non_replica(tmp_path, capsys):
    assert wlr_main(["status", str(tmp_path), "nothing"]) == 3
    assert "no database 'nothing'" in capsys.readouterr().err


def test_wlc_status(tmp_path, capsys):
    write(tmp_path / "db" / "wlc.config", 'state=2\nbeat=300\ntick=4\nnot_replicated={"/x/s/a b": "bad name"}\n')
    assert wlc_main(["status", str(tmp_path), "db"]) == 0
    out = capsys.readouterr().out
    assert "2 (stopped)" in out and "capture     stopped" in out and "NOT REPLICATED /x/s/a b: bad name" in out
    assert wlc_main(["status", str(tmp_path), "db", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["master"], s["state"], s["state_name"], s["tick"], s["capture"]) == ("db", 2, "stopped", 4, "stopped")
    assert s["not_replicated"] == {"/x/s/a b": "bad name"}
    assert wlc_main(["status", str(tmp_path), "other"]) == 3
    err = capsys.readouterr().err
    assert "no database 'other'" in err and "did you mean" not in err and "wlc capture" not in err


def test_command_line_errors_name_commands_not_python_calls(tmp_path, capsys):
    os.makedirs(tmp_path / "nm")
    assert wlr_main(["replicate", str(tmp_path), "nm", "r"]) == 2
    err = capsys.readouterr().err
    assert f"wlc master {tmp_path} nm" in err and "wlc.master(" not in err
    assert os.listdir(tmp_path) == ["nm"]  # nothing made
    write(tmp_path / "db" / "wlc.config", "state=2\nbeat=300\n")
    assert wlc_main(["capture", str(tmp_path), "db"]) == 2
    err = capsys.readouterr().err
    assert f"run wlc master {tmp_path} db again" in err and "master()" not in err


def test_every_positional_argument_has_help():
    import argparse

    from wlc.cli import build_parser as wlc_parser
    from wlr.cli import build_parser as wlr_parser

    for parser in (wlc_parser(), wlr_parser()):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0].choices
        assert subs
        for name, sub in subs.items():
            for action in sub._actions:
                if not action.option_strings:
                    assert action.help, f"{parser.prog} {name} {action.dest} has no help"


def test_lag_history_from_the_logs(tmp_path):
    import wlr

    t0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)
    logs = _published(tmp_path, [t0, t0 + timedelta(seconds=10), t0 + timedelta(seconds=20)])
    write(tmp_path / "db" / "wlc.config", f"state=1\ndbid=abc\ntick=2\nlogs={logs}\n")
    write(tmp_path / "rep" / "wlr.config", f"master=db\ndbid=abc\ntick=2\nlogs={logs}\n")
    write(
        tmp_path / "rep" / "wlr.log",
        f"{utc_iso(t0 + timedelta(seconds=4))} applied s.t transaction 0 (WRITE) in 1.00 s\n"
        f"{utc_iso(t0 + timedelta(seconds=4))} at transaction 0 (committed {utc_iso(t0)})\n"
        f"{utc_iso(t0 + timedelta(seconds=25))} at transaction 2 (committed {utc_iso(t0)})\n",
    )
    h = wlr.lag_history("rep", str(tmp_path))
    assert list(h.columns) == ["time", "master_tick", "replica_tick", "lag_seconds"]
    got = [((r.time - t0).total_seconds(), r.master_tick, r.replica_tick, r.lag_seconds) for r in h.itertuples()]
    assert got == [(0, 0, -1, 0.0), (4, 0, 0, 0.0), (10, 1, 0, 0.0), (20, 2, 0, 10.0), (25, 2, 2, 0.0)]


def test_errors_carry_a_command_line_fix():
    import pytest

    from wlr.errors import ReplicationError, TargetError
    from wlr.planner import check_not_passed, parse_until

    with pytest.raises(TargetError) as caught:
        check_not_passed(parse_until(3), 5, None)
    assert "replicate(until=3)" in str(caught.value) and "--until 3" in caught.value.cli
    err = ReplicationError(2, 7, "s.t", "boom")
    assert "wlr.accept()" in str(err) and "wlr accept <dbfarm> <replica>" in err.cli and "accept()" not in err.cli


def test_status_and_log_commands_start_without_spark():
    """The command lines load pyspark only when a command needs Spark: ``wlr status``, ``wlr log``,
    ``wlc status`` and ``wlc prune`` start in a fraction of a second, whatever the log's length."""
    import subprocess
    import sys

    heavy = "('pyspark', 'delta', 'pyarrow', 'deltalake', 'pandas')"
    code = f"import sys, wlc.cli, wlr.cli; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    # capture and replay load delta-rs and pyarrow at their first table or segment: a new
    # replica's set-up from a snapshot (a file copy) pays no half second for them
    code = (
        "import sys, wlc, wlr.apply; print(sorted(m for m in ('pyarrow', 'deltalake', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_wlr_log_past_its_end_says_where_the_log_ends(tmp_path, capsys):
    now = datetime.now(timezone.utc)
    logs = _published(tmp_path, [now - timedelta(seconds=10 - k) for k in range(5)])
    write(tmp_path / "db" / "wlc.config", f"state=1\ndbid=abc\ntick=4\nlogs={logs}\n")
    assert wlr_main(["log", str(tmp_path), "db", "--since", "99999"]) == 0
    assert capsys.readouterr().out == "no published transaction matches --since 99999: the log ends at transaction 4\n"
    assert wlr_main(["log", str(tmp_path), "db", "--since", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4  # a header, transactions 3 and 4, the snapshots line


def test_register_says_it_starts_spark(tmp_path, capsys, monkeypatch):
    import pytest

    import wlr
    from wlcore import session

    write(tmp_path / "db" / "wlc.config", "state=1\ndbid=abc\ntick=-1\n")
    write(tmp_path / "rep" / "wlr.config", "master=db\ndbid=abc\ntick=-1\nstate=idle\n")

    class Started(Exception):
        pass

    def start():
        raise Started  # where Spark would start: the line must come before

    monkeypatch.setattr(session, "running_session", lambda: None)  # no Spark runs in this process
    monkeypatch.setattr(session, "active_session", start)
    with pytest.raises(Started):
        wlr.register("rep", dbfarm=str(tmp_path))
    err = capsys.readouterr().err
    assert err.startswith("starting Spark to register the tables of replica rep (this takes a while;"), err
