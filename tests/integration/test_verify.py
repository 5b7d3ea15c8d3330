"""``wlr verify`` (:meth:`wlr.Replica.verify`): a replica compared with its master at its last
consistent tick, the master read at the versions that tick stands for; differences planted by
hand are found and named; a selective replica is compared on what it carries."""

import pytest

import wlc
import wlr
from wlr.cli import main as wlr_main

from .helpers import sql

pytestmark = pytest.mark.spark


def test_verify_finds_a_row_changed_by_a_path_write_and_names_its_key(spark, master, dbfarm, capsys):
    """Equal after replay (the master moved on past the tick is still read at the tick's
    versions); a row changed through the replica table's path is named by its key, the command
    exits 1; a selective replica is compared on the tables and rows it carries."""
    master.create_schema("s")
    sql(spark, "CREATE TABLE s.k (id INT, v STRING, m MAP<STRING, INT>) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    sql(spark, "CREATE TABLE s.u (a INT, b STRING) USING delta")
    sql(spark, "INSERT INTO s.k VALUES (1, 'a', map('x', 1)), (2, 'b', NULL), (3, 'c', map())")
    sql(spark, "INSERT INTO s.u VALUES (1, 'x'), (1, 'x'), (2, 'y')")
    sql(spark, "UPDATE s.k SET v = 'B' WHERE id = 2")
    wlc.flush()
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, follow=False)
    sql(spark, "INSERT INTO s.k VALUES (4, 'd', NULL)")  # past the replica's tick
    sql(spark, "DELETE FROM s.u WHERE a = 2")
    wlc.flush()

    result = rep.verify()
    assert result.equal and result.tick == rep.view_tick() < wlc.tick()
    assert {t.table: (t.status, t.replica_rows, t.master_rows, t.engine) for t in result.tables} == {
        "s.k": ("equal", 3, 3, "spark"),  # a MAP column: compared by Spark
        "s.u": ("equal", 3, 3, "delta-rs"),  # small and flat: sorted and compared here
    }
    assert wlr_main(["verify", dbfarm, "r"]) == 0
    out = capsys.readouterr().out
    assert "replica r against master m at transaction" in out and "2 tables equal" in out

    sql(spark, f"UPDATE delta.`{rep.path_of('s.k')}` SET v = 'planted' WHERE id = 3")  # by hand, outside replay
    result = rep.verify()
    assert not result.equal
    k = next(t for t in result.tables if t.table == "s.k")
    assert k.status == "differs" and k.replica_rows == k.master_rows == 3
    assert any("written outside replay" in p and "UPDATE" in p for p in k.problems), k.problems
    assert k.rows == ["replica lacks id=3", "master lacks id=3"], k.rows
    assert wlr_main(["verify", dbfarm, "r"]) == 1
    out = capsys.readouterr().out
    assert "s.k: replica lacks id=3" in out and "1 of 2 tables differ" in out
    rep.close()

    sel = wlr.replicate("m", replica="eu", dbfarm=dbfarm, follow=False, tables=["s.k"], where={"s.k": "id >= 2"})
    result = sel.verify()
    assert [(t.table, t.status, t.replica_rows, t.master_rows) for t in result.tables] == [("s.k", "equal", 3, 3)]
    sel.close()


def test_the_row_hash_sees_where_a_null_is_and_not_the_order_of_a_map(spark):
    """A value moved to another nullable column, or a NULL array element lost, changes the hash
    (Spark's own hash skips NULLs); a map's entries in another order do not."""
    from wlr.verify import _comparable, _digest

    def digest(sql_text: str) -> tuple[int, int]:
        df = spark.sql(sql_text)
        return _digest(_comparable(df, df.columns))

    assert digest("SELECT 1 AS a, CAST(NULL AS INT) AS b, 5 AS c") != digest(
        "SELECT 1 AS a, 5 AS b, CAST(NULL AS INT) AS c"
    )
    assert digest("SELECT array(1, NULL) AS x") != digest("SELECT array(1) AS x")
    assert digest("SELECT named_struct('p', 1, 'q', CAST(NULL AS INT)) AS s") != digest(
        "SELECT named_struct('p', CAST(NULL AS INT), 'q', 1) AS s"
    )
    assert digest("SELECT map('x', 1, 'y', 2) AS m") == digest("SELECT map('y', 2, 'x', 1) AS m")
