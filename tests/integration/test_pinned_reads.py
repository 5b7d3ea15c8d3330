"""Consistent reads without Spark (:func:`wlr.pin`): polars and delta-rs read a replica's tables
together at its last consistent tick, from a process that does not replay it, also while
another process is in the middle of a round."""

import os
import subprocess
import sys

import polars as pl
import pytest
import yaml

import wlc
import wlr
from wlr.errors import NotFoundError, ReplicaStateError

from .helpers import sql

pytestmark = pytest.mark.spark


def ids(frame) -> list[int]:
    """The ``id`` column of a polars LazyFrame or DataFrame, or an Arrow table, sorted."""
    if isinstance(frame, pl.LazyFrame):
        frame = frame.collect()
    column = frame["id"]
    return sorted(column.to_list() if isinstance(column, pl.Series) else column.to_pylist())


def test_polars_and_delta_rs_read_every_table_at_one_tick_while_another_process_replays(spark, master, dbfarm):
    """Each pair of master transactions adds row i to ``s.x`` and then to ``s.y``. A replay in
    another process killed after its first segment leaves one table ahead of the other: a pin
    still reads both at the tick before (no table ahead), through polars and delta-rs alike, while
    the newest version of the table ahead holds more. After the round completes a new pin reads
    the new tick; the old pin still reads its own versions; a table dropped and made again since
    is refused by the old pin instead of read at a version of the new table."""
    master.create_schema("s")
    for t in ("s.x", "s.y"):
        sql(spark, f"CREATE TABLE {t} (id BIGINT) USING delta")
        sql(spark, f"INSERT INTO {t} VALUES (1)")
    wlc.flush()
    wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False).close()
    first = wlr.pin("r", dbfarm)
    assert sorted(first.versions) == ["s.x", "s.y"]
    assert ids(first.polars("s.x")) == ids(first.polars("s.y")) == [1]
    for i in (2, 3):
        sql(spark, f"INSERT INTO s.x VALUES ({i})")
        sql(spark, f"INSERT INTO s.y VALUES ({i})")
    wlc.flush()

    cfg = yaml.safe_load(open(os.environ["WLC_CONFIG"])) or {}
    cfg.setdefault("replica", {})["parallelism"] = 1  # one table after the other
    one = os.path.join(dbfarm, "one.yaml")
    with open(one, "w") as fh:
        yaml.safe_dump(cfg, fh)
    env = dict(os.environ, WLC_CRASH_AT="replay.applied", WLC_CONFIG=one)  # killed once its first segment landed
    proc = subprocess.run(
        [sys.executable, "-m", "wlr", "replicate", dbfarm, "m", "r"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    ahead = {t: ids(pl.read_delta(first.path(t))) for t in ("s.x", "s.y")}
    assert sorted(ahead.values()) == [[1], [1, 2, 3]], ahead  # one table landed its segment, the other not
    mid = wlr.pin("r", dbfarm)
    assert mid.tick == first.tick and mid.versions == first.versions
    assert ids(mid.polars("s.x")) == ids(mid.polars("s.y")) == [1]
    assert ids(mid.delta_table("s.x").to_pyarrow_table()) == ids(mid.delta_table("s.y").to_pyarrow_table()) == [1]

    rep = wlr.Replica("m", "r", dbfarm)
    rep.replicate(follow=False)
    done = rep.pin()
    assert done.tick == wlc.tick() > first.tick
    assert ids(done.polars("s.x")) == ids(done.polars("s.y")) == [1, 2, 3]
    assert ids(done.delta_table("s.y").to_pyarrow_table()) == [1, 2, 3]
    assert ids(first.polars("s.x")) == [1]  # an old pin reads the versions it pinned

    sql(spark, "DROP TABLE s.y")  # the master drops s.y and makes it again
    sql(spark, "CREATE TABLE s.y (id BIGINT) USING delta")
    for i in (7, 8):
        sql(spark, f"INSERT INTO s.y VALUES ({i})")
    wlc.flush()
    rep.replicate(follow=False)
    rep.close()
    assert ids(wlr.pin("r", dbfarm).polars("s.y")) == [7, 8]
    with pytest.raises(ReplicaStateError, match="is not the one of transaction"):
        first.polars("s.y")

    with pytest.raises(ReplicaStateError, match="not on replica r.*s.x"):
        done.polars("s.z")
    with pytest.raises(NotFoundError):
        wlr.pin("nope", dbfarm)
