"""Restoring a replica table into a master (``Replica.restore_table``, ``wlr restore``): the
table comes back as the replica holds it (definition and rows), capture records it like any
other table, and every refusal is made before anything is written."""

from __future__ import annotations

import os
import shutil

import pytest

import wlc
import wlr
from wlcore.deltalog import list_versions, read_commit
from wlcore.errors import ConfigError, MasterStateError

from ..fault.helpers import run_module, tree
from .helpers import local, rows, table_definition

pytestmark = pytest.mark.spark


def _at_view(rep, table):
    """The replica table's definition at the replica's consistent tick."""
    from wlcore.deltalog import metadata_at
    from wlcore.storage import Storage

    path = local(rep.path_of(table))
    return metadata_at(Storage.of(path), path, rep.versions()[table]).shape()


def test_restore_table_makes_the_replica_table_again_in_a_capturing_master(spark, master, dbfarm):
    p = master.table_path("s.orders")
    spark.sql(f"""CREATE TABLE delta.`{p}` (
                    id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 10),
                    region STRING NOT NULL COMMENT 'sales region', qty INT, note STRING DEFAULT 'none')
                  USING delta PARTITIONED BY (region) COMMENT 'orders'
                  TBLPROPERTIES ('wlc.key' = 'id', 'team' = 'ops', 'delta.feature.allowColumnDefaults' = 'supported')""")
    spark.sql(f"ALTER TABLE delta.`{p}` ADD CONSTRAINT qty_positive CHECK (qty > 0)")
    spark.sql(f"INSERT INTO delta.`{p}` (region, qty) VALUES ('eu', 1), ('us', 2), ('eu', 3)")
    spark.sql(f"UPDATE delta.`{p}` SET qty = 30 WHERE qty = 3")
    before_drop = wlc.flush()
    shutil.rmtree(local(p))  # dropped by mistake: capture records a drop
    wlc.flush()
    r1 = wlr.Replica("m", replica="r1", dbfarm=dbfarm).replicate(until=before_drop, follow=False)
    want_rows, want_def = rows(r1.table("s.orders")), _at_view(r1, "s.orders")
    assert want_def["properties"]["wlc.key"] == "id" and want_def["partitioning"] == ["region"]

    # refused before anything is written
    os.makedirs(os.path.join(dbfarm, "plain"))
    moving = ("m/wlc.config",)  # the running master's watermark
    before = tree(dbfarm, moving)
    with pytest.raises(wlr.NoSuchTableError, match=r"s\.ordrs is not on replica r1 .*did you mean s\.orders") as exc:
        r1.restore_table("s.ordrs", into="m")
    assert exc.value.nearest == ["s.orders"]
    with pytest.raises(MasterStateError, match=r"'plain' .* is not a master .*wlc\.master\('plain', "):
        r1.restore_table("s.orders", into="plain")
    with pytest.raises(MasterStateError, match="'r1' in .* is a replica of master 'm', not a master"):
        r1.restore_table("s.orders", into="r1")
    with pytest.raises(wlr.NotFoundError, match="no database 'nodb'"):
        r1.restore_table("s.orders", into="nodb")
    with pytest.raises(ConfigError, match="wlc_logs is master m's own folder"):
        r1.restore_table("s.orders", into="m", as_="wlc_logs.orders")
    assert tree(dbfarm, moving) == before

    done = r1.restore_table("s.orders", into="m")
    assert (done.table, done.master, done.rows, done.replica, done.tick) == ("s.orders", "m", 3, "r1", before_drop)
    assert done.version == 3 and done.commits == 4
    assert done.steps == ("create", "constraint qty_positive", "insert", "sync identity id")
    assert list_versions(master.storage, local(p)) == [0, 1, 2, 3]
    assert "properties team=ops, wlc.key=id" in done.carried and "partitioned by region" in done.carried
    assert "constraints qty_positive CHECK (qty > 0)" in done.carried
    assert "restored s.orders of replica r1 into master m as s.orders" in done.lines()[0]
    assert rows(spark.read.format("delta").load(p)) == want_rows
    assert table_definition(p) == want_def
    assert read_commit(master.storage, local(p), 0).user_metadata.startswith("wlr restore s.orders from r1")

    before = tree(dbfarm, moving)
    with pytest.raises(wlr.TableExistsError, match=r"s\.orders exists on master m .*replace=True"):
        r1.restore_table("s.orders", into="m")
    assert tree(dbfarm, moving) == before

    # captured like any other table: a new replica gets it, defined the same
    wlc.flush()
    r2 = wlr.Replica("m", replica="r2", dbfarm=dbfarm).replicate(follow=False)
    assert rows(r2.table("s.orders")) == want_rows and _at_view(r2, "s.orders") == want_def

    # the identity column goes on after the restored values (100, 110, 120)
    spark.sql(f"INSERT INTO delta.`{p}` (region, qty) VALUES ('us', 5)")
    assert sorted(r[0] for r in spark.read.format("delta").load(p).select("id").collect()) == [100, 110, 120, 130]

    # replace: one REPLACE TABLE in the same log, captured as any replaced table
    again = r1.restore_table("s.orders", into=master, replace=True)
    assert again.replaced and "4 rows" in again.replaced and again.commits == 4 and again.steps[0] == "replace"
    assert rows(spark.read.format("delta").load(p)) == want_rows and table_definition(p) == want_def
    assert rows(spark.table("s.orders")) == want_rows  # into a wlc.Master: registered in this session's catalog
    wlc.flush()
    r2.replicate(follow=False)
    assert rows(r2.table("s.orders")) == want_rows and _at_view(r2, "s.orders") == want_def
    r1.close()
    r2.close()


