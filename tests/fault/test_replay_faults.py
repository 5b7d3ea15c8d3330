"""Replay applies each transaction exactly once, retries a fixed cause, and names batch-level
failures by their batch (which accept() then refuses)."""

import os
import shutil

import pytest

import wlc
import wlr
from wlcore.deltalog import list_versions, metadata_at
from wlcore.storage import Storage

from ..integration.helpers import master_rows, rows, sql
from .helpers import final_txns, killed_by_sigkill, run_module, tree

pytestmark = pytest.mark.spark


def _replicate_until_crash(dbfarm: str, point: str, *extra: str) -> None:
    proc = run_module("wlr", "replicate", dbfarm, "m", "r", *extra, WLC_CRASH_AT=point)
    assert killed_by_sigkill(proc), (proc.returncode, proc.stdout[-500:], proc.stderr[-3000:])


def test_create_replayed_after_a_crash_is_committed_once(spark, master, dbfarm):
    """Replay killed between a CREATE's final commit and saving wlr.config."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # 0
    sql(spark, f"ALTER TABLE delta.`{p}` ADD CONSTRAINT pos CHECK (i > 0)")  # 1
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1), (2)")  # 2
    _replicate_until_crash(dbfarm, "replay.applied")  # dies right after txn 0's final commit
    cfg = open(os.path.join(dbfarm, "r", "wlr.config")).read()
    assert "tick=-1" in cfg  # wlr.config does not know that txn 0 was applied
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rep.tick() == 2 and rows(rep.table("s.t")) == [(1,), (2,)]
    assert final_txns(os.path.join(dbfarm, "r", "s", "t"), master.config.dbid) == [0, 1, 2]


@pytest.mark.parametrize(
    "kind, values, point",
    [
        ("string", [(1, "ten"), (3, "thirty")], "replay.image_overwritten"),
        # the shape: a type Delta would widen, but type widening is off (an overwrite did it)
        ("bigint", [(1, 5000000000), (3, 30)], "replay.image_reshaped"),
    ],
)
def test_crash_inside_a_reshape_keeps_the_constraints(spark, master, dbfarm, kind, values, point):
    """The final commit of a reshaping image is its last; a crash before it (after the REPLACE,
    or after the rows) loses nothing, and the constraint and property come back."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (id INT, v INT) USING delta TBLPROPERTIES ('team' = 'ops')")  # 0
    sql(spark, f"ALTER TABLE delta.`{p}` ADD CONSTRAINT pos CHECK (id > 0)")  # 1
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1, 10), (2, 20)")  # 2
    (
        spark.createDataFrame(values, f"id int, v {kind}")
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(p)
    )
    last = wlc.flush()  # 3: v INT -> another type, no ALTER form
    assert last == 3
    mpath = os.path.join(dbfarm, "m", "s", "t")
    master_meta = metadata_at(Storage.of(mpath), mpath, list_versions(Storage.of(mpath), mpath)[-1])
    assert master_meta.constraints == {"pos": "id > 0"}  # the master kept its constraint
    _replicate_until_crash(dbfarm, point)
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rep.tick() == 3 and rows(rep.table("s.t")) == master_rows(spark, p) == values
    rpath = os.path.join(dbfarm, "r", "s", "t")
    rstore = Storage.of(rpath)
    meta = metadata_at(rstore, rpath, list_versions(rstore, rpath)[-1])
    assert meta.constraints == {"pos": "id > 0"} and meta.configuration.get("team") == "ops"
    assert meta.shape() == master_meta.shape()
    assert final_txns(rpath, master.config.dbid) == [0, 1, 2, 3]
    with pytest.raises(Exception, match="(?i)check constraint"):
        spark.sql(f"INSERT INTO delta.`{rpath}` VALUES (-1, {values[0][1]!r})")  # the constraint is enforced


def _part_file(logs: str, txn_version: int) -> str:
    for root, _d, files in os.walk(logs):
        if root.endswith(f"wlc_version={txn_version}"):
            return os.path.join(root, next(f for f in files if f.endswith(".parquet")))
    raise AssertionError(f"no rows for version {txn_version}")


