"""Prometheus metrics: ``/metrics`` of an in-process master, follower and shipper, and of the
``wlc capture`` and ``wlr replicate --follow`` services, scraped over HTTP while the master
writes and parsed with prometheus_client's parser; the values are checked against the
master's and the replica's state files."""

from __future__ import annotations

import os
import re

import pytest

import wlc
import wlr
from wlcore.state import read_master_state, read_replica_state
from wlcore.storage import Storage

from ..scrape import scrape, value
from ..waiting import wait_until
from .helpers import Service, rows, sql  # sql: a statement the in-process master captures at once

pytestmark = pytest.mark.spark


def _tick(dbfarm: str, name: str) -> int:
    cfg = read_master_state(Storage.of(dbfarm), os.path.join(dbfarm, name))
    assert cfg is not None
    return cfg.tick


def test_an_in_process_master_follower_and_shipper_serve_their_metrics(spark, dbfarm, tmp_path):
    m = wlc.master("m", dbfarm=dbfarm, metrics_port=0)
    wlc.beat(0)
    port = m.metrics_port
    assert isinstance(port, int) and port > 0
    t = m.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{t}` (id INT, v STRING) USING delta")
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (1, 'a'), (2, 'b')")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, metrics_port=0)  # follows in the background
    assert rep.metrics_port == port  # one server a process: port 0 asked twice is the same port
    shipper = m.ship(str(tmp_path / "copy"), follow=True)
    before = scrape(port)
    db, r = {"database": "m"}, {"database": "m", "replica": "r"}
    published0 = value(before, "wlc_transactions_published_total", 0.0, **db)
    read0 = value(before, "wlr_change_rows_read_total", 0.0, **r)
    written = []
    for i in range(3):  # scraped while the master writes: never ahead of the state files
        written.append(sql(spark, f"INSERT INTO delta.`{t}` VALUES ({10 + i}, 'x'), ({20 + i}, 'y')"))
        now = scrape(port)
        assert value(now, "wlc_tick", **db) <= _tick(dbfarm, "m")
        assert value(now, "wlr_tick", **r) <= rep.tick()
    last = written[-1]
    wait_until(lambda: rep.tick() == last, 120, f"the follower to apply transaction {last}")
    copy = {**db, "destination": shipper.to}  # other tests of this process may have shipped "m" elsewhere
    wait_until(lambda: value(scrape(port), "wlc_ship_behind_batches", **copy) == 0, 60, "the copy to catch up")
    after = scrape(port)
    cfg = read_master_state(Storage.of(dbfarm), os.path.join(dbfarm, "m"))
    assert value(after, "wlc_tick", **db) == cfg.tick == last == m.tick()
    assert value(after, "wlc_transactions_published_total", **db) - published0 == 3
    assert value(after, "wlc_publish_seconds_count", **db) >= 3
    assert value(after, "wlc_staged_transactions", **db) == 0
    assert value(after, "wlc_capture_up", **db) == 1
    assert value(after, "wlc_tables_not_replicated", **db) == 0
    assert value(after, "wlc_log_batches", level="0", **db) == cfg.batches  # one batch a transaction
    assert value(after, "wlc_log_bytes", level="0", **db) == sum(
        Storage.of(dbfarm).tree_size(os.path.join(m.logs, n)) for n in os.listdir(m.logs) if re.fullmatch(r"m_\d+", n)
    )
    assert value(after, "wlc_snapshots", **db) == len([s for s in m.snapshots() if s.path])
    assert 0 <= value(after, "wlc_heartbeat_age_seconds", **db) < 30
    status = rep.status()
    assert value(after, "wlr_tick", **r) == status["tick"] == last
    assert value(after, "wlr_master_tick", **r) == status["master_tick"]
    assert value(after, "wlr_lag_transactions", **r) == status["lag_transactions"] == 0
    assert value(after, "wlr_lag_seconds", **r) == 0
    assert value(after, "wlr_state", state="following", **r) == 1
    assert value(after, "wlr_state", state="failed", **r) == 0
    assert value(after, "wlr_change_rows_read_total", **r) - read0 == 6  # two rows a transaction
    applied = sum(v for (n, ls), v in after.items() if n == "wlr_segments_applied_total" and ("replica", "r") in ls)
    assert applied >= 1
    assert value(after, "wlc_ship_behind_seconds", **copy) == 0
    assert value(after, "wlc_ship_batches_total", **copy) >= 3
    assert value(after, "process_cpu_seconds_total") > 0  # prometheus_client's own process metrics
    shipper.stop()
    rep.close()
    m.close()
    gone = scrape(port)  # a closed replica and master are no longer reported
    assert not [k for k in gone if k[0] in ("wlr_tick", "wlc_tick")]
    want = [(1, "a"), (2, "b"), (10, "x"), (11, "x"), (12, "x"), (20, "y"), (21, "y"), (22, "y")]
    assert sorted(rows(rep.table("s.t"))) == want


def test_the_capture_and_follow_services_are_scraped_while_the_master_writes(spark, dbfarm):
    t = os.path.join(dbfarm, "m", "s", "t")
    wlc.Master("m", dbfarm=dbfarm, capture=False).create(beat=0)  # capture runs in its own process below
    capture = Service("wlc", "capture", dbfarm, "m", "--metrics-port", "0")
    follower = None
    try:
        cport = capture.port()
        spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")  # transaction 0
        spark.sql(f"INSERT INTO delta.`{t}` VALUES (1)")  # 1
        wait_until(lambda: _tick(dbfarm, "m") >= 1, 120, "capture to publish the first insert")
        follower = Service("wlr", "replicate", dbfarm, "m", "r", "--follow", "--metrics-port", "0")
        fport = follower.port()
        db, r = {"database": "m"}, {"database": "m", "replica": "r"}
        last = 4
        for i in range(2, 5):  # transactions 2..4, scraped while the master writes
            spark.sql(f"INSERT INTO delta.`{t}` VALUES ({i})")
            assert value(scrape(cport), "wlc_tick", **db) <= _tick(dbfarm, "m")
            seen = value(scrape(fport), "wlr_tick", -1.0, **r)
            st = read_replica_state(Storage.of(dbfarm), os.path.join(dbfarm, "r"))  # read after the scrape
            assert st is not None and seen <= st.tick
        wait_until(lambda: value(scrape(cport), "wlc_tick", **db) == last, 120, f"capture's wlc_tick to reach {last}")
        wait_until(lambda: value(scrape(fport), "wlr_tick", -1.0, **r) == last, 120, f"wlr_tick to reach {last}")
        c, f = scrape(cport), scrape(fport)
        assert value(c, "wlc_tick", **db) == _tick(dbfarm, "m") == last
        assert value(c, "wlc_capture_up", **db) == 1
        assert value(c, "wlc_transactions_published_total", **db) == last + 1  # every transaction, from 0
        assert value(c, "wlc_batches_published_total", **db) == last + 1  # beat 0: a batch each
        st = read_replica_state(Storage.of(dbfarm), os.path.join(dbfarm, "r"))
        assert st is not None and value(f, "wlr_tick", **r) == st.tick == last
        assert value(f, "wlr_lag_transactions", **r) == 0
        assert value(f, "wlr_state", state="following", **r) == 1
        assert value(f, "wlr_failures_total", 0.0, kind="transaction", **r) == 0
        assert (
            value(f, "wlr_segment_apply_seconds_count", 0.0, engine="arrow", **r)
            + value(f, "wlr_segment_apply_seconds_count", 0.0, engine="spark", **r)
            >= 1
        )
    finally:
        if follower is not None:
            out = follower.stop()
            assert follower.proc.returncode == 0, out[-3000:]
        out = capture.stop()
        assert capture.proc.returncode == 0, out[-3000:]
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm)
    assert sorted(rows(rep.table("s.t"))) == [(1,), (2,), (3,), (4,)]
