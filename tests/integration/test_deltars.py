"""Small segments land in the replaying process (:mod:`wlr.apply`'s Arrow engine): appends and
rewrites committed by replay itself, MERGEs and added columns through delta-rs, with the same
rows, replay tags, idempotent markers and change feed as Spark's commits, and Spark wherever the
table cannot be written here exactly."""

import contextlib
import glob
import os
import random

import pytest
import yaml

import wlc
import wlr

from .helpers import master_rows, replay_log, rows, sql

pytestmark = pytest.mark.spark


ARROW = "wlr/"  # the engineInfo of a commit replay wrote itself


@contextlib.contextmanager
def replica_settings(dbfarm, **replica):
    """The settings of the test run with ``replica`` set (e.g. ``rewrite_bytes=1``: every keyed
    segment of a table that holds rows is a MERGE), for what runs inside."""
    from wlcore.settings import reload

    cfg = yaml.safe_load(open(os.environ["WLC_CONFIG"])) or {}
    cfg.setdefault("replica", {}).update(replica)
    path = os.path.join(dbfarm, "replica-settings.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    os.environ["WLC_CONFIG"], old = path, os.environ["WLC_CONFIG"]
    reload()
    try:
        yield
    finally:
        os.environ["WLC_CONFIG"] = old
        reload()


def folder(rep, table) -> str:
    """The replica table's local folder."""
    return os.path.join(rep.path, *table.split("."))


def same(a: list, b: list) -> bool:
    """Rows equal, NaN equal to NaN (their text forms)."""
    return [repr(r) for r in a] == [repr(r) for r in b]


def mix(spark, k, u, n, seed):
    """``n`` random DML statements on keyed ``k`` (the columns of the test below) and unkeyed
    ``u``: chains on hot keys, key moves, MERGEs, inserts, updates and deletes of duplicate rows;
    some flushed alone."""
    rnd = random.Random(seed)
    for i in range(n):
        key = rnd.choice([1, 2, 3, 4, 5])
        stmt = {
            "ins": f"INSERT INTO delta.`{k}` VALUES ({100 + i}, {i}, 'n{i}', current_timestamp(), {i}.25, "
            f"date'2000-01-01' + {i}, X'0{i % 10}', {i} / 3.0)",
            "upd": f"UPDATE delta.`{k}` SET v = v + 1, d = d * 2 WHERE id = {key}",
            "del": f"DELETE FROM delta.`{k}` WHERE id = {key}",
            "keymove": f"UPDATE delta.`{k}` SET id = id + 1000 WHERE id = {key}",
            "merge": f"MERGE INTO delta.`{k}` t USING (SELECT {key} AS id, {i} AS v) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)",
            "u_ins": f"INSERT INTO delta.`{u}` VALUES ({key}, 'x'), ({key}, 'x')",
            "u_upd": f"UPDATE delta.`{u}` SET b = concat(b, '{i}') WHERE a = {key}",
            "u_del": f"DELETE FROM delta.`{u}` WHERE a = {key} AND b = 'x'",
        }[rnd.choice(["ins", "upd", "upd", "del", "keymove", "merge", "u_ins", "u_ins", "u_upd", "u_del"])]
        spark.sql(stmt)
        if rnd.random() < 0.4:
            wlc.flush()
    wlc.flush()


def assert_checksum(spark, path: str) -> None:
    """The last version of the replica table at ``path`` (a delta-rs commit) has Delta's version
    checksum, equal to the table Spark rebuilds from its log (files, size, definition), and Spark
    loads that version without a job (its protocol and metadata read from the checksum)."""
    import json

    from wlcore.deltalog import TableMeta, list_versions, metadata_at
    from wlcore.storage import Storage

    storage = Storage.of(path)
    version = list_versions(storage, path)[-1]
    crc = json.loads(open(os.path.join(path, "_delta_log", f"{version:020d}.crc")).read())
    live = spark.read.format("delta").option("versionAsOf", version).load(path).inputFiles()
    sizes = sum(os.path.getsize(f.removeprefix("file:").removeprefix("//")) for f in live)
    assert (crc["numFiles"], crc["tableSizeBytes"]) == (len(live), sizes), (crc, live)
    assert TableMeta.from_action(crc["metadata"]) == metadata_at(storage, path, version).with_features(None)
    sc = spark.sparkContext
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    jobs = sc._jsc.sc().dagScheduler().numTotalJobs()
    spark.read.format("delta").option("versionAsOf", version).load(path).schema  # noqa: B018 (a snapshot load)
    assert sc._jsc.sc().dagScheduler().numTotalJobs() == jobs


def data_commits(rep, table) -> list[dict]:
    """The replay commits (:func:`helpers.replay_log`) that land rows (not the table's creation)."""
    return [c for c in replay_log(rep, table) if c["info"]["operation"] not in ("CREATE TABLE", "SET TBLPROPERTIES")]


def test_small_segments_land_in_the_process_as_spark_would(spark, master, dbfarm):
    """Keyed runs of inserts, updates, deletes, key moves and MERGEs (types Spark writes in its own
    Parquet ways: INT96 timestamps, decimals, dates, binary, NaN and -0.0)
    and runs on an unkeyed table with duplicate rows (appends, or whole rewrites with multiset
    semantics) land in the process at every target, equal to the master and to serial replay:
    appends and rewrites committed by replay itself, each with the replay tag and Delta's
    idempotent marker; Spark reads a rewrite's change feed (its removed and added files), loads its
    version from Delta's version checksum, and its data skipping over the statistics written here
    finds every row the master's finds (NaN, microseconds above the millisecond bound). Where the
    keyed table takes a MERGE (``replica.rewrite_bytes`` below its size), its NaN keeps the MERGE on
    Spark: delta-rs's statistics leave NaN out."""
    k, u = master.table_path("s.k"), master.table_path("s.u")
    sql(
        spark,
        f"CREATE TABLE delta.`{k}` (id BIGINT, v INT, note STRING, ts TIMESTAMP, d DECIMAL(12, 3), day DATE, "
        "raw BINARY, x DOUBLE) USING delta TBLPROPERTIES ('wlc.key' = 'id')",
    )
    sql(spark, f"CREATE TABLE delta.`{u}` (a INT, b STRING) USING delta")
    sql(
        spark,
        f"INSERT INTO delta.`{k}` VALUES (1, 0, 'a', timestamp'1900-03-01 12:00:00.123456', 1.5, date'1500-01-01', "
        "X'00FF', double('NaN')), (2, 0, 'b', NULL, NULL, NULL, NULL, -0.0), "
        "(3, 0, 'c', timestamp'2024-02-29 23:59:59.999999', 12345678.901, date'2024-02-29', X'', 1e300)",
    )
    start = wlc.tick()
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (1, 'x'), (1, 'x'), (2, 'y')")
    mix(spark, k, u, 16, seed=11)
    sql(spark, f"INSERT INTO delta.`{u}` VALUES (3, 'z')")
    end = wlc.tick()
    serial = wlr.Replica("m", replica="serial", dbfarm=dbfarm)
    for until in (start + 3, (start + end) // 2, end):
        g = wlr.replicate("m", until=until, replica=f"g{until}", dbfarm=dbfarm)
        serial.replicate(until=until, follow=False, collapse=False)
        assert same(rows(g.table("s.k")), rows(serial.table("s.k"))), until
    final = wlr.Replica("m", f"g{end}", dbfarm)
    assert same(rows(final.table("s.k")), master_rows(spark, k))
    assert rows(final.table("s.u")) == master_rows(spark, u)
    landed = data_commits(final, "s.k")
    assert landed and all(c["info"]["engineInfo"].startswith(ARROW) for c in landed), landed
    for c in landed:
        last = int(c["info"]["userMetadata"].split(":")[2].split("-")[-1])
        assert c["txn"]["appId"] == f"wlc:{master.config.dbid}" and c["txn"]["version"] == last
    unkeyed = data_commits(final, "s.u")
    assert all(c["info"]["engineInfo"].startswith(ARROW) for c in unkeyed), unkeyed
    assert any(c["info"]["operationParameters"].get("mode") == "Overwrite" for c in unkeyed), unkeyed
    for table in ("s.k", "s.u"):
        assert_checksum(spark, folder(final, table))
    assert_change_feed(spark, folder(final, "s.k"), "WRITE")
    assert_skipping_keeps_rows(spark, k, folder(final, "s.k"), ["ts", "d", "day", "note", "x"])
    with replica_settings(dbfarm, rewrite_bytes=1):  # every keyed segment on a table with rows: a MERGE
        merged = wlr.replicate("m", until=start + 3, replica="merged", dbfarm=dbfarm)
        merged.replicate(until=end, follow=False)
    assert same(rows(merged.table("s.k")), master_rows(spark, k))
    # s.k holds a NaN, which delta-rs's file statistics leave out: its MERGEs are Spark's
    tagged = [c for c in data_commits(merged, "s.k") if c["info"]["operation"] == "MERGE"]
    assert tagged and all(c["info"]["engineInfo"].startswith("Apache-Spark") for c in tagged), tagged
    assert_skipping_keeps_rows(spark, k, folder(merged, "s.k"), ["ts", "d", "day", "note", "x"])


def assert_skipping_keeps_rows(spark, master_path: str, path: str, cols: list[str]) -> None:
    """Spark's data skipping over the replica table's file statistics finds the rows the master
    finds, for ``col = v`` and ``col >= v`` of each value the master holds in ``cols`` (the
    greatest instant has microseconds; NaN is above every number)."""
    from functools import reduce

    from pyspark.sql import functions as F

    values = spark.read.format("delta").load(master_path).select(*cols).collect()
    preds = [F.isnan("x")] if "x" in cols else []
    for c in cols:
        for v in {r[c] for r in values if r[c] is not None}:
            preds += [F.col(c) == F.lit(v), F.col(c) >= F.lit(v)]

    def counts(p: str) -> list:
        df = spark.read.format("delta").load(p)
        parts = [
            df.filter(q).agg(F.count(F.lit(1)).alias("n")).select(F.lit(i).alias("i"), "n") for i, q in enumerate(preds)
        ]
        return sorted(tuple(r) for r in reduce(lambda a, b: a.unionAll(b), parts).collect())

    got, want = counts(path), counts(master_path)
    assert preds and got == want, [(str(preds[i]), n, m) for (i, n), (_j, m) in zip(got, want) if n != m]


def assert_change_feed(spark, path: str, operation: str) -> None:
    """Spark reads the replica table's change feed at its first commit of ``operation``."""
    log_dir = os.path.join(path, "_delta_log")
    versions = [
        v
        for v in range(len(glob.glob(f"{log_dir}/*.json")))
        if f'"operation":"{operation}"' in open(f"{log_dir}/{v:020d}.json").read()
    ]
    assert versions, os.listdir(log_dir)
    feed = spark.sql(f"SELECT * FROM table_changes_by_path('{path}', {versions[0]}, {versions[0]})")
    assert feed.count() >= 1
    kinds = {r[0] for r in feed.select("_change_type").collect()}
    assert kinds <= {"insert", "delete", "update_preimage", "update_postimage"}


def test_a_small_keyed_table_takes_a_segment_as_one_overwrite(spark, master, dbfarm):
    """A keyed segment on a small table that holds rows (at most ``replica.rewrite_bytes``) lands
    as one overwrite committed by replay itself: the rows of untouched keys, then each changed key's state
    after the segment (updates, deletes, key moves, inserts), equal to the master, with the replay
    tag, Delta's idempotent marker and Delta's version checksum; a bigger table gets a delta-rs
    MERGE, with the change-data files Spark reads as the replica's change feed."""
    k = master.table_path("s.k")
    sql(
        spark,
        f"CREATE TABLE delta.`{k}` (id BIGINT, v INT, d DECIMAL(10, 2), day DATE) USING delta "
        "TBLPROPERTIES ('wlc.key' = 'id')",
    )
    sql(spark, f"INSERT INTO delta.`{k}` SELECT id, 0, id / 4, date'2024-01-01' + CAST(id AS INT) FROM range(1, 40)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    before = len(data_commits(rep, "s.k"))
    sql(spark, f"UPDATE delta.`{k}` SET v = v + 1 WHERE id < 5")
    sql(spark, f"DELETE FROM delta.`{k}` WHERE id = 7")
    sql(spark, f"UPDATE delta.`{k}` SET id = id + 100 WHERE id = 9")  # a key move
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (200, 2, 2.5, NULL), (7, 7, 7.7, date'2000-01-01')")
    sql(spark, f"UPDATE delta.`{k}` SET v = v * 10 WHERE id IN (1, 200)")
    wlc.flush()
    rep.replicate(follow=False)
    assert rows(rep.table("s.k")) == master_rows(spark, k)
    landed = data_commits(rep, "s.k")[before:]
    assert len(landed) == 1, landed
    info = landed[0]["info"]
    assert info["engineInfo"].startswith(ARROW) and info["operationParameters"]["mode"] == "Overwrite", info
    txn = landed[0]["txn"]
    assert (txn["appId"], txn["version"]) == (f"wlc:{master.config.dbid}", wlc.tick()), txn
    assert_checksum(spark, folder(rep, "s.k"))
    rep.close()
    # the checksum is a cache written without fsync: one a crash left empty is read as none, by
    # Spark (the version's rows from its log) and by the next commit (its own written from the log)
    from wlcore.deltalog import list_versions
    from wlcore.storage import Storage

    path = folder(rep, "s.k")
    cut = list_versions(Storage.of(path), path)[-1]
    open(os.path.join(path, "_delta_log", f"{cut:020d}.crc"), "w").close()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert rows(spark.read.format("delta").option("versionAsOf", cut).load(path)) == master_rows(spark, k)
    sql(spark, f"UPDATE delta.`{k}` SET v = 5 WHERE id = 3")
    wlc.flush()
    rep = wlr.Replica("m", "r", dbfarm)
    rep.replicate(follow=False)
    assert rows(rep.table("s.k")) == master_rows(spark, k)
    assert_checksum(spark, path)
    rep.close()
    with replica_settings(dbfarm, rewrite_bytes=1):  # every table is bigger: a MERGE
        sql(spark, f"UPDATE delta.`{k}` SET v = -1 WHERE id = 2")
        wlc.flush()
        rep = wlr.Replica("m", "r", dbfarm)
        rep.replicate(follow=False)
    assert rows(rep.table("s.k")) == master_rows(spark, k)
    merged = data_commits(rep, "s.k")[-1]
    assert merged["info"]["operation"] == "MERGE" and merged["info"]["engineInfo"].startswith("delta-rs"), merged
    assert merged["txn"]["version"] == wlc.tick() and merged["cdc"] >= 1  # the change feed is on in the master
    assert_change_feed(spark, path, "MERGE")
    assert_checksum(spark, path)
    assert_skipping_keeps_rows(spark, k, path, ["v", "d", "day"])


def test_a_table_that_cannot_be_written_here_lands_by_spark(spark, master, dbfarm):
    """A CHECK constraint (delta-rs would evaluate Spark SQL in its own dialect), a nested column
    and a NULL key each keep a segment with updates on Spark, which lands it exactly; so does a
    year-1500 instant in a file a delta-rs MERGE would rewrite (Spark writes INT96, which delta-rs
    reads through nanoseconds), while a whole rewrite, which reads the table's files here in
    microseconds, lands in the process and keeps the instant."""
    c, n, z, t = (master.table_path(f"s.{t}") for t in ("c", "n", "z", "t"))
    sql(spark, f"CREATE TABLE delta.`{t}` (id INT, ts TIMESTAMP) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"CREATE TABLE delta.`{c}` (id INT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"ALTER TABLE delta.`{c}` ADD CONSTRAINT pos CHECK (v >= 0)")
    sql(spark, f"CREATE TABLE delta.`{n}` (id INT, s STRUCT<a: INT>) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"CREATE TABLE delta.`{z}` (id INT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm)
    sql(spark, f"INSERT INTO delta.`{c}` VALUES (1, 1), (2, 2)")
    sql(spark, f"INSERT INTO delta.`{n}` VALUES (1, named_struct('a', 1))")
    sql(spark, f"INSERT INTO delta.`{z}` VALUES (1, 1), (NULL, 2)")
    sql(spark, f"UPDATE delta.`{c}` SET v = v + 1")
    sql(spark, f"UPDATE delta.`{n}` SET s = named_struct('a', 2)")
    sql(spark, f"UPDATE delta.`{z}` SET v = v + 1")
    sql(
        spark,
        f"INSERT INTO delta.`{t}` SELECT /*+ COALESCE(1) */ * FROM VALUES "
        "(1, timestamp'1500-03-01 12:00:00.123456'), (2, NULL) AS v(id, ts)",
    )
    wlc.flush()
    rep.replicate(follow=False)  # the year 1500 is now in a replica file
    sql(spark, f"UPDATE delta.`{t}` SET ts = timestamp'2024-01-01 00:00:00' WHERE id = 2")
    wlc.flush()
    rep.close()
    with replica_settings(dbfarm, rewrite_bytes=1):  # a MERGE: it would rewrite the year-1500 file
        rep = wlr.Replica("m", "r", dbfarm)
        rep.replicate(follow=False)
        rep.close()
    rep = wlr.Replica("m", "r", dbfarm)
    for name, path in (("s.c", c), ("s.n", n), ("s.z", z), ("s.t", t)):
        assert rows(rep.table(name)) == master_rows(spark, path), name
        last = data_commits(rep, name)[-1]  # the UPDATE's (an insert-only run of s.z may land here)
        assert last["info"]["engineInfo"].startswith("Apache-Spark"), (name, last)
    sql(spark, f"UPDATE delta.`{t}` SET ts = timestamp'2025-01-01 00:00:00' WHERE id = 2")
    wlc.flush()
    rep.replicate(follow=False)  # a whole rewrite: here
    assert rows(rep.table("s.t")) == master_rows(spark, t)
    assert data_commits(rep, "s.t")[-1]["info"]["engineInfo"].startswith(ARROW)


def test_a_segment_that_adds_columns_lands_through_delta_rs(spark, master, dbfarm):
    """ALTERs that add nullable columns within a segment (one between change rows, one after the
    last) land through delta-rs: one part commit adds the columns in the master's order, one MERGE
    lands the rows; the schema equals the master's, and rows written before an ALTER read NULL in
    its column, as when Spark's replay MERGE evolves the schema."""
    k = master.table_path("s.k")
    sql(spark, f"CREATE TABLE delta.`{k}` (id BIGINT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 1), (2, 2), (3, 3)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    before = len(data_commits(rep, "s.k"))
    sql(spark, f"UPDATE delta.`{k}` SET v = 10 WHERE id = 1")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (4, 4)")
    sql(spark, f"ALTER TABLE delta.`{k}` ADD COLUMNS (note STRING, at DATE)")
    sql(spark, f"UPDATE delta.`{k}` SET note = 'n', at = date'2024-01-01' WHERE id = 2")
    sql(spark, f"DELETE FROM delta.`{k}` WHERE id = 3")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (5, 5, 'new', NULL)")
    sql(spark, f"ALTER TABLE delta.`{k}` ADD COLUMNS (late DOUBLE)")
    wlc.flush()
    rep.replicate(follow=False)
    assert rows(rep.table("s.k")) == master_rows(spark, k)
    replica_schema = spark.read.format("delta").load(folder(rep, "s.k")).schema.json()
    assert replica_schema == spark.read.format("delta").load(k).schema.json()
    landed = data_commits(rep, "s.k")[before:]
    assert [c["info"]["engineInfo"].split(":")[0] for c in landed] == ["delta-rs", "delta-rs"], landed
    added, merged = landed
    assert added["info"]["userMetadata"].endswith(":part") and added["txn"] is None, added
    assert merged["info"]["operation"] == "MERGE" and merged["txn"]["version"] == wlc.tick(), merged
    assert_checksum(spark, folder(rep, "s.k"))  # its definition from the part commit's metaData


def test_a_replica_whose_segments_land_in_the_process_starts_no_spark(spark, master, dbfarm):
    """A process that replays only segments landed in the process (two tables at once, so in worker
    threads) starts no Spark session: the JVM of ``wlr replicate --follow`` stays idle while the
    master writes small transactions (Spark's job descriptions are set only where a job runs)."""
    import subprocess
    import sys

    a, b = master.table_path("s.a"), master.table_path("s.b")
    for path in (a, b):
        sql(spark, f"CREATE TABLE delta.`{path}` (id BIGINT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
        sql(spark, f"INSERT INTO delta.`{path}` VALUES (1, 1), (2, 2)")
    wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    for path in (a, b):
        sql(spark, f"UPDATE delta.`{path}` SET v = v + 10 WHERE id = 1")
        sql(spark, f"INSERT INTO delta.`{path}` VALUES (3, 3)")
    wlc.flush()
    code = (
        "import wlr\nfrom pyspark import SparkContext\n"
        f"rep = wlr.Replica('m', 'r', {dbfarm!r}); rep.replicate(follow=False)\n"
        "print(rep.status()['tick'], SparkContext._active_spark_context is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-2:] == [str(wlc.tick()), "True"], out.stdout + out.stderr[-3000:]
    rep = wlr.Replica("m", "r", dbfarm)
    for name, path in (("s.a", a), ("s.b", b)):
        assert rows(rep.table(name)) == master_rows(spark, path), name
        assert data_commits(rep, name)[-1]["info"]["engineInfo"].startswith(ARROW), name


def test_commits_in_the_process_checkpoint_the_replica_table_at_sparks_interval(spark, master, dbfarm):
    """A replica table written in the process segment after segment gets a checkpoint each time its
    versions pass a multiple of ten (Delta Spark's ``delta.checkpointInterval``; delta-rs alone
    writes one every 100), written by delta-rs and holding the idempotent ``txn`` marker replay reads; Spark reads the
    table through it, equal to the master, and replay goes on after it."""
    import pyarrow.parquet as pq

    k = master.table_path("s.k")
    sql(spark, f"CREATE TABLE delta.`{k}` (id BIGINT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 0), (2, 0)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    log_dir = os.path.join(folder(rep, "s.k"), "_delta_log")
    for i in range(12):
        sql(spark, f"UPDATE delta.`{k}` SET v = {i + 1} WHERE id = {1 + i % 2}")
        wlc.flush()
        rep.replicate(follow=False)
    checkpoints = sorted(glob.glob(f"{log_dir}/*.checkpoint.parquet"))
    assert checkpoints and int(os.path.basename(checkpoints[-1]).split(".")[0]) % 10 == 0, os.listdir(log_dir)
    markers = [t for t in pq.read_table(checkpoints[-1]).column("txn").to_pylist() if t]
    assert [t["appId"] for t in markers] == [f"wlc:{master.config.dbid}"], markers
    assert rows(rep.table("s.k")) == master_rows(spark, k)
    assert all(c["info"]["engineInfo"].startswith(ARROW) for c in data_commits(rep, "s.k")[-12:])
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (3, 3)")
    wlc.flush()
    rep.replicate(follow=False)
    assert rows(rep.table("s.k")) == master_rows(spark, k)


def test_a_table_made_again_between_segments_in_the_process_is_read_afresh(spark, master, dbfarm):
    """One replica object (its tables' states held between segments) follows a table that
    the master replaces and then drops and makes again under the same name: each later segment
    lands on the table as it now is, equal to the master."""
    import shutil

    k = master.table_path("s.k")
    props = "'wlc.key' = 'id', 'delta.enableChangeDataFeed' = 'true'"
    make = f"TABLE delta.`{k}` (id BIGINT, v INT) USING delta TBLPROPERTIES ({props})"
    sql(spark, f"CREATE {make}")
    sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 0), (2, 0)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    for step in ("update", "replace", "update", "drop", "update"):
        if step == "replace":
            sql(spark, f"CREATE OR REPLACE {make}")
            sql(spark, f"INSERT INTO delta.`{k}` VALUES (6, 6), (7, 7)")
        elif step == "drop":
            wlc.flush()
            rep.replicate(follow=False)
            shutil.rmtree(k.removeprefix("file://"))
            wlc.flush()
            rep.replicate(follow=False)
            sql(spark, f"CREATE {make}")
            sql(spark, f"INSERT INTO delta.`{k}` VALUES (1, 9), (8, 8), (9, 9)")
        sql(spark, f"UPDATE delta.`{k}` SET v = v + 1 WHERE id = 1")
        wlc.flush()
        rep.replicate(follow=False)
        assert rows(rep.table("s.k")) == master_rows(spark, k), step
        assert data_commits(rep, "s.k")[-1]["info"]["engineInfo"].startswith(ARROW), step