def test_a_fixed_cause_is_retried_and_the_recovery_logged(spark, master, dbfarm):
    """A damaged batch restored from a copy is applied by the next replicate()."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # 0
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")  # 1
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (2)")  # 2
    part = _part_file(master.logs, 2)
    shutil.copy(part, part + ".bak")
    with open(part, "r+b") as fh:
        fh.truncate(10)
    with pytest.raises(wlr.ReplicationError, match="checksum") as err:
        wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert err.value.txn == 2
    with pytest.raises(wlr.ReplicationError, match="checksum"):  # retried, fails again: raised again
        wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    shutil.move(part + ".bak", part)  # the cause is fixed
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rep.tick() == 2 and rows(rep.table("s.t")) == [(1,), (2,)]
    assert rep.status()["error"] is None and rep.status()["state"] == "idle"
    log = open(os.path.join(dbfarm, "r", "wlr.log")).read()
    assert "RECOVERED at transaction 2" in log


def _batch(logs: str, n: int) -> str:
    return os.path.join(logs, f"m_{n:012d}")


def test_batch_level_failures_name_the_batch_and_accept_refuses_them(spark, master, dbfarm):
    """Damaged or misplaced batches are reported as such; accept() (MonetDB's wlr.accept) skips nothing."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # txn 0, batch 0
    for i in range(1, 6):
        sql(spark, f"INSERT INTO delta.`{p}` VALUES ({i})")  # txn i, batch i
    logs = master.logs
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, until=0)
    aside = os.path.join(dbfarm, "aside")
    os.makedirs(aside)

    def refused(pattern: str, batch: int) -> None:
        with pytest.raises(wlr.ReplicationError, match=pattern) as err:
            rep.replicate(follow=False)
        assert (err.value.batch, err.value.txn, err.value.table) == (batch, None, None)
        assert str(err.value).startswith(f"replication stopped at batch {batch}")
        # the intact batches before the broken one are applied, nothing of it or after it
        assert rep.tick() == batch - 1 and rows(rep.table("s.t")) == [(i,) for i in range(1, batch)]
        before = tree(rep.path)
        with pytest.raises(wlr.ReplicaStateError, match="Restore the batch"):
            rep.accept()
        assert tree(rep.path) == before and rep.tick() == batch - 1

    manifest = os.path.join(_batch(logs, 1), "manifest.json")
    shutil.move(manifest, os.path.join(aside, "manifest.json"))
    refused(r"batch 1: .*manifest.json is missing", 1)
    shutil.move(os.path.join(aside, "manifest.json"), manifest)

    shutil.copy(manifest, os.path.join(aside, "manifest.json"))
    with open(manifest, "r+b") as fh:
        fh.truncate(50)
    refused(r"batch 1: .*truncated or not JSON", 1)
    shutil.copy(os.path.join(aside, "manifest.json"), manifest)

    shutil.move(_batch(logs, 2), os.path.join(aside, "b2"))
    refused(r"batch 2 is missing .*batch 3 follows", 2)
    shutil.move(os.path.join(aside, "b2"), _batch(logs, 2))

    os.rename(_batch(logs, 2), os.path.join(aside, "b2"))
    os.rename(_batch(logs, 3), _batch(logs, 2))
    os.rename(os.path.join(aside, "b2"), _batch(logs, 3))
    refused(r"batch 2: its folder holds the manifest of batch 3", 2)
    os.rename(_batch(logs, 2), os.path.join(aside, "b3"))
    os.rename(_batch(logs, 3), _batch(logs, 2))
    os.rename(os.path.join(aside, "b3"), _batch(logs, 3))

    shutil.copytree(_batch(logs, 5), _batch(logs, 6))  # the newest batch duplicated under the next number
    refused(r"batch 6: its folder holds the manifest of batch 5", 6)
    shutil.rmtree(_batch(logs, 6))

    rep.replicate(follow=False)  # the logs are whole again: everything applies
    assert rep.tick() == 5 and rows(rep.table("s.t")) == [(i,) for i in range(1, 6)]
    assert "RECOVERED at batch 6" in open(os.path.join(dbfarm, "r", "wlr.log")).read()


def test_transactions_missing_between_batches_are_a_batch_failure(spark, master, dbfarm):
    """A batch whose first transaction does not follow the previous batch's last."""
    from wlcore import batch as batchfmt

    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # txn 0, batch 0
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")  # txn 1, batch 1
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (2)")  # txn 2, batch 2
    storage = Storage.of(master.logs)
    b1 = batchfmt.read_manifest(storage, _batch(master.logs, 1))
    b2 = batchfmt.read_manifest(storage, _batch(master.logs, 2))
    # a rewritten (checksum-valid) batch 2 that claims txn 3: the logs skip txn 2
    b2.txns[0].txn, b2.txns[0].gtid = 3, b2.txns[0].gtid.rsplit(":", 1)[0] + ":3"
    storage.write_atomic(os.path.join(_batch(master.logs, 2), "manifest.json"), b2.to_bytes())
    assert b1.last_txn == 1
    with pytest.raises(wlr.ReplicationError, match="batch 2 holds transactions 3-3 but 2 was expected") as err:
        wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert err.value.txn is None and wlr.tick() == 1  # txns 0 and 1 applied, then replay stopped


