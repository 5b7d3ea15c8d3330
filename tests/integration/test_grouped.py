"""Replay by segments: grouped replay equals serial replay at every target, lands a table's
run of transactions as one commit, and readers see a consistent view while tables land."""

import glob
import os
import random
import threading

import pytest

import wlc
import wlr

from .helpers import local, master_rows, replay_log, rows, sql
from .test_monetdb_scenario import STATEMENTS

pytestmark = pytest.mark.spark


def replay_commits(rep, table):
    """The commitInfo of the replica table's replay commits, oldest first."""
    return [c["info"] for c in replay_log(rep, table)]


def replay_tags(rep, table):
    """The replay tags of the replica table's commits, oldest first."""
    return [info["userMetadata"].split(":", 2)[2] for info in replay_commits(rep, table)]


def rewrites(rep, table) -> int:
    """How many of the replica table's replay commits rewrote the whole table."""
    return sum(
        1
        for info in replay_commits(rep, table)
        if info.get("operation") == "WRITE" and info.get("operationParameters", {}).get("mode") == "Overwrite"
    )


@pytest.fixture
def merge_only(tmp_path, monkeypatch):
    """Settings with ``replica.rewrite_bytes: 0`` and ``replica.deltars_bytes: 0``: every keyed
    segment lands by Spark's MERGE."""
    spark_settings(tmp_path, monkeypatch, rewrite_bytes=0)


@pytest.fixture
def spark_only(tmp_path, monkeypatch):
    """Settings with ``replica.deltars_bytes: 0``: every segment lands by Spark."""
    spark_settings(tmp_path, monkeypatch)


@pytest.fixture
def deltars_merge(tmp_path, monkeypatch):
    """Settings with ``replica.rewrite_bytes: 0``: delta-rs lands a small table's keyed segment by MERGE."""
    spark_settings(tmp_path, monkeypatch, rewrite_bytes=0, deltars_bytes="256 MiB")


def spark_settings(tmp_path, monkeypatch, **replica):
    """Settings where Spark lands every segment (``replica.deltars_bytes: 0``) and ``replica``."""
    import yaml

    cfg = yaml.safe_load(open(os.environ["WLC_CONFIG"]))
    cfg.setdefault("replica", {}).update({"deltars_bytes": 0, **replica})
    path = tmp_path / "spark-only.yaml"
    path.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("WLC_CONFIG", str(path))


def test_grouped_equals_serial_on_the_monetdb_scenario(spark, dbfarm):
    m = wlc.master("db", dbfarm=dbfarm)
    wlc.beat(0)
    m.create_schema("sys")
    try:
        check_monetdb_points(spark, dbfarm)
    finally:
        spark.sql("DROP SCHEMA IF EXISTS sys CASCADE")
        m.close()


def check_monetdb_points(spark, dbfarm):
    for text in STATEMENTS:
        sql(spark, text)
    for until in (4, 6, 9):
        grouped = wlr.replicate("db", until=until, replica=f"g{until}", dbfarm=dbfarm)
        serial = wlr.replicate("db", until=until, replica=f"s{until}", dbfarm=dbfarm, collapse=False)
        assert rows(grouped.table("sys.tmp")) == rows(serial.table("sys.tmp")), until
        assert grouped.tick() == serial.tick() == until
    # transactions 4..9 on sys.tmp are one run of DML: one commit; serial made one per transaction
    assert replay_tags(wlr.Replica("db", "g9", dbfarm), "sys.tmp") == ["3:part", "3", "4-9"]
    assert replay_tags(wlr.Replica("db", "s9", dbfarm), "sys.tmp")[2:] == ["4", "5", "6", "7", "8", "9"]
    assert rows(wlr.Replica("db", "g9", dbfarm).table("sys.tmp")) == [(4, "blah"), (5, "blah"), (6, "blah")]


