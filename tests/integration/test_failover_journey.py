"""The failover how-to as an operator runs it, with the commands: the master lost, a replica
promoted, the writers pointed at it by name, a second replica, the old folder coming back and
refused; at each step the follower's and capture's metrics are scraped and agree with status."""

from __future__ import annotations

import json
import os
import signal

import pytest

import wlc
import wlr

from ..fault.helpers import master_state, run_module, run_python
from ..scrape import scrape, value
from ..waiting import wait_until
from .helpers import Service, rows

pytestmark = pytest.mark.spark


def _status(*args: str) -> tuple[int, dict]:
    """``<wlc|wlr> status ... --json`` run as a command: its exit code and what it printed."""
    done = run_module(*args, "--json")
    assert done.stdout, done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def _tick(farm: str, db: str, service: Service) -> int:
    cfg = master_state(farm, db, service.proc)
    return cfg.tick if cfg is not None else -1


def _follower_agrees(farm: str, port: int, labels: dict) -> dict:
    """Scrape the follower, then run ``wlr status``: the state, tick, master tick and lag agree
    (a figure the status cannot know is absent from the metrics too). Returns the status."""
    samples = scrape(port)
    code, s = _status("wlr", "status", farm, labels["replica"])
    state = s["state"] if s["state"] in ("unreachable", "failed", "diverged") else "following"  # a follower runs
    assert value(samples, "wlr_state", state=state, **labels) == 1, s
    assert value(samples, "wlr_tick", **labels) == s["tick"]
    for name, key in (("wlr_master_tick", "master_tick"), ("wlr_lag_transactions", "lag_transactions")):
        assert value(samples, name, -1.0, **labels) == (-1.0 if s[key] is None else s[key]), (name, s)
    assert s["exit"] == code
    return s


def test_the_failover_how_to_as_an_operator_runs_it(spark, dbfarm):
    farm, dw = dbfarm, os.path.join(dbfarm, "dw")
    made = run_module("wlc", "master", farm, "dw", "--beat", "1")
    assert made.returncode == 0, made.stderr
    capture = Service("wlc", "capture", farm, "dw")
    follower = promoted = None
    try:
        # writers use the master's tables by name; a follower with metrics replicates them
        wlc.attach("dw", dbfarm=farm).create_schema("s")
        spark.sql("CREATE TABLE s.t (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
        spark.sql("INSERT INTO s.t VALUES (1, 'a'), (2, 'b')")
        wait_until(lambda: _tick(farm, "dw", capture) == 1, 180, "capture to publish transactions 0..1")
        follower = Service("wlr", "replicate", farm, "dw", "dw_rep", "--follow", "--metrics-port", "0")
        fport, r = follower.port(), {"database": "dw", "replica": "dw_rep"}
        wait_until(lambda: value(scrape(fport), "wlr_tick", -1.0, **r) == 1, 180, "the follower to apply 0..1")
        wait_until(lambda: _status("wlr", "status", farm, "dw_rep")[1]["state"] == "following", 60, "a heartbeat")
        s = _follower_agrees(farm, fport, r)
        assert (s["state"], s["lag_transactions"], s["exit"]) == ("following", 0, 0)

        # the master is lost: capture killed, its folder gone
        capture.proc.send_signal(signal.SIGKILL)
        capture.proc.wait(timeout=60)
        os.rename(dw, dw + ".moved")
        wait_until(lambda: value(scrape(fport), "wlr_state", state="unreachable", **r) == 1, 120, "unreachable")
        s = _follower_agrees(farm, fport, r)
        assert (s["state"], s["master_tick"], s["lag_transactions"], s["exit"]) == ("unreachable", None, None, 6)
        assert "no database 'dw'" in s["unreachable"]
        first = value(scrape(fport), "wlr_lag_seconds", **r)
        wait_until(lambda: value(scrape(fport), "wlr_lag_seconds", **r) > first, 30, "the lag to grow by the clock")
        wait_until(
            lambda: value(scrape(fport), "wlr_failures_total", 0.0, kind="source", **r) == 1, 60, "the follower's round"
        )
        assert "no database 'dw'" in _follower_agrees(farm, fport, r)["unreachable"]  # now the follower's reason
        out = follower.stop()
        assert follower.proc.returncode == 0 and "cannot follow: no database 'dw'" in out, out[-3000:]

        # promote the replica; it keeps the old master's beat and says so
        done = run_module("wlr", "promote", farm, "dw_rep", "--force")
        assert done.returncode == 0 and "kept: the old master's beat 1 s" in done.stdout, done.stdout + done.stderr
        promoted = Service("wlc", "capture", farm, "dw", "--metrics-port", "0")  # by the database's name
        cport = promoted.port()
        code, s = _status("wlc", "status", farm, "dw")
        assert (code, s["master"], s["database"], s["beat"]) == (0, "dw_rep", "dw", "1")

        # the writers (an ETL job: a Spark session of its own) are pointed at the new master by the database's name
        job = run_python(f"""
            import wlc
            from wlcore.session import active_session
            wlc.attach("dw", dbfarm={farm!r})
            active_session().sql("INSERT INTO s.t VALUES (3, 'c')")
        """)
        assert job.returncode == 0, job.stderr[-3000:]
        wait_until(lambda: _tick(farm, "dw_rep", promoted) == 2, 180, "the promoted master to publish 2")
        wait_until(lambda: value(scrape(cport), "wlc_tick", database="dw") == 2, 60, "capture's wlc_tick to reach 2")
        code, s = _status("wlc", "status", farm, "dw_rep")
        assert value(scrape(cport), "wlc_tick", database="dw") == s["tick"] == 2 and code == 0

        # a second replica: the old history could not be copied, so it starts from a snapshot of
        # the new master, and the refusal names the command that takes one
        refused = run_module("wlr", "replicate", farm, "dw", "dw_rep2")
        assert refused.returncode != 0 and f"wlc snapshot {farm} dw_rep" in refused.stderr, refused.stderr[-3000:]
        snap = run_module("wlc", "snapshot", farm, "dw_rep")
        assert snap.returncode == 0, snap.stdout + snap.stderr
        second = wlr.replicate("dw", replica="dw_rep2", dbfarm=farm, follow=False)
        written = spark.read.format("delta").load(os.path.join(farm, "dw_rep", "s", "t"))
        assert rows(second.table("s.t")) == rows(written) == [(1, "a"), (2, "b"), (3, "c")]
        second.close()

        # the old master's folder comes back: its capture is refused, naming the promoted master
        os.rename(dw + ".moved", dw)
        again = run_module("wlc", "capture", farm, "dw")  # the folder's own name: the old master
        assert again.returncode == 2 and "is no longer the master of database 'dw'" in again.stderr, again.stderr
        assert f"wlc capture {farm} dw_rep" in again.stderr and "Traceback" not in again.stderr
        code, s = _status("wlc", "status", farm, "dw")
        assert s["master"] == "dw" and s["fenced"].startswith("superseded: dw_rep was promoted")
        assert _tick(farm, "dw_rep", promoted) == 2  # nothing published under the old master's ids
    finally:
        for service in (follower, promoted):
            if service is not None and service.proc.poll() is None:
                service.stop()
        if capture.proc.poll() is None:
            capture.stop()