def test_a_create_killed_in_its_first_commit_is_made_again(spark, master, dbfarm):
    """A CREATE cut off before its first commit leaves an empty _delta_log: that is no table yet."""
    a, t = master.table_path("s.a"), master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{a}` (i INT) USING delta")  # 0
    sql(spark, f"CREATE TABLE delta.`{t}` (i INT) USING delta")  # 1
    sql(spark, f"INSERT INTO delta.`{t}` VALUES (5)")  # 2
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, until=0)
    os.makedirs(os.path.join(rep.path, "s", "t", "_delta_log"))  # what the killed CREATE left
    rep.replicate(follow=False)
    assert rep.tick() == 2 and rows(rep.table("s.t")) == [(5,)]


def test_killed_multi_table_catch_up_resumes_without_applying_twice(spark, master, dbfarm):
    """SIGKILL after segments land (tables in parallel), three times, then finish in-process
    (a fourth JVM would test nothing the third does not)."""
    paths = {name: master.table_path(name) for name in ("s.k", "s.u", "s.w")}
    sql(spark, f"CREATE TABLE delta.`{paths['s.k']}` (id INT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, f"CREATE TABLE delta.`{paths['s.u']}` (a INT) USING delta")
    sql(spark, f"CREATE TABLE delta.`{paths['s.w']}` (id INT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    for i in range(4):
        spark.sql(f"INSERT INTO delta.`{paths['s.k']}` VALUES ({i}, 0), ({i + 10}, 0)")
        spark.sql(f"UPDATE delta.`{paths['s.k']}` SET v = v + 1 WHERE id = 0")
        spark.sql(f"INSERT INTO delta.`{paths['s.u']}` VALUES ({i}), ({i})")
        spark.sql(f"DELETE FROM delta.`{paths['s.u']}` WHERE a = {i - 1}")
        spark.sql(
            f"MERGE INTO delta.`{paths['s.w']}` t USING (SELECT {i % 2} AS id, {i} AS v) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
        )
        if i % 2:
            wlc.flush()
    last = wlc.flush()
    dbid = master.config.dbid
    kills = 0
    for _ in range(3):  # each run dies right after a segment lands (others may land beside it)
        proc = run_module("wlr", "replicate", dbfarm, "m", "r", WLC_CRASH_AT="replay.applied")
        if not killed_by_sigkill(proc):
            assert proc.returncode == 0, proc.stderr[-3000:]
            break
        kills += 1
    assert kills >= 2
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    assert rep.tick() == last
    published_by_table = {}
    from .helpers import assert_applied_once, published

    for rec in published(master.logs, "m"):
        published_by_table.setdefault(rec.table, []).append(rec.txn)
    for name, path in paths.items():
        assert rows(rep.table(name)) == master_rows(spark, path), name
        assert_applied_once(os.path.join(dbfarm, "r", "s", name.split(".")[1]), dbid, published_by_table[name])


def test_damaged_logs_met_by_a_new_replica_name_the_batch(spark, master, dbfarm):
    """A new replica's set-up walks the logs before it writes anything: a damaged batch met
    there is the same ReplicationError (naming the batch) an existing replica raises, and
    its advice is to repair the logs, never accept() (which refuses batch failures)."""
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")  # txn 0, batch 0
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")  # txn 1, batch 1
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (2)")  # txn 2, batch 2
    manifest = os.path.join(_batch(master.logs, 1), "manifest.json")
    with open(manifest, "r+b") as fh:
        fh.truncate(50)
    with pytest.raises(wlr.ReplicationError) as err:
        wlr.replicate("m", replica="fresh", dbfarm=dbfarm, follow=False)
    assert (err.value.batch, err.value.txn) == (1, None)
    assert "truncated or not JSON" in str(err.value) and "accept its transactions" not in str(err.value)
    assert "accept() cannot skip a batch" in str(err.value)
    assert not os.path.exists(os.path.join(dbfarm, "fresh"))  # nothing written