def random_mix(spark, k, u, n, seed=7):
    """``n`` random DML statements on keyed ``k`` and unkeyed ``u`` (chains on hot keys,
    NULL keys, key changes, duplicates, MERGE); returns the statements."""
    rnd = random.Random(seed)
    done = []
    for i in range(n):
        key = rnd.choice([1, 2, 3, 4, 5])
        choice = rnd.choice(["ins", "upd", "upd", "del", "keymove", "merge", "u_ins", "u_del", "u_upd"])
        stmt = {
            "ins": f"INSERT INTO delta.`{k}` SELECT {10000 * seed + i}, {i}, 'n{i}'",
            "upd": f"UPDATE delta.`{k}` SET v = v + 1 WHERE id = {key} OR id IS NULL",
            "del": f"DELETE FROM delta.`{k}` WHERE id = {key}",
            "keymove": f"UPDATE delta.`{k}` SET id = id + 1000 WHERE id = {key}",
            "merge": (
                f"MERGE INTO delta.`{k}` t USING (SELECT {key} AS id, {i} AS v, 'm{i}' AS note) s "
                "ON t.id <=> s.id WHEN MATCHED THEN UPDATE SET v = s.v "
                "WHEN NOT MATCHED THEN INSERT (id, v, note) VALUES (s.id, s.v, s.note)"
            ),
            "u_ins": f"INSERT INTO delta.`{u}` VALUES ({key}, 'x'), ({key}, 'x')",
            "u_del": f"DELETE FROM delta.`{u}` WHERE a = {key} AND b = 'x'",
            "u_upd": f"UPDATE delta.`{u}` SET b = 'y{i}' WHERE a = {key}",
        }[choice]
        spark.sql(stmt)
        done.append(stmt)
        if rnd.random() < 0.4:
            wlc.flush()  # batches of one to a few transactions
    wlc.flush()
    return done


def keyed_and_unkeyed(spark, master) -> tuple[str, str]:
    """Master tables ``s.k`` (keyed by ``id``, a NULL key among its rows) and ``s.u`` (unkeyed,
    duplicate rows); returns their paths."""
    k, u = master.table_path("s.k"), master.table_path("s.u")
    sql(spark, f"CREATE TABLE delta.`{k}` (id BIGINT, v INT, note STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"CREATE TABLE delta.`{u}` (a INT, b STRING) USING delta")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 0, 'a'), (2, 0, 'b'), (3, 0, 'c'), (NULL, 0, 'null key')")
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (1, 'x'), (1, 'x'), (2, 'x')")
    return k, u


