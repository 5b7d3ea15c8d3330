"""Honest lag: commits capture has not published count, and lag is the age of the oldest."""

from __future__ import annotations

import pytest

import wlr

from .helpers import sql

pytestmark = pytest.mark.spark


def test_lag_counts_commits_not_yet_captured(spark, master, dbfarm):
    t = master.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
    last = sql(spark, f"INSERT INTO delta.`{t}` VALUES (1)")
    rep = wlr.replicate("m", until=last, replica="r", dbfarm=dbfarm)
    s = rep.status()
    assert (s["lag_transactions"], s["lag_seconds"]) == (0, 0.0)  # applied all: no lag after a quiet spell
    assert s["capture"] == "alive"
    with open(f"{dbfarm}/m/wlc.log", encoding="utf-8") as fh:  # a line per published batch
        assert f"published batch {last}: transactions {last}..{last} (1)" in fh.read()
    master.close()  # capture is down: the next commits are not published
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (2)")
    spark.sql(f"OPTIMIZE delta.`{t}`")  # no data change: not a transaction (and the INSERT is older now)
    s = rep.status()
    assert s["lag_transactions"] == 1 and s["master_tick"] == last
    assert 0 < s["lag_seconds"] < 60
    rep.close()
