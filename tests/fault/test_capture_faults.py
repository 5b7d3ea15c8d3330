"""Capture never loses a transaction: a refused second capturer, a failed publish, table
names that are not plain identifiers, and capture killed at named crash points."""

import os
import shutil
import warnings
from datetime import datetime, timedelta, timezone

import pytest

import wlc
import wlr
from tests.waiting import wait_until
from wlc.master import Master
from wlcore.deltalog import list_versions, read_commit

from ..integration.helpers import master_rows, rows
from .helpers import killed_by_sigkill, published, run_module, run_python, tree

pytestmark = pytest.mark.spark


def test_refused_second_capturer_keeps_the_open_batch(spark, dbfarm):
    """`python -m wlc capture` on a running master is refused and touches nothing."""
    m = Master("m", dbfarm=dbfarm, capture=False).start()
    m.beat(300)  # the batch stays open
    p = m.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    spark.sql(f"INSERT INTO delta.`{p}` VALUES (1), (2)")
    _wait_settled(m, "s", "t")  # capture takes commits once they are capture.settle (0.2 s) old
    m._step(take_all=False)  # stage both commits in the open batch, publish nothing
    assert m.last_logged() == 1 and m.tick() == m.config.tick == -1
    staged = [n for n in os.listdir(m.logs) if n.startswith(".open-")]
    assert len(staged) == 1
    before = tree(m.path)

    proc = run_module("wlc", "capture", dbfarm, "m", "--beat", "0", timeout=120)
    assert proc.returncode == 2 and "another process is capturing" in proc.stderr, proc.stderr[-2000:]
    assert tree(m.path) == before  # the open batch and everything else untouched
    with pytest.raises(wlc.MasterStateError, match="another process is capturing"):
        Master("m", dbfarm=dbfarm).start()  # the same refusal in-process
    assert tree(m.path) == before

    assert m.flush() == 1
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)
    assert rows(rep.table("s.t")) == [(1,), (2,)]
    m.close()


def _wait_settled(m: Master, schema: str, table: str) -> None:
    """Wait until the table's newest commit is ``capture.settle`` old by the time capture reads
    for it (an In-Commit Timestamp, else the commit file's modification time)."""
    path = os.path.join(m.path, schema, table)
    last = read_commit(m.storage, path, list_versions(m.storage, path)[-1], file_time=True)
    settled = last.timestamp + timedelta(seconds=m.settle)
    wait_until(lambda: datetime.now(timezone.utc) >= settled, 10, "the last commit to be capture.settle old", 0.02)


def test_failed_publish_leaves_capture_where_it_was(spark, dbfarm):
    """Beat 0, several commits in one scan, a publish that fails; ids stay gap-free."""
    m = Master("m", dbfarm=dbfarm, capture=False).start()
    m.beat(0)
    p = m.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    assert m.flush() == 0
    for i in range(3):
        spark.sql(f"INSERT INTO delta.`{p}` VALUES ({i})")
    blocker = os.path.join(m.logs, "m_000000000002")
    os.makedirs(blocker)  # the name of the second batch of this scan is taken
    with pytest.raises(wlc.BatchError, match="m_000000000002 already exists"):
        m.flush()
    assert m.config.tick == 1  # txn 1 published, txn 2 staged with its id
    with pytest.raises(wlc.BatchError):
        m.flush()  # still taken: refused again, nothing lost
    os.rmdir(blocker)
    assert m.flush() == 3
    txns = published(m.logs, "m")
    assert [t.txn for t in txns] == [0, 1, 2, 3]
    assert [t.version for t in txns] == [0, 1, 2, 3]  # every Delta version once
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)
    assert rows(rep.table("s.t")) == [(0,), (1,), (2,)]
    m.close()


NAMES = ["it's", "da-sh", "ünïcødé", "back`tick", "do.t", "sp ace", "br{a}"]


def test_every_table_name_delta_accepts_is_replicated(spark, dbfarm):
    """Table names that are not plain identifiers are carried; one that cannot be is refused loudly."""
    from wlcore.names import qualified

    m = Master("m", dbfarm=dbfarm, capture=False).start()
    m.beat(300)
    schemas = {"s": NAMES[:4], "my-schema.x": NAMES[4:]}
    for schema, names in schemas.items():
        for n in names:
            df = spark.createDataFrame([(1, n), (2, "b")], "id int, v string")
            df.write.format("delta").save(os.path.join(m.path, schema, n))
            spark.sql(f"UPDATE delta.`{os.path.join(m.path, schema, n).replace('`', '``')}` SET v = 'x' WHERE id = 2")
    bad = os.path.join(m.path, "s", "new\nline")
    spark.range(2).write.format("delta").save(bad)
    with pytest.warns(wlc.NotReplicatedWarning, match="control character"):
        m.flush()
    assert list(m.not_replicated()) == [bad]
    proc = run_module("wlc", "status", dbfarm, "m", timeout=60)
    assert "NOT REPLICATED" in proc.stdout and "control character" in proc.stdout

    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)
    for schema, names in schemas.items():
        for n in names:
            name = qualified(schema, n)
            assert rows(rep.table(name)) == master_rows(spark, os.path.join(m.path, schema, n)) == [(1, n), (2, "x")]
    assert not os.path.exists(os.path.join(rep.path, "s", "new\nline"))
    shutil.rmtree(bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wlc.NotReplicatedWarning)
        m.flush()  # the table is gone: nothing to warn about any more
    assert m.not_replicated() == {}
    m.close()


def _capture_until_crash(dbfarm: str, point: str) -> None:
    """A process that writes two commits, then captures (beat 0, as ``wlc.config`` records) and
    flushes, killed at ``point`` on the first: both commits are in the log before capture starts,
    however fast capture reaches the point."""
    proc = run_python(
        f"""
        import os
        import wlc
        spark = wlc.spark_session()
        p = os.path.join({dbfarm!r}, "m", "s", "t")
        spark.sql(f"INSERT INTO delta.`{{p}}` VALUES (10)")
        spark.sql(f"INSERT INTO delta.`{{p}}` VALUES (11)")
        wlc.master("m", dbfarm={dbfarm!r})
        wlc.flush()
        print("NOT KILLED")
    """,
        WLC_CRASH_AT=point,
    )
    assert killed_by_sigkill(proc), (proc.returncode, proc.stdout[-500:], proc.stderr[-3000:])


@pytest.mark.parametrize("point", ["capture.staged", "capture.published"])
def test_capture_killed_at_a_crash_point_loses_and_repeats_nothing(spark, dbfarm, point):
    m = Master("m", dbfarm=dbfarm, capture=False).start()
    m.beat(0)
    p = m.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    assert m.flush() == 0
    m.close()
    _capture_until_crash(dbfarm, point)
    if point == "capture.published":  # the batch is out, wlc.config does not say so yet
        assert published(m.logs, "m")[-1].txn == 1
        assert "tick=0" in open(os.path.join(dbfarm, "m", "wlc.config")).read()
    with pytest.warns(UserWarning, match="already in master mode"):
        m2 = Master("m", dbfarm=dbfarm, capture=False).start()
    assert not [n for n in os.listdir(m2.logs) if n.startswith(".open-")]  # the dead capturer's staging is gone
    assert m2.flush() == 2
    txns = published(m2.logs, "m")
    assert [(t.txn, t.version) for t in txns] == [(0, 0), (1, 1), (2, 2)]
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)
    assert rows(rep.table("s.t")) == [(10,), (11,)]
    m2.close()
