"""Replica tables by name in a Hive metastore that several Spark applications share (Derby's
network server, started here): the follower (``wlr replicate --follow``) keeps the names and the
tick record current; a second, separate Spark application reads them by name at one consistent
tick, pins a tick through the record, and cannot write through the names."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from .. import metastore
from ..fault.helpers import run_python
from ..waiting import wait_until
from .helpers import ROOT, Service, master_rows, rows, sql

pytestmark = pytest.mark.spark


@pytest.fixture
def shared_catalog(tmp_path, monkeypatch):
    """A Derby network server holding the metastore; WLC_CONFIG (for the processes a test starts)
    sets ``spark.metastore`` to it. Yields the JDBC URL; the server is stopped by its pid."""
    proc, url = metastore.start(str(tmp_path / "derby"))
    cfg = yaml.safe_load(open(os.path.join(ROOT, "tests", "wlc-test.yaml")).read())
    cfg["spark"]["metastore"] = url
    cfg["spark"]["conf"]["spark.sql.warehouse.dir"] = str(tmp_path / "warehouse")  # shared by the applications
    path = tmp_path / "wlc-metastore.yaml"
    path.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("WLC_CONFIG", str(path))
    try:
        yield url
    finally:
        metastore.stop(proc)


READER = """
    import json, time
    import wlr
    from pyspark.errors import AnalysisException
    from wlcore.session import active_session

    spark = active_session()
    deadline = time.monotonic() + 120
    while True:  # the follower moves the record after its round: wait for the tick wanted
        try:
            record = wlr.catalog_tick("m_rep", spark)
            if record.tick >= {tick} and record.settled:
                break
        except wlr.ReplicaStateError:
            pass
        assert time.monotonic() < deadline, "the tick record did not reach transaction {tick}"
        time.sleep(0.2)
    out = {{"tick": record.tick, "versions": record.versions, "location": record.location,
           "t": sorted(map(list, spark.sql("SELECT id, v FROM m_rep__s.t").collect())),
           "u": sorted(map(list, spark.sql("SELECT k FROM m_rep__s.u").collect())),
           "pinned_t": sorted(map(list, record.table("s.t").collect())),
           "sql_t": sorted(map(list, spark.sql("SELECT id, v FROM " + record.sql("s.t")).collect())),
           "current": record.still_current(),
           "catalog": spark.conf.get("spark.sql.catalogImplementation")}}
    try:
        spark.sql("INSERT INTO m_rep__s.t VALUES (9, 'z')")
        out["insert"] = "accepted"
    except (AnalysisException, wlr.ReadOnlyError) as exc:
        out["insert"] = type(exc).__name__ + ": " + str(exc).splitlines()[0]
    print("RESULT " + json.dumps(out))
"""


def _text(path: str) -> str:
    """A file's text ('' while it is not there)."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _read(tick: int) -> dict:
    """A second Spark application (its own process and JVM, the same metastore) reads the replica by name."""
    done = run_python(READER.format(tick=tick), timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1][len("RESULT ") :])


def test_a_follower_keeps_a_shared_catalog_current_for_another_application(spark, master, dbfarm, shared_catalog):
    master.create_schema("s")
    spark.sql("CREATE TABLE s.t (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    spark.sql("CREATE TABLE s.u (k INT) USING delta")
    first = sql(spark, "INSERT INTO s.t VALUES (1, 'a'), (2, 'b')")
    follower = Service("wlr", "replicate", dbfarm, "m", "m_rep", "--follow")
    try:
        # the follower makes the new metastore's tables and the names first, as where a metastore
        # is set up before its readers: two applications making a new Derby metastore's tables
        # at once wait on each other's locks (Derby's 20 s deadlock detection, Hive's retries)
        said = f"SQL names current in the shared catalog: the tables' views and the tick record m_rep.tick at transaction {first}"
        wait_until(
            lambda: follower.proc.poll() is None and said in _text(os.path.join(dbfarm, "m_rep", "wlr.log")),
            240,
            lambda: f"the follower to say {said!r} in wlr.log; its output:\n" + follower.stop()[-3000:],
        )
        seen = _read(first)
        assert seen["catalog"] == "hive" and seen["tick"] == first and seen["current"], seen
        assert seen["t"] == seen["pinned_t"] == seen["sql_t"] == [[1, "a"], [2, "b"]]
        assert seen["u"] == []
        assert seen["location"].rstrip("/").endswith(os.path.join(dbfarm, "m_rep").lstrip("/"))
        assert seen["insert"] == (  # refused, in the reader's application too, in one line of ours
            "ReadOnlyError: replica m_rep is read-only: m_rep__s.t reads its table s.t; "
            "write s.t on its master m, and replay brings the change here"
        ), seen["insert"]
        pinned = seen["versions"]

        sql(spark, "UPDATE s.t SET v = 'B' WHERE id = 2")
        last = sql(spark, "INSERT INTO s.u VALUES (7)")
        seen = _read(last)
        assert seen["tick"] == last and seen["current"]
        t_path, u_path = (os.path.join(dbfarm, "m", "s", n) for n in ("t", "u"))
        assert seen["t"] == [[1, "a"], [2, "B"]] == [list(r) for r in master_rows(spark, t_path)]
        assert seen["u"] == [[7]] == [list(r) for r in master_rows(spark, u_path)]
        assert seen["versions"]["s.t"] > pinned["s.t"]
        # the earlier pin still reads the earlier tick: a Delta version never changes
        old = (
            spark.read.format("delta")
            .option("versionAsOf", pinned["s.t"])
            .load(os.path.join(dbfarm, "m_rep", "s", "t"))
        )
        assert rows(old) == [(1, "a"), (2, "b")]
        assert rows(spark.read.format("delta").load(os.path.join(dbfarm, "m_rep", "s", "t"))) == [(1, "a"), (2, "B")]
    finally:
        out = follower.stop()
    assert follower.proc.returncode == 0, out[-3000:]
