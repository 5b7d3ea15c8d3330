"""Selective replication: some tables, and of some tables only the rows matching a
predicate, with updates that move rows into and out of it (keyed and unkeyed tables)."""

from __future__ import annotations

import os

import pytest

import wlc
import wlr
from wlcore.errors import ConfigError
from wlr.errors import ReplicaStateError

from .helpers import rows, sql

pytestmark = pytest.mark.spark

EU = "region = 'EU'"


def _eu(spark, path: str) -> list[tuple]:
    return rows(spark.read.format("delta").load(path).filter(EU))


def test_selected_tables_and_rows_crossing_the_predicate_both_ways(spark, master, dbfarm):
    o, ln = master.table_path("sales.orders"), master.table_path("sales.lines")
    e, s = master.table_path("hr.employees"), master.table_path("hr.salaries")
    sql(
        spark,
        f"CREATE TABLE delta.`{o}` (id INT, region STRING, amount INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')",
    )
    sql(spark, f"CREATE TABLE delta.`{ln}` (region STRING, item STRING) USING delta")  # unkeyed
    sql(spark, f"CREATE TABLE delta.`{e}` (id INT, name STRING) USING delta")
    sql(spark, f"CREATE TABLE delta.`{s}` (id INT, pay INT) USING delta")
    sql(spark, f"INSERT INTO delta.`{o}` VALUES (1, 'US', 10), (2, 'EU', 20), (3, 'EU', 30), (4, 'US', 40)")
    sql(spark, f"INSERT INTO delta.`{ln}` VALUES ('EU', 'a'), ('US', 'b'), ('EU', 'a'), ('US', 'c')")
    sql(spark, f"INSERT INTO delta.`{e}` VALUES (1, 'ann')")
    sql(spark, f"INSERT INTO delta.`{s}` VALUES (1, 100)")
    start = wlc.snapshot()  # a new replica starts from it: the copy is cut to the selection too
    where = {"sales.orders": EU, "sales.lines": EU}
    rep = wlr.replicate("m", replica="eu", tables=["sales.*", "hr.employees"], where=where, follow=False)
    assert rep.tick() == start.txn
    assert rows(rep.table("sales.orders")) == _eu(spark, o) == [(2, "EU", 20), (3, "EU", 30)]
    assert rows(rep.table("sales.lines")) == _eu(spark, ln)
    assert rows(rep.table("hr.employees")) == [(1, "ann")]
    assert not os.path.exists(os.path.join(rep.path, "hr", "salaries"))
    # rows move into and out of the predicate, in one segment and across segments
    sql(spark, f"UPDATE delta.`{o}` SET region = 'EU' WHERE id = 1")  # in
    sql(spark, f"UPDATE delta.`{o}` SET region = 'US' WHERE id = 2")  # out
    sql(spark, f"UPDATE delta.`{o}` SET amount = amount + 1 WHERE id = 3")  # stays in
    sql(spark, f"UPDATE delta.`{o}` SET region = 'EU' WHERE id = 4")  # in ...
    sql(spark, f"UPDATE delta.`{o}` SET region = 'US', amount = 41 WHERE id = 4")  # ... and out again
    sql(spark, f"INSERT INTO delta.`{o}` VALUES (5, 'EU', 50), (6, 'US', 60)")
    sql(spark, f"UPDATE delta.`{ln}` SET region = 'US' WHERE item = 'a'")  # both copies out
    sql(spark, f"UPDATE delta.`{ln}` SET region = 'EU' WHERE item = 'c'")  # in
    sql(spark, f"INSERT INTO delta.`{s}` VALUES (2, 200)")
    rep = wlr.replicate("m", replica="eu", follow=False)
    assert rep.tick() == wlc.tick()
    assert rows(rep.table("sales.orders")) == _eu(spark, o) == [(1, "EU", 10), (3, "EU", 31), (5, "EU", 50)]
    assert rows(rep.table("sales.lines")) == _eu(spark, ln) == [("EU", "c")]
    # one transaction at a time lands the same rows (no collapse across the moves)
    one = wlr.replicate(
        "m",
        replica="eu1",
        tables=["sales.orders"],
        where={"sales.orders": EU},
        follow=False,
        collapse=False,
        snapshot=-1,
    )
    assert rows(one.table("sales.orders")) == _eu(spark, o)
    assert not os.path.exists(os.path.join(one.path, "sales", "lines"))
    # the selection is recorded; another one needs a new replica and changes nothing
    with pytest.raises(ReplicaStateError, match="make a new replica"):
        wlr.replicate("m", replica="eu", where={"sales.orders": "region = 'US'"}, follow=False)
    assert rows(wlr.Replica("m", replica="eu").table("sales.orders")) == _eu(spark, o)
    with pytest.raises(ConfigError, match="does not parse"):
        wlr.replicate("m", replica="bad", where={"sales.orders": "region = = 'EU'"}, follow=False)
    assert not os.path.exists(os.path.join(dbfarm, "bad", "wlr.config"))
    with pytest.raises(ConfigError, match="does not fit the table"):  # checked against the snapshot's table
        wlr.replicate("m", replica="bad2", where={"sales.orders": "no_such_column = 'EU'"}, follow=False)
    assert not os.path.exists(os.path.join(dbfarm, "bad2", "wlr.config"))
    # a table name (or a pattern) the master never had: the nearest names, nothing made
    for tables, where in ((["sales.ordres"], None), (None, {"sale.orders": EU}), (["slaes.*"], None)):
        with pytest.raises(wlr.NotFoundError, match="did you mean .*sales.orders"):
            wlr.replicate("m", replica="typo", tables=tables, where=where, follow=False)
        assert not os.path.exists(os.path.join(dbfarm, "typo"))
    with pytest.raises(ReplicaStateError, match="not on replica eu1 .*did you mean sales.orders"):
        one.table("orders")
