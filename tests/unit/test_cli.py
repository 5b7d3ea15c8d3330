"""The status commands read state files only: no Spark."""
import os

from wlc.cli import main as wlc_main
from wlr.cli import main as wlr_main


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def test_wlr_status_shows_lag_and_error(tmp_path, capsys):
    write(tmp_path / "db" / "wlc.config", "state=1\ndbid=abc\ntick=9\nwrite=2026-11-22T10:00:10Z\nlogs=/x\n")
    write(tmp_path / "rep" / "wlr.config",
          "master=db\ndbid=abc\ntick=6\nclock=2026-11-22T10:00:04Z\nstate=failed\nskipped=3\n"
          "error_batch=7\nerror_txn=7\nerror_table=sys.tmp\nerror_cause=checksum verification failed\n")
    rc = wlr_main(["status", str(tmp_path), "rep"])
    out = capsys.readouterr().out
    assert rc == 3
    assert "lag (transactions)  3" in out and "lag (seconds)       6.000" in out
    assert "batch 7 txn 7 table sys.tmp: checksum verification failed" in out and "skipped             3" in out


def test_wlr_status_of_a_non_replica(tmp_path, capsys):
    assert wlr_main(["status", str(tmp_path), "nothing"]) == 1
    assert "not a replica" in capsys.readouterr().err


def test_wlc_status(tmp_path, capsys):
    write(tmp_path / "db" / "wlc.config", "state=2\nbeat=300\n")
    assert wlc_main(["status", str(tmp_path), "db"]) == 0
    assert "state=2" in capsys.readouterr().out
    assert wlc_main(["status", str(tmp_path), "other"]) == 1
