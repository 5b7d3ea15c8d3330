"""A refused call changes nothing: the file tree is the same before and after, the running
master keeps capturing, the running follower keeps following, and the error is the
project's own, with a message that says what to do."""

import os

import pytest

import wlc
import wlr

from ..integration.helpers import rows, sql
from ..waiting import wait_until
from .helpers import run_module, tree

pytestmark = pytest.mark.spark


def test_refused_master_calls_change_nothing(spark, master, dbfarm):
    """wlc.master() refused (logs not a folder, a replica, a second logs folder, a file): the tree
    is as it was, the running master still captures, and a replica made before still replays it."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)
    moving = ("m/wlc.config",)  # the running master's watermark
    before = tree(dbfarm, moving)

    with pytest.raises(wlc.ConfigError, match="logs='' is not a folder"):
        wlc.master("other", dbfarm=dbfarm, logs="")
    with pytest.raises(wlc.MasterStateError, match="is a replica"):
        wlc.master("r", dbfarm=dbfarm)
    with pytest.raises(wlc.MasterStateError, match="already logs to"):
        wlc.master("m", dbfarm=dbfarm, logs=os.path.join(dbfarm, "elsewhere"))
    afile = os.path.join(dbfarm, "afile")
    assert tree(dbfarm, moving) == before
    open(afile, "w").close()
    before = tree(dbfarm, moving)
    with pytest.raises(wlc.ConfigError, match="is a file, not a folder"):
        wlc.master("x", dbfarm=afile)
    with pytest.raises(wlc.ConfigError, match="is a file"):
        wlc.master("afile", dbfarm=dbfarm)
    assert tree(dbfarm, moving) == before

    # the master this process was capturing still captures (its thread, on its own)
    assert wlc.current() is master and master.running
    spark.sql(f"INSERT INTO delta.`{p}` VALUES (1)")
    wait_until(lambda: master.config.tick >= 1, 60, "the capture thread to publish transaction 1")
    assert master.config.tick == 1, "the capture thread stopped after a refused master() call"
    assert rep.replicate(follow=False).tick() == 1 and rows(rep.table("s.t")) == [(1,)]


def test_refused_replicate_calls_change_nothing(spark, master, dbfarm):
    """wlr.replicate() refused (no such master, a replica as the source, a folder not empty, a file,
    a target of bad format): no folder or wlr.lock is made, and the running follower still follows."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    follower = wlr.replicate("m", replica="r", dbfarm=dbfarm)  # follows in the background
    assert follower.following()
    os.makedirs(os.path.join(dbfarm, "busy", "stuff"))
    afile = os.path.join(dbfarm, "afile")
    open(afile, "w").close()
    moving = ("m/wlc.config", "r")  # the running master's watermark, the follower's own state
    before = tree(dbfarm, moving)

    with pytest.raises(wlr.NotFoundError, match="no database 'nomaster' in .*; the masters in .* are: m"):
        wlr.replicate("nomaster", replica="r2", dbfarm=dbfarm)
    with pytest.raises(wlr.ReplicaStateError, match="'r' in .* is a replica of master 'm', not a master"):
        wlr.replicate("r", replica="m", dbfarm=dbfarm)  # a replica as the source
    with pytest.raises(wlr.ReplicaStateError, match="not empty"):
        wlr.replicate("m", replica="busy", dbfarm=dbfarm)
    with pytest.raises(wlc.ConfigError, match="is a file"):
        wlr.replicate("m", replica="afile", dbfarm=dbfarm)
    with pytest.raises(wlc.ConfigError, match="is a file, not a folder"):
        wlr.replicate("m", replica="r3", dbfarm=afile)
    with pytest.raises(wlr.TargetError, match="incorrect format"):
        wlr.replicate("m", until="halo", replica="r4", dbfarm=dbfarm)
    assert tree(dbfarm, moving) == before  # no r2/r3/r4 folder, no wlr.lock, busy/ untouched

    # the follower goes on following
    assert wlr.current() is follower and follower.following()
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (7)")
    wait_until(lambda: follower.tick() >= 1, 60, "the follower to apply transaction 1")
    assert follower.tick() == 1 and rows(follower.table("s.t")) == [(7,)]


def test_replica_made_a_master_is_refused_as_a_replica_target(spark, master, dbfarm):
    """`wlr.replicate` into a folder that is a master: refused, no wlr.lock or wlr.config made."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    other = wlc.Master("m2", dbfarm=dbfarm, capture=False).start()
    other.close()
    before = tree(os.path.join(dbfarm, "m2"))
    with pytest.raises(wlr.ReplicaStateError, match="is a master"):
        wlr.replicate("m", replica="m2", dbfarm=dbfarm, follow=False)
    assert tree(os.path.join(dbfarm, "m2")) == before


def test_capture_command_refuses_a_bad_beat_before_making_anything(dbfarm):
    proc = run_module("wlc", "capture", dbfarm, "newdb", "--beat", "-1", timeout=120)
    assert proc.returncode == 2 and "--beat must be >= 0" in proc.stderr, proc.stderr[-2000:]
    assert os.listdir(dbfarm) == []  # no database folder, no lock, no wlc.config
