"""The command line never creates or waits by accident, names what a database is, and has
status a script can use: the real commands in a subprocess, on state files only (no Spark)."""

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from wlcore.utc import utc_iso

from .test_cli import _published, write


def run(*args, env=None):
    """``python -m <args>``: (exit status, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    return proc.returncode, proc.stdout, proc.stderr


def listing(path):
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, ds, fs in os.walk(path) for n in ds + fs)


@pytest.fixture
def farm(tmp_path):
    """A dbfarm with master ``ops`` (capture alive), its replica ``ops_replica`` and a plain folder ``plain``."""
    now = datetime.now(timezone.utc)
    logs = _published(tmp_path, [now - timedelta(seconds=5)], db="ops")
    write(
        tmp_path / "ops" / "wlc.config",
        f"state=1\ndbid=abc\ntick=0\nlogs={logs}\nheartbeat={utc_iso(now)}\nepochs=0:aa\n",
    )
    write(tmp_path / "ops_replica" / "wlr.config", "master=ops\ndbid=abc\ntick=0\nbatches=1\nstate=idle\nepochs=0:aa\n")
    os.makedirs(tmp_path / "plain" / "s")
    return str(tmp_path)


def test_capture_never_makes_a_dbfarm_or_a_master(farm, tmp_path):
    before = listing(farm)
    code, out, err = run("wlc", "capture", str(tmp_path / "nofarm"), "ops")
    assert code == 3 and "no dbfarm" in err and "does not exist" in err
    assert not (tmp_path / "nofarm").exists()
    code, out, err = run("wlc", "capture", farm, "opz")  # a misspelled master
    assert code == 3 and "no database 'opz'" in err and "did you mean ops?" in err
    assert "wlc master" not in err and "wlc capture" not in err  # no hint that makes 'opz'
    code, out, err = run("wlc", "capture", farm, "plain")  # a database that is not a master
    assert code == 2 and f"is a deliberate step: wlc master {farm} plain" in err
    code, out, err = run("wlr", "replicate", farm, "opz")
    assert code == 3 and "did you mean ops?" in err and "wlc capture" not in err and "wlc master" not in err
    code, out, err = run("wlc", "master", str(tmp_path / "nofarm"), "ops")
    assert code == 3 and not (tmp_path / "nofarm").exists()
    assert listing(farm) == before  # nothing made anywhere


def test_master_is_its_own_step(farm):
    code, out, err = run("wlc", "master", farm, "shop", "--beat", "0")
    assert code == 0, err
    assert "shop is a master now" in out and f"Capture it with: wlc capture {farm} shop" in out
    cfg = open(os.path.join(farm, "shop", "wlc.config")).read()
    assert "beat=0\n" in cfg and "tick=-1\n" in cfg
    code, out, err = run("wlc", "status", farm, "shop")
    assert code == 0 and f"not started (start it with: wlc capture {farm} shop)" in out
    code, out, err = run("wlc", "master", farm, "shop")  # again: says so, changes nothing
    assert code == 0 and "already a master" in out
    assert open(os.path.join(farm, "shop", "wlc.config")).read() == cfg
    code, out, err = run("wlc", "master", farm, "ops_replica")
    assert code == 2 and "is a replica of master 'ops'" in err


def test_each_command_names_the_other_kind(farm):
    code, out, err = run("wlc", "status", farm, "ops_replica")
    assert code == 2 and "is a replica of master 'ops', not a master" in err
    assert f"wlr status {farm} ops_replica" in err and "wlc capture" not in err
    code, out, err = run("wlc", "capture", farm, "ops_replica")
    assert code == 2 and "name its master 'ops' instead" in err
    code, out, err = run("wlr", "status", farm, "ops")
    assert code == 3 and "is a master, not a replica" in err and f"wlc status {farm} ops" in err
    assert "its replicas here: ops_replica" in err and "<master>" not in err
    code, out, err = run("wlr", "accept", farm, "ops")
    assert code == 3 and "is a master, not a replica" in err
    code, out, err = run("wlr", "log", farm, "ops_replica")
    assert code == 3 and "name its master 'ops' instead" in err
    code, out, err = run("wlr", "status", farm, "ops_replca")
    assert code == 3 and "did you mean ops_replica?" in err


def test_unknown_table_names_the_nearest(tmp_path):
    from wlcore import batch as B
    from wlcore.logstore import LogStore
    from wlcore.storage import Storage

    st = Storage.of(str(tmp_path))
    logs = str(tmp_path / "ops" / "wlc_logs")
    st.makedirs(logs)
    t = datetime(2026, 11, 22, tzinfo=timezone.utc)
    recs = [
        B.TxnRecord(txn=k, gtid=f"abc:{k}", time=t + timedelta(seconds=k), table=name, version=k, operation="WRITE")
        for k, name in enumerate(["app.events", "app.users"])
    ]
    store = LogStore(st, str(tmp_path / "ops"), logs, "ops")
    store.publish(
        store.stage(0),
        B.Manifest(database="ops", dbid="abc", batch=0, watermark=recs[-1].time, txns=recs),
    )
    write(tmp_path / "ops" / "wlc.config", f"state=1\ndbid=abc\ntick=1\nlogs={logs}\n")
    code, out, err = run("wlr", "log", str(tmp_path), "ops", "--table", "events")
    assert code == 3 and out == "" and "no table 'events'" in err and "did you mean app.events?" in err
    code, out, err = run("wlr", "log", str(tmp_path), "ops", "--table", "APP.events")
    assert code == 0 and len(out.splitlines()) == 3  # header, txn 0, the snapshots line
    code, out, err = run("wlr", "log", str(tmp_path), "ops", "--snapshots")
    assert code == 0 and out.splitlines()[1].split()[:4] == ["-1", "-", "-", "empty"]
    assert "empty start" in out


def test_capture_liveness_stopped_stale_and_configurable(tmp_path):
    now = datetime.now(timezone.utc)
    beat = utc_iso(now - timedelta(minutes=10))
    write(
        tmp_path / "db" / "wlc.config",
        f"state=1\ntick=4\nheartbeat={beat}\ncapture_stopped={utc_iso(now - timedelta(minutes=9))}\n",
    )
    code, out, err = run("wlc", "status", str(tmp_path), "db")
    assert code == 0 and "stopped at " in out and "stale" not in out  # a clean stop (Ctrl-C, SIGTERM)
    write(tmp_path / "db" / "wlc.config", f"state=1\ntick=4\nheartbeat={beat}\n")  # killed: no clean stop
    code, out, err = run("wlc", "status", str(tmp_path), "db", "--json")
    s = json.loads(out)
    assert code == 5 and s["capture"] == "stale" and s["capture_text"].startswith(f"stale since {beat}")
    cfg = tmp_path / "long.yaml"
    cfg.write_text("capture:\n  stale_after: 3600\n")
    code, out, err = run("wlc", "--config", str(cfg), "status", str(tmp_path), "db")
    assert code == 0 and "alive" in out


def test_wlr_status_exit_codes_and_lag_lines(farm):
    code, out, err = run("wlr", "status", farm, "ops_replica")
    assert code == 0, err
    lines = dict(line.split("  ", 1) for line in out.splitlines())
    assert lines["master tick"].strip().startswith("0 (last published")
    assert lines["unpublished"].strip().startswith("0 (master commits")
    cfg = os.path.join(farm, "ops", "wlc.config")
    text = open(cfg).read()
    write(cfg, text.replace("heartbeat=", "heartbeat=2020-01-01T00:00:00Z\nold=").replace("epochs=0:aa", "epochs=0:bb"))
    code, out, err = run("wlr", "status", farm, "ops_replica", "--json")
    s = json.loads(out)
    assert code == 4 and s["diverged"] and "another history" in s["diverged"]  # diverged comes first
    write(cfg, text.replace("heartbeat=", "heartbeat=2020-01-01T00:00:00Z\nold="))
    code, out, err = run("wlr", "status", farm, "ops_replica")
    assert code == 5 and "stale" in out  # capture stale