def test_grouped_equals_serial_on_a_random_mix(spark, master, dbfarm):
    k, u = keyed_and_unkeyed(spark, master)
    start = wlc.tick()
    random_mix(spark, k, u, 24)
    sql(spark, f"ALTER TABLE delta.`{k}` ADD COLUMNS (extra INT)")  # a DDL in the middle of a run
    alter = wlc.flush()
    sql(spark, f"UPDATE delta.`{k}` SET extra = v * 2")
    random_mix(spark, k, u, 8, seed=8)
    end = wlc.tick()
    points = [start + 5, (start + end) // 2, end]
    serial = wlr.Replica("m", replica="serial", dbfarm=dbfarm)  # the reference: one commit a transaction
    for until in points:
        g = wlr.replicate("m", until=until, replica=f"g{until}", dbfarm=dbfarm)
        serial.replicate(until=until, follow=False, collapse=False)
        assert g.tick() == serial.tick() == until
        for table in ("s.k", "s.u"):
            assert rows(g.table(table)) == rows(serial.table(table)), (until, table)
    final = wlr.Replica("m", f"g{end}", dbfarm)
    assert rows(final.table("s.k")) == master_rows(spark, k)
    assert rows(final.table("s.u")) == master_rows(spark, u)
    # one commit a transaction (collapse=False) keeps MERGEs, for readers of the replica's change feed
    assert rewrites(serial, "s.k") == 0
    # far fewer commits than transactions: the ADD COLUMNS (nullable columns only) lands
    # inside the run's commit instead of cutting it
    spans = [tuple(int(x) for x in t.split("-")) for t in replay_tags(final, "s.k") if "-" in t]
    assert any(first < alter < last for first, last in spans), (alter, replay_tags(final, "s.k"))
    assert len(replay_tags(final, "s.k")) < (end - start) // 2
    # one replica continuing through every point lands the same
    cont = wlr.replicate("m", until=points[0], replica="cont", dbfarm=dbfarm)
    for until in points[1:]:
        cont.replicate(until=until)
    assert rows(cont.table("s.k")) == master_rows(spark, k)
    # the small keyed table took the segments that add no columns as whole rewrites
    assert rewrites(cont, "s.k") >= 1
    log_text = open(os.path.join(dbfarm, "cont", "wlr.log")).read()
    assert "after collapse" in log_text


def test_unkeyed_run_with_added_columns_lands_as_one_segment(spark, master, dbfarm):
    u = master.table_path("s.u")
    sql(spark, f"CREATE TABLE delta.`{u}` (a INT, b STRING) USING delta")
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (1, 'x'), (1, 'x'), (2, 'y'), (3, 'z')")
    rep = wlr.replicate("m", replica="g", dbfarm=dbfarm, follow=False)
    first = rep.tick() + 1
    sql(spark, f"DELETE FROM delta.`{u}` WHERE a = 3")  # images from before the ALTER
    sql(spark, f"ALTER TABLE delta.`{u}` ADD COLUMNS (c INT, d STRING)")
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (4, 'w', 7, 'new'), (1, 'x', NULL, NULL)")
    sql(spark, f"UPDATE delta.`{u}` SET c = 5 WHERE a = 2")  # a row from before, given a value
    sql(spark, f"DELETE FROM delta.`{u}` WHERE a = 1 AND c IS NULL AND b = 'x' AND d IS NULL")
    last = wlc.flush()
    rep.replicate(follow=False)
    serial = wlr.replicate("m", replica="s", dbfarm=dbfarm, collapse=False)
    assert rows(rep.table("s.u")) == rows(serial.table("s.u")) == master_rows(spark, u)
    assert rep.table("s.u").columns == ["a", "b", "c", "d"]
    assert replay_tags(rep, "s.u")[-1] == f"{first}-{last}"  # one segment, the ALTER inside it


def test_a_transaction_that_adds_columns_with_its_rows_lands_in_one_commit(spark, master, dbfarm, spark_only):
    """An append that adds a nullable column (mergeSchema) is no barrier: replayed alone (one
    commit a transaction, or the one transaction of a segment left after a crash) Spark lands it
    in one commit that adds the column, as inside a run (delta-rs adds the columns in a commit
    of their own first)."""
    k = master.table_path("s.k")
    sql(spark, f"CREATE TABLE delta.`{k}` (id INT, v STRING) USING delta")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 'a')")
    rep = wlr.replicate("m", replica="s", dbfarm=dbfarm, follow=False, collapse=False)
    before = len(replay_tags(rep, "s.k"))
    more = spark.createDataFrame([(2, "b", 7)], "id INT, v STRING, extra INT")
    more.write.format("delta").mode("append").option("mergeSchema", "true").save(k)
    txn = wlc.flush()
    rep.replicate(follow=False, collapse=False)
    assert rep.tick() == txn
    assert rows(rep.table("s.k")) == master_rows(spark, k)
    assert rep.table("s.k").columns == ["id", "v", "extra"]
    assert replay_tags(rep, "s.k")[before:] == [str(txn)]  # one commit, with the transaction's tag


