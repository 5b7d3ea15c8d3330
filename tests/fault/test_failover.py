"""Failover: the master's capture killed by SIGKILL mid-write, a replica promoted, the others switch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

import wlr
from wlc import Master
from wlcore.errors import MasterStateError
from wlcore.logstore import LogStore
from wlcore.promotion import read_fence
from wlcore.state import read_master_state
from wlcore.storage import Storage

from ..integration.helpers import rows
from ..waiting import wait_until
from .helpers import env_with, master_state, start_module, stop

pytestmark = pytest.mark.spark


def _tick(farm: str, db: str, proc: subprocess.Popen | None = None) -> int:
    """The last transaction published by master ``db`` (its wlc.config), checking its capture runs."""
    cfg = master_state(farm, db, proc)
    return cfg.tick if cfg is not None else -1


def _beating(farm: str, db: str, proc: subprocess.Popen) -> bool:
    """True once capture of ``db`` wrote its first heartbeat, checking its process runs."""
    cfg = master_state(farm, db, proc)
    return cfg is not None and cfg.heartbeat is not None


def test_failover_after_capture_is_killed(spark, dbfarm):
    Master("m", dbfarm=dbfarm, capture=False).create(beat=0)
    old = start_module("wlc", "capture", dbfarm, "m")
    t = os.path.join(dbfarm, "m", "s", "t")
    try:
        spark.sql(f"CREATE TABLE delta.`{t}` (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
        spark.sql(f"INSERT INTO delta.`{t}` VALUES (1, 'a'), (2, 'b')")
        spark.sql(f"UPDATE delta.`{t}` SET v = 'B' WHERE id = 2")
        wait_until(lambda: _tick(dbfarm, "m", old) == 2, 180, "capture to publish transactions 0..2")
        writing = threading.Thread(target=spark.sql, args=(f"INSERT INTO delta.`{t}` VALUES (3, 'c')",))
        writing.start()
        old.send_signal(signal.SIGKILL)  # mid-write: the insert may or may not be published
        writing.join()
        old.wait(timeout=60)
        assert old.returncode == -signal.SIGKILL
    finally:
        stop(old)
    published = _tick(dbfarm, "m")
    assert published >= 2

    # two replicas: ra relays and stops at transaction 1, rb follows ra; rc has all that was published
    ra = wlr.Replica("m", replica="ra", dbfarm=dbfarm).replicate(until=1, relay=True)
    rb = wlr.Replica(source="ra", replica="rb", dbfarm=dbfarm).replicate(until=1)
    rc = wlr.Replica("m", replica="rc", dbfarm=dbfarm).replicate(follow=False)
    assert (ra.tick(), rb.tick(), rc.tick()) == (1, 1, published)
    for rep in (ra, rb, rc):
        rep.close()

    # ra is behind what was published: refused, unless forced (the report names what is left out)
    with pytest.raises(wlr.PromotionError) as refused:
        wlr.promote("ra", dbfarm=dbfarm)
    assert refused.value.left_out == list(range(2, published + 1))
    new = start_module("wlr", "promote", dbfarm, "ra", "--force", "--capture")  # becomes `wlc capture` of ra
    try:
        wait_until(lambda: _beating(dbfarm, "ra", new), 180, "capture of the promoted replica to start")
        cfg = read_master_state(Storage.of(dbfarm), os.path.join(dbfarm, "ra"))
        assert (cfg.database, cfg.promoted_tick, cfg.promoted_from) == ("m", 1, os.path.join(dbfarm, "m"))
        fence = read_fence(Storage.of(dbfarm), os.path.join(dbfarm, "m"))
        assert fence.epoch == cfg.epoch and cfg.epochs.endswith(f",2:{cfg.epoch}")  # the history forks after 1

        # rb read ra's relay: it switches to ra, now master of m, and goes on from its tick
        rb = wlr.Replica(source="ra", replica="rb", dbfarm=dbfarm).replicate(follow=False)
        assert rb.tick() == 1
        a = os.path.join(dbfarm, "ra", "s", "t")
        spark.sql(f"INSERT INTO delta.`{a}` VALUES (4, 'd')")  # written to the new master
        wait_until(lambda: _tick(dbfarm, "ra", new) == 2, 180, "the promoted master to publish transaction 2")
        rb.replicate(follow=False)
        assert rb.tick() == 2
        assert (
            rows(rb.table("s.t")) == rows(spark.read.format("delta").load(a)) == [(1, "a"), (2, "b"), (4, "d")]
        )  # the update (2) left out
        rb.close()
    finally:
        out = stop(new)
    assert "ra is the master of database 'm' now" in out and "left out (forced): published transactions 2" in out

    # the old master's capture, started again, refuses to publish
    again = subprocess.run(
        [sys.executable, "-m", "wlc", "capture", dbfarm, "m"], env=env_with(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert again.returncode != 0 and "is fenced" in again.stderr, again.stderr[-3000:]

    # rc applied transaction 2 of the old master, which the new history leaves out
    with pytest.raises(wlr.DivergedError) as diverged:
        wlr.Replica(source="ra", replica="rc", dbfarm=dbfarm).replicate(follow=False)
    assert diverged.value.txn == 2 and "make a new replica" in str(diverged.value)


def test_a_capture_still_running_is_fenced(spark, master, dbfarm):
    """A switchover: the master's capture still runs when a caught-up replica is promoted; it may
    not publish again, and what it had staged stays unpublished."""
    t = master.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (1)")
    assert master.flush() == 1
    wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False).close()
    done = wlr.promote("r", dbfarm=dbfarm)
    assert (done.tick, done.left_out, done.fenced) == (1, [], os.path.join(dbfarm, "m"))
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (2)")
    with pytest.raises(MasterStateError, match="is fenced"):
        master.flush()
    assert _tick(dbfarm, "m") == 1
    assert [b.number for b in LogStore(Storage.of(dbfarm), master.path, master.logs, "m").batches()] == [0, 1]
