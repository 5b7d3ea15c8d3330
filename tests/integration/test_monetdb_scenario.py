"""MonetDB's own wlc/wlr tests (wlc01..wlr35): transactions 0..9, replicas at 3, 4, 6 and 9."""

import os

import pytest

import wlc
import wlr

pytestmark = pytest.mark.spark

STATEMENTS = [
    "CREATE TABLE sys.tmp0 (i INT) USING delta",  # 0
    "INSERT INTO sys.tmp0 VALUES (1)",  # 1
    "DROP TABLE sys.tmp0",  # 2
    "CREATE TABLE sys.tmp (i INT, s STRING) USING delta",  # 3
    "INSERT INTO sys.tmp VALUES (1, 'hello'), (2, 'world')",  # 4
    "INSERT INTO sys.tmp VALUES (3, 'blah'), (4, 'bloh')",  # 5
    "INSERT INTO sys.tmp VALUES (5, 'red'), (6, 'fox')",  # 6
    "UPDATE sys.tmp SET i = 3 WHERE i = 1",  # 7
    "UPDATE sys.tmp SET s = 'blah'",  # 8
    "DELETE FROM sys.tmp WHERE i < 4",  # 9
]


@pytest.fixture
def monetdb_master(spark, dbfarm):
    m = wlc.master("db", dbfarm=dbfarm)
    wlc.beat(0)
    m.create_schema("sys")
    for sql in STATEMENTS:
        spark.sql(sql)
        wlc.flush()  # beat 0 publishes a batch per transaction; flush makes it deterministic
    yield m
    spark.sql("DROP SCHEMA IF EXISTS sys CASCADE")


def rows(rep, table="sys.tmp"):
    return sorted(tuple(r) for r in rep.table(table).collect())


def test_monetdb_replay_points(monetdb_master, dbfarm):
    assert wlc.tick() == 9
    r3 = wlr.replicate("db", until=3, replica="r3", dbfarm=dbfarm)
    assert r3.tick() == 3
    assert rows(r3) == []
    assert not os.path.exists(os.path.join(dbfarm, "r3", "sys", "tmp0"))

    r4 = wlr.replicate("db", until=4, replica="r4", dbfarm=dbfarm)
    assert rows(r4) == [(1, "hello"), (2, "world")]

    r6 = wlr.replicate("db", until=6, replica="r6", dbfarm=dbfarm)
    assert len(rows(r6)) == 6

    r9 = wlr.replicate("db", until=9, replica="r9", dbfarm=dbfarm)
    assert rows(r9) == [(4, "blah"), (5, "blah"), (6, "blah")]
    assert r9.tick() == 9 and r9.clock() == wlc.clock()

    # the same replica continues: 3 -> 6 -> 9, and cannot go back
    r3.replicate(until=6)
    assert len(rows(r3)) == 6 and r3.tick() == 6
    with pytest.raises(wlr.TargetError, match="cannot go back"):
        r3.replicate(until=4)
    r3.replicate(until=9)
    assert rows(r3) == [(4, "blah"), (5, "blah"), (6, "blah")]

    # replaying again changes nothing: every replica commit carries its txn id
    r3.replicate(follow=False)
    assert rows(r3) == [(4, "blah"), (5, "blah"), (6, "blah")]