def test_reads_stay_consistent_while_tables_land(spark, master, dbfarm):
    a, b = master.table_path("s.a"), master.table_path("s.b")
    sql(spark, f"CREATE TABLE delta.`{a}` (i INT) USING delta")
    sql(spark, f"CREATE TABLE delta.`{b}` (i INT) USING delta")
    rep = wlr.replicate("m", replica="view", dbfarm=dbfarm, follow=False)
    base = rep.tick()
    for i in range(1, 4):  # a gets i, then b gets i: a pair is (i, i) or (i, i - 1) on the master
        sql(spark, f"INSERT INTO delta.`{a}` VALUES ({i})")
        sql(spark, f"INSERT INTO delta.`{b}` VALUES ({i})")
    # damage b's transaction for i = 2: b stops at i = 1 while a's segment can land to i = 3
    b_bad = base + 4
    part = glob.glob(os.path.join(master.logs, "m_*", "rows", "s.b", "*", "*.parquet"))
    version_dirs = sorted({os.path.dirname(p) for p in part}, key=lambda d: int(d.rsplit("=", 1)[1]))
    damaged = glob.glob(os.path.join(version_dirs[1], "*.parquet"))[0]
    original = open(damaged, "rb").read()
    with open(damaged, "r+b") as fh:
        fh.truncate(10)

    seen, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            tables = rep.tables()
            seen.append((len(tables["s.a"].collect()), len(tables["s.b"].collect())))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        with pytest.raises(wlr.ReplicationError) as err:
            rep.replicate(follow=False)
    finally:
        stop.set()
        thread.join()
    assert err.value.txn == b_bad and rep.tick() == b_bad - 1
    ahead = spark.read.format("delta").load(rep.path_of("s.a")).count()
    pair = (rep.table("s.a").count(), rep.table("s.b").count())
    assert pair in {(0, 0), (1, 1), (2, 1)}, pair  # never a = 3 beside b = 1
    assert ahead in (pair[0], 3)
    assert seen and all(x in {(0, 0), (1, 1), (2, 1), (2, 2), (3, 2), (3, 3)} for x in seen), seen
    assert all(a_ - b_ in (0, 1) for a_, b_ in seen)
    assert rep.versions().keys() == {"s.a", "s.b"}

    with open(damaged, "wb") as fh:  # the batch restored: the retry lands everything
        fh.write(original)
    rep.replicate(follow=False)
    assert rep.view_tick() == rep.tick() == wlc.tick()
    assert (rep.table("s.a").count(), rep.table("s.b").count()) == (3, 3)
    # a plain Spark reader gets the same view through versionAsOf
    at = rep.versions()["s.b"]
    assert spark.read.format("delta").option("versionAsOf", at).load(rep.path_of("s.b")).count() == 3


def test_a_segment_lands_by_merge_when_rewrites_are_off(spark, master, dbfarm, merge_only):
    k, u = keyed_and_unkeyed(spark, master)
    random_mix(spark, k, u, 12, seed=3)
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rows(rep.table("s.k")) == master_rows(spark, k) and rows(rep.table("s.u")) == master_rows(spark, u)
    assert rewrites(rep, "s.k") == 0 and any(i["operation"] == "MERGE" for i in replay_commits(rep, "s.k"))


@pytest.mark.parametrize("how", ["arrow", "delta-rs merge", "rewrite", "merge"])
def test_divergence_is_detected_in_a_segment(spark, master, dbfarm, how, request):
    """Keys missing on the replica fail the segment's whole rewrite in the process (a small table,
    the default), its delta-rs MERGE (``replica.rewrite_bytes: 0``), its Spark whole rewrite
    (``replica.deltars_bytes: 0``) and its Spark MERGE (both 0) alike."""
    fixture = {"delta-rs merge": "deltars_merge", "rewrite": "spark_only", "merge": "merge_only"}.get(how)
    if fixture:
        request.getfixturevalue(fixture)
    k, u = master.table_path("s.k"), master.table_path("s.u")
    sql(spark, f"CREATE TABLE delta.`{k}` (id INT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"CREATE TABLE delta.`{u}` (a INT) USING delta")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 0), (2, 0), (3, 0)")
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (1), (2), (2)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    # rows removed behind replay's back, in commits tagged as replay's: only the divergence check can see it
    spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", f"wlr:{master.config.dbid}:{rep.tick()}:part")
    try:
        spark.sql(f"DELETE FROM delta.`{rep.path_of('s.k')}` WHERE id = 2")
        spark.sql(f"DELETE FROM delta.`{rep.path_of('s.u')}` WHERE a = 2")
    finally:
        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
    spark.sql(f"INSERT INTO delta.`{k}` VALUES (4, 0)")
    upd = sql(spark, f"UPDATE delta.`{k}` SET v = 1 WHERE id = 2")  # key 2 must be on the replica
    spark.sql(f"INSERT INTO delta.`{u}` VALUES (5)")
    dele = sql(spark, f"DELETE FROM delta.`{u}` WHERE a = 2")  # two rows (2) must be there
    with pytest.raises(wlr.ReplicationError) as err:
        rep.replicate(follow=False)
    assert (err.value.txn, err.value.table) == (upd, "s.k") and "not on the replica" in err.value.cause
    # the insert before it landed, nothing of the update did
    assert rows(spark.read.format("delta").load(rep.path_of("s.k"))) == [(1, 0), (3, 0), (4, 0)]
    assert wlr.Replica("m", "r", dbfarm).accept() == upd
    with pytest.raises(wlr.ReplicationError) as err:
        rep.replicate(follow=False)
    assert (err.value.txn, err.value.table) == (dele, "s.u") and "not on the replica" in err.value.cause
    rep.accept()
    rep.replicate(follow=False)
    assert rows(rep.table("s.k")) == [(1, 0), (3, 0), (4, 0)] and rows(rep.table("s.u")) == [(1,), (5,)]


