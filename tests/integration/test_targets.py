"""`wlr replicate --until` says what its target means and never waits in silence: a target the
master has not published is said at once (with what the master published and whether capture is
alive), one that cannot come in time is refused at once, and a new replica before the master's
first transaction is refused unless asked for (`--empty`).

The command lines run in subprocesses against a master captured in the test process; none of
them needs a Spark session of its own (they refuse, wait, or make an empty replica)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

import pytest
import yaml

import wlr
from wlcore.settings import format_kv, parse_kv

from ..fault.helpers import env_with, run_module, tree
from .helpers import sql

pytestmark = pytest.mark.spark
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(tmp_path, timeout: float) -> str:
    """A --config file: the test settings with ``replica.timeout`` seconds."""
    with open(os.path.join(ROOT, "tests", "wlc-test.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg["replica"]["timeout"] = timeout
    path = tmp_path / "wlc-timeout.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _two_transactions(spark, master) -> str:
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # 0
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")  # 1
    return p


def test_a_far_future_instant_is_refused_at_once(spark, master, dbfarm, tmp_path):
    """`--until 2030-...` is refused before anything is written, naming what the master
    published, its watermark and last commit, capture's liveness and the fixes."""
    _two_transactions(spark, master)
    started = time.monotonic()
    proc = run_module(
        "wlr",
        "--config",
        _config(tmp_path, 30),
        "replicate",
        dbfarm,
        "m",
        "r",
        "--until",
        "2030-01-01T00:00:00Z",
        timeout=120,
    )
    took = time.monotonic() - started
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout, err[-3000:])
    assert took < 25, f"not refused at once: {took:.1f} s"  # the timeout is 30 s
    assert "--until 2030-01-01T00:00:00Z is " in err and "days from now" in err
    assert "the master has published up to transaction 1 (watermark 20" in err and "last commit 20" in err
    assert "capture alive" in err
    assert "wlr replicate " + dbfarm + " m r --follow" in err and "replica.timeout" in err and "earlier --until" in err
    assert not os.path.exists(os.path.join(dbfarm, "r"))  # nothing made


def test_a_target_not_yet_published_is_said_at_once_and_its_timeout_states_capture(
    spark, master, dbfarm, tmp_path, caplog
):
    """`--until <txn not published>` prints the waiting line at once, and the timeout's
    message states capture's liveness instead of guessing; from Python, a warning on the
    wlr.replica logger; a target whose capture is stale is refused at once."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # 0
    wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)  # caught up: the command applies nothing
    cmd = [sys.executable, "-m", "wlr", "--config", _config(tmp_path, 5), "replicate", dbfarm, "m", "r", "--until", "5"]
    proc = subprocess.Popen(cmd, env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []  # (when it came, stderr line)
    stdout: list[str] = []

    def pump(stream, into):
        for line in stream:
            into.append((time.monotonic(), line) if into is lines else line)

    readers = [
        threading.Thread(target=pump, args=args, daemon=True) for args in ((proc.stderr, lines), (proc.stdout, stdout))
    ]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    ended = time.monotonic()
    for reader in readers:
        reader.join(timeout=30)
    out, text = "".join(stdout), "".join(line for _t, line in lines)
    assert proc.returncode == 2, (proc.returncode, out, text[-3000:])
    waiting = [(t, line) for t, line in lines if "waiting for transaction 5" in line]
    assert waiting, text[-3000:]
    said_at, line = waiting[0]
    assert line.startswith("r: waiting for transaction 5: the master has published up to transaction 0 (watermark ")
    assert "capture alive" in line and "waiting up to 5 s" in line
    assert ended - said_at > 3, "the waiting line came only at the end of the wait"  # said before the 5 s wait
    error = [line for _t, line in lines if line.startswith("error:")]
    assert error and error[0].startswith(
        "error: waited 5 s for transaction 5; the replica is at transaction 0 and "
        "the master has published up to transaction 0"
    ), text[-3000:]
    assert "capture alive" in error[0] and "Is capture running" not in text

    # from Python: the same line as a warning on the wlr.replica logger, the same message
    with caplog.at_level(logging.WARNING, logger="wlr.replica"):
        with pytest.raises(wlr.ReplicationTimeout, match="capture alive"):
            wlr.replicate("m", replica="r", dbfarm=dbfarm, until=5, timeout=1)
    assert any(
        "waiting for transaction 5: the master has published up to transaction 0" in r.getMessage()
        for r in caplog.records
        if r.name == "wlr.replica" and r.levelno == logging.WARNING
    )

    # capture gone for good (its heartbeat an hour old): refused at once, naming the fix
    master.close()
    path = os.path.join(dbfarm, "m", "wlc.config")
    cfg = parse_kv(open(path).read())
    cfg["heartbeat"] = "2020-01-01T00:00:00.000000Z"
    cfg.pop("capture_stopped", None)  # killed: no clean stop recorded (close() records one)
    with open(path, "w") as fh:
        fh.write(format_kv(cfg))
    before = tree(dbfarm)
    started = time.monotonic()
    with pytest.raises(wlr.ReplicationTimeout) as caught:
        wlr.replicate("m", replica="r", dbfarm=dbfarm, until=5, timeout=60)
    assert time.monotonic() - started < 30
    assert "capture stale since 2020-01-01T00:00:00Z" in str(caught.value)
    assert f"wlc capture {dbfarm} m" in str(caught.value)
    assert tree(dbfarm) == before


def test_a_date_before_the_first_transaction_is_refused_for_a_new_replica(spark, master, dbfarm):
    """`--until 2020-01-01` says it is midnight UTC, and a new replica that would hold
    no transaction is refused (no folder made) unless `--empty` asks for it."""
    _two_transactions(spark, master)
    proc = run_module("wlr", "replicate", dbfarm, "m", "r", "--until", "2020-01-01", timeout=120)
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout, err[-3000:])
    assert err.startswith(
        "--until 2020-01-01 taken as 2020-01-01T00:00:00Z (the start of that day, UTC); write "
        "the full instant to mean another time"
    ), err[-3000:]
    assert (
        "error: --until 2020-01-01 (taken as 2020-01-01T00:00:00Z, the start of that day, UTC) is before the "
        "first transaction of master 'm' (transaction 0, committed 20"
    ) in err
    assert "add --empty" in err and f"wlr log {dbfarm} m" in err
    assert not os.path.exists(os.path.join(dbfarm, "r"))  # nothing made

    proc = run_module("wlr", "replicate", dbfarm, "m", "r", "--until", "2020-01-01", "--empty", timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert proc.stdout.strip() == "r: at transaction -1 (-)"
    assert proc.stderr.startswith("--until 2020-01-01 taken as 2020-01-01T00:00:00Z")

    # the empty replica goes on as any other; going back says what the date was taken to mean
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rep.tick() == 1
    with pytest.raises(
        wlr.TargetError,
        match=r"cannot go back to 2020-01-01 \(taken as 2020-01-01T00:00:00Z, the "
        "start of that day, UTC\\)",
    ):
        wlr.replicate("m", replica="r", dbfarm=dbfarm, until="2020-01-01", follow=False)
    # from Python: a TargetWarning, and empty=True
    with pytest.raises(wlr.TargetError, match="until=-1 is before the first transaction.*empty=True"):
        wlr.replicate("m", replica="r2", dbfarm=dbfarm, until=-1, follow=False)
    with pytest.warns(wlr.TargetWarning, match="until='2020-01-01' taken as 2020-01-01T00:00:00Z"):
        assert wlr.replicate("m", replica="r2", dbfarm=dbfarm, until="2020-01-01", empty=True).tick() == -1
