"""Master tables by name: the master's schemas and tables in the Spark session catalog."""

from __future__ import annotations

import logging
import os

import pytest

import wlc
import wlr
from wlcore.deltalog import list_versions
from wlcore.logstore import LogStore

from ..waiting import wait_until
from .helpers import rows

pytestmark = pytest.mark.spark


def test_master_registers_schemas_and_tables_at_their_folders(spark, dbfarm):
    db = os.path.join(dbfarm, "cat")
    spark.range(3).write.format("delta").save(f"{db}/sales/orders")  # made by path, before master mode
    m = wlc.master("cat", dbfarm=dbfarm)
    wlc.beat(0)
    versions = list_versions(m.storage, f"{db}/sales/orders")
    assert rows(spark.table("sales.orders")) == [(0,), (1,), (2,)]
    assert list_versions(m.storage, f"{db}/sales/orders") == versions  # registering wrote no commit
    spark.sql("CREATE TABLE sales.items (id INT, v STRING) USING delta")  # by name: in the master's folder
    assert os.path.isdir(f"{db}/sales/items/_delta_log")
    spark.sql("INSERT INTO sales.items VALUES (1, 'a')")
    spark.sql("DROP TABLE sales.orders")  # a managed table: its folder goes, capture sees a drop
    assert not os.path.exists(f"{db}/sales/orders")
    last = wlc.flush()
    store = LogStore(m.storage, m.path, m.logs, "cat")
    recs = [t for b in store.batches() for t in store.manifest(b).txns]
    assert [(t.table, t.ddl) for t in recs if t.ddl] == [("sales.items", "create"), ("sales.orders", "drop")]
    rep = wlr.replicate("cat", until=last, replica="cat_r", dbfarm=dbfarm)
    assert rows(rep.table("sales.items")) == [(1, "a")]
    assert "sales.orders" not in rep.tables()
    rep.close()
    m.close()


def test_attach_registers_without_capturing(spark, dbfarm):
    with pytest.raises(wlc.NotFoundError, match=r"no database 'nodb'") as refused:
        wlc.attach("nodb", dbfarm=dbfarm)
    assert "wlc.master(" not in str(refused.value)  # no hint that makes a master under a mistyped name
    m = wlc.master("att", dbfarm=dbfarm)
    wlc.beat(0)
    m.create_schema("s")
    spark.sql("CREATE TABLE s.t (id INT) USING delta")
    wlc.flush()
    a = wlc.attach("att", dbfarm=dbfarm)  # as a writer application would; capture stays in `m`
    assert not a.running and wlc.current() is m
    spark.sql("INSERT INTO s.t VALUES (7)")
    last = wlc.flush()
    rep = wlr.replicate("att", until=last, replica="att_r", dbfarm=dbfarm)
    assert rows(rep.table("s.t")) == [(7,)]
    rep.close()
    m.close()


def test_schema_made_outside_the_master_is_warned_about(spark, master, caplog):
    caplog.set_level(logging.WARNING, logger="wlc.master")
    spark.sql("CREATE SCHEMA IF NOT EXISTS stray_schema")
    try:
        wait_until(lambda: "stray_schema" in caplog.text, 30, "the warning about stray_schema")
        assert "schema 'stray_schema' was made at" in caplog.text
        assert "create_schema('stray_schema')" in caplog.text
    finally:
        spark.sql("DROP SCHEMA IF EXISTS stray_schema CASCADE")