def test_wlr_restore_command(spark, master, dbfarm):
    """``python -m wlr restore`` in a process of its own while this process captures the master."""
    p = master.table_path("s.t")
    spark.sql(f"""CREATE TABLE delta.`{p}` (k INT NOT NULL, v STRING) USING delta CLUSTER BY (k)
                  TBLPROPERTIES ('wlc.key' = 'k', 'team' = 'crm')""")
    spark.sql(f"ALTER TABLE delta.`{p}` ADD CONSTRAINT k_pos CHECK (k > 0)")
    spark.sql(f"INSERT INTO delta.`{p}` VALUES (1, 'a'), (2, 'b')")
    last = wlc.flush()
    r1 = wlr.Replica("m", replica="r1", dbfarm=dbfarm).replicate(until=last, follow=False)
    shutil.rmtree(local(p))
    wlc.flush()

    # refusals: no Spark, nothing written
    before = tree(dbfarm, ("m/wlc.config",))
    bad = run_module("wlr", "restore", dbfarm, "r1", "s.tt", "--into", "m")
    assert bad.returncode == 3 and "did you mean s.t?" in bad.stderr, bad.stderr
    bad = run_module("wlr", "restore", dbfarm, "r1", "s.t", "--into", "r1")
    assert bad.returncode == 2 and "is a replica of master 'm', not a master" in bad.stderr, bad.stderr
    bad = run_module("wlr", "restore", dbfarm, "nor", "s.t", "--into", "m")
    assert bad.returncode == 3 and "no database 'nor'" in bad.stderr, bad.stderr
    assert tree(dbfarm, ("m/wlc.config",)) == before

    ok = run_module("wlr", "restore", dbfarm, "r1", "s.t", "--into", "m", "--as", "s.t_back")
    assert ok.returncode == 0, ok.stderr
    assert "restored s.t of replica r1 into master m as s.t_back" in ok.stdout
    for text in ("2 rows", "3 commits: create, constraint k_pos, insert", "clustered by k", "wlc.key=k"):
        assert text in ok.stdout, ok.stdout
    back = master.table_path("s.t_back")
    assert rows(spark.read.format("delta").load(back)) == rows(r1.table("s.t")) == [(1, "a"), (2, "b")]
    assert table_definition(back) == _at_view(r1, "s.t")
    bad = run_module("wlr", "restore", dbfarm, "r1", "s.t", "--into", "m", "--as", "s.t_back")
    assert bad.returncode == 2 and "exists on master m" in bad.stderr and "--replace" in bad.stderr, bad.stderr
    wlc.flush()
    r1.close()
