"""Capture and replay killed with SIGKILL at random moments, in loops bounded in count and time.

Run by ``make faults`` (part of ``make test``); bounds from the environment:
``WLC_FAULT_ROUNDS`` (kills per loop, default 4), ``WLC_FAULT_SECONDS`` (time per loop,
default 240) and ``WLC_FAULT_SEED`` (the seed; printed, so a failing run can be repeated).
"""

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

import wlr
from wlc.master import Master
from wlcore.deltalog import list_versions, metadata_at, read_commit
from wlcore.names import split_name
from wlcore.storage import Storage

from ..integration.helpers import master_rows, rows
from .helpers import assert_applied_once, env_with, published

pytestmark = [
    pytest.mark.spark,
    pytest.mark.random_kills,
    pytest.mark.timeout(2 * float(os.environ.get("WLC_FAULT_SECONDS", "240")) + 900),
]


def _bounds() -> tuple[int, float, random.Random]:
    seed = int(os.environ.get("WLC_FAULT_SEED") or time.time_ns() % 1_000_000)
    print(f"WLC_FAULT_SEED={seed}")
    return (
        int(os.environ.get("WLC_FAULT_ROUNDS", "4")),
        float(os.environ.get("WLC_FAULT_SECONDS", "240")),
        random.Random(seed),
    )


def _kill_after(args: list[str], seconds: float, deadline: float) -> int | None:
    """Start ``python -m <args>``; SIGKILL it after ``seconds`` unless it ended. Returns its exit code."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *args], env=env_with(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        return proc.wait(timeout=max(0.1, min(seconds, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        return None


def _data_versions(path: str) -> list[int]:
    storage = Storage.of(path)
    return [v for v in list_versions(storage, path) if read_commit(storage, path, v).data_change]


def test_capture_killed_at_random_moments_loses_and_repeats_nothing(spark, dbfarm):
    rounds, budget, rnd = _bounds()
    m = Master("m", dbfarm=dbfarm, capture=False).start()
    k, u = m.table_path("s.keyed"), m.table_path("s.plain")
    spark.sql(f"CREATE TABLE delta.`{k}` (id INT, v INT) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    spark.sql(f"CREATE TABLE delta.`{u}` (id INT, v INT) USING delta")
    m.close()
    stop = threading.Event()
    writes = []

    def writer():  # another application keeps writing the master while capturers come and go
        i = 0
        while not stop.is_set():
            i += 1
            table = k if i % 2 else u
            # keys stay unique in the keyed table; the plain one gets duplicate rows
            second = i + 100_000 if table == k else i
            stmt = [
                f"INSERT INTO delta.`{table}` VALUES ({i}, {i}), ({second}, {-i})",
                f"UPDATE delta.`{table}` SET v = v + 1 WHERE id % 3 = {i % 3}",
                f"DELETE FROM delta.`{table}` WHERE id % 7 = {i % 7} AND v < 0",
            ][i % 3]
            spark.sql(stmt)
            writes.append(stmt)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    deadline = time.monotonic() + budget
    kills = 0
    try:
        # kills are cheap next to a write on 2 cores: go on until the writer has written a few times too
        while (kills < rounds or len(writes) < 6) and time.monotonic() < deadline:
            beat = rnd.choice(["0", "1"])
            code = _kill_after(["wlc", "capture", dbfarm, "m", "--beat", beat], rnd.uniform(2, 20), deadline)
            assert code is None, f"the capturer exited by itself ({code}) instead of being killed"
            kills += 1
    finally:
        stop.set()
        thread.join(timeout=120)
    assert kills >= 2 and len(writes) >= 4, (kills, len(writes))
    with pytest.warns(UserWarning, match="already in master mode"):
        m = Master("m", dbfarm=dbfarm, capture=False).start()
    m.flush()
    txns = published(m.logs, "m")
    assert [t.txn for t in txns] == list(range(len(txns)))  # gap-free, none repeated
    assert len({t.gtid for t in txns}) == len(txns)
    for name, path in (("s.keyed", k), ("s.plain", u)):
        captured = [t.version for t in txns if t.table == name and t.version is not None]
        assert sorted(captured) == captured and len(set(captured)) == len(captured)
        local = path.replace("file://", "")
        assert set(_data_versions(local)) <= set(captured), "a data-changing Delta version was not captured"
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)
    assert rows(rep.table("s.keyed")) == master_rows(spark, k)
    assert rows(rep.table("s.plain")) == master_rows(spark, u)
    m.close()


def test_replay_killed_at_random_moments_converges_exactly_once(spark, master, dbfarm):
    rounds, budget, rnd = _bounds()
    k, u, c = master.table_path("s.keyed"), master.table_path("s.plain"), master.table_path("s.reshaped")
    stmts = [
        f"CREATE TABLE delta.`{k}` (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')",
        f"CREATE TABLE delta.`{u}` (id INT, v STRING) USING delta",
        f"CREATE TABLE delta.`{c}` (id INT, v INT) USING delta",
        f"ALTER TABLE delta.`{c}` ADD CONSTRAINT pos CHECK (id > 0)",
        f"ALTER TABLE delta.`{k}` ADD CONSTRAINT kpos CHECK (id > 0)",
        f"INSERT INTO delta.`{c}` VALUES (1, 10)",
    ]
    for i in range(1, 7):
        stmts += [
            f"INSERT INTO delta.`{k}` VALUES ({i}, 'a{i}'), ({i + 100}, 'b{i}')",
            f"INSERT INTO delta.`{u}` VALUES ({i}, 'x'), ({i}, 'x')",
            f"UPDATE delta.`{k}` SET v = 'u{i}' WHERE id = {i}",
        ]
    stmts += [
        f"DELETE FROM delta.`{u}` WHERE id = 2",
        f"ALTER TABLE delta.`{k}` ADD COLUMNS (note STRING)",
        f"UPDATE delta.`{k}` SET note = 'n' WHERE id > 100",
    ]
    for stmt in stmts:
        spark.sql(stmt)
    (
        spark.createDataFrame([(1, "ten"), (3, "thirty")], "id int, v string")
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(c)
    )
    spark.sql(f"INSERT INTO delta.`{c}` VALUES (4, 'forty')")
    last = master.flush()
    deadline = time.monotonic() + budget
    kills = done = 0
    while kills < rounds and time.monotonic() < deadline:
        # the first kill lands well before replay can finish (a JVM start and ~30 Delta commits)
        code = _kill_after(
            ["wlr", "replicate", dbfarm, "m", "r"], rnd.uniform(3, 12) if kills == 0 else rnd.uniform(3, 40), deadline
        )
        if code is not None:
            done += 1
            assert code == 0, f"replay exited {code} after {kills} kills"
            break
        kills += 1
    assert kills >= 1
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm).replicate(follow=False)
    assert rep.tick() == last and rep.status()["error"] is None
    txns = published(master.logs, "m")
    dbid = master.config.dbid
    for name, path in (("s.keyed", k), ("s.plain", u), ("s.reshaped", c)):
        assert rows(rep.table(name)) == master_rows(spark, path)
        schema, table = split_name(name)
        rpath = os.path.join(rep.path, schema, table)
        assert_applied_once(rpath, dbid, [t.txn for t in txns if t.table == name])
        mpath = path.replace("file://", "")
        rstore = Storage.of(rpath)
        assert (
            metadata_at(rstore, rpath, list_versions(rstore, rpath)[-1]).constraints
            == metadata_at(rstore, mpath, list_versions(rstore, mpath)[-1]).constraints
        )