def test_a_merge_reads_only_the_files_that_may_hold_its_keys(spark, master, dbfarm, merge_only, tmp_path, monkeypatch):
    """A MERGE's ON condition carries the range of the segment's keys (NULL keys too), so Delta
    never opens the replica's files that cannot hold them (here they are moved away while it
    runs: reading one would fail); what lands is the same as on the master."""
    from pyspark.sql import functions as F

    import wlr.apply

    monkeypatch.setattr(wlr.apply, "SKIP_FILES_FROM", 0)  # these tables are small: skip files anyway

    k, c = master.table_path("s.k"), master.table_path("s.c")
    sql(spark, f"CREATE TABLE delta.`{k}` (id BIGINT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"CREATE TABLE delta.`{c}` (code STRING, n INT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'code,n')")
    rep = None
    for part in range(4):  # four appends on the replica: files, each of one range of keys
        ids = ", ".join(f"({i}, 0)" for i in range(part * 100, part * 100 + 100, 2))
        sql(spark, f"INSERT INTO delta.`{k}` VALUES {ids}")
        sql(spark, f"INSERT INTO delta.`{c}` VALUES ('{'abcd'[part]}', 1, 0), (NULL, {part}, 0)")
        rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    sql(spark, f"UPDATE delta.`{k}` SET v = 1 WHERE id IN (4, 10)")
    sql(spark, f"DELETE FROM delta.`{k}` WHERE id = 6")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (7, 2)")
    sql(spark, f"UPDATE delta.`{c}` SET v = 1 WHERE code = 'b' OR (code IS NULL AND n = 2)")
    files = (
        spark.read.format("delta")
        .load(rep.path_of("s.k"))
        .groupBy(F.col("_metadata.file_path").alias("f"))
        .agg(F.min("id").alias("lo"))
        .collect()
    )
    far = [local(r["f"]) for r in files if r["lo"] >= 100]  # the keys change within 4..10
    assert len(far) >= 3
    for i, f in enumerate(far):
        os.rename(f, tmp_path / f"far{i}")
    try:
        rep.replicate(follow=False)
    finally:
        for i, f in enumerate(far):
            os.rename(tmp_path / f"far{i}", f)
    assert rows(rep.table("s.k")) == master_rows(spark, k) and rows(rep.table("s.c")) == master_rows(spark, c)
    assert replay_commits(rep, "s.k")[-1]["operation"] == "MERGE"
    assert replay_commits(rep, "s.c")[-1]["operation"] == "MERGE"


def test_a_table_with_deletion_vectors_is_merged_with_vectors_not_rewritten(spark, master, dbfarm):
    """Where the master marks rows deleted in a deletion vector, the replica does too: a small keyed
    table that has them (a rewrite's size) takes a segment by a MERGE that adds vectors and writes
    only the changed rows, not by writing every file again."""
    t = master.table_path("s.dv")
    spark.sql(
        f"CREATE TABLE delta.`{t}` (k INT, v STRING) USING delta "
        "TBLPROPERTIES ('wlc.key' = 'k', 'delta.enableDeletionVectors' = 'true')"
    )
    sql(spark, f"INSERT INTO delta.`{t}` SELECT id, CAST(id AS STRING) FROM range(200)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    sql(spark, f"DELETE FROM delta.`{t}` WHERE k % 50 = 0")
    sql(spark, f"UPDATE delta.`{t}` SET v = 'u' WHERE k = 7")
    rep.replicate(follow=False)
    assert rows(rep.table("s.dv")) == master_rows(spark, t)
    last = replay_commits(rep, "s.dv")[-1]
    assert rewrites(rep, "s.dv") == 0 and last["operation"] == "MERGE", last
    assert int(last["operationMetrics"]["numTargetDeletionVectorsAdded"]) > 0, last["operationMetrics"]
    assert int(last["operationMetrics"]["numTargetFilesRemoved"]) == 0, last["operationMetrics"]
