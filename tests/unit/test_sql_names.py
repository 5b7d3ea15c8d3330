"""The Spark SQL names of a replica's tables (pure: no Spark)."""

from wlr.catalog import _WRITE, _parts, plan_names, sql_schema, sql_text


def test_each_schema_of_a_replica_is_a_schema_of_its_own():
    assert sql_schema("shop_replica", "sales") == "shop_replica__sales"
    plan = plan_names("shop_replica", ["sales.orders", "hr.staff", "sales.items"])
    assert plan.names == {
        "hr.staff": ("shop_replica__hr", "staff"),
        "sales.items": ("shop_replica__sales", "items"),
        "sales.orders": ("shop_replica__sales", "orders"),
    }
    assert plan.left_out == {}


def test_names_the_session_catalog_does_not_take_are_left_out_with_the_way_to_read_them():
    plan = plan_names("r", ["s.`q1.orders`", "s.q-1", "my-schema.t", "s.ünï", "s.ok"])
    assert plan.names == {"s.ok": ("r__s", "ok")}
    assert set(plan.left_out) == {"s.`q1.orders`", "s.q-1", "my-schema.t", "s.ünï"}
    assert "'my-schema' is not a name Spark's session catalog takes" in plan.left_out["my-schema.t"]
    assert "replica.table('s.q-1')" in plan.left_out["s.q-1"]


def test_two_tables_whose_names_differ_only_in_case_keep_one_name():
    plan = plan_names("r", ["s.Orders", "s.orders"])
    assert plan.names == {"s.Orders": ("r__s", "Orders")}
    assert "its SQL name r__s.orders is also table s.Orders's (Spark's names ignore case)" in plan.left_out["s.orders"]


def test_a_part_that_does_not_start_with_a_letter_is_written_in_backticks():
    assert sql_text("r__s", "orders") == "r__s.orders"
    assert sql_text("r__s", "2024") == "r__s.`2024`"
    assert sql_text("r__s", "1abc") == "r__s.`1abc`"


def test_the_names_a_statement_writes_are_found_in_each_way_spark_sql_writes_them():
    def written(statement):
        return [_parts(m.group(1)) for m in _WRITE.finditer(statement)]

    assert written("insert into r__s.t values (1)") == [["r__s", "t"]]
    assert written("INSERT OVERWRITE TABLE `r__s`.`a``b` SELECT 1") == [["r__s", "a`b"]]
    assert written("WITH x AS (SELECT 1) INSERT INTO spark_catalog.r__s.t SELECT * FROM x") == [
        ["spark_catalog", "r__s", "t"]
    ]
    assert written("DELETE FROM r__s . t WHERE id = 1") == [["r__s", "t"]]
    assert written("MERGE INTO r__s.t t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 1")[0] == [
        "r__s",
        "t",
    ]
    assert written("TRUNCATE TABLE r__s.t") == written("ALTER TABLE r__s.t ADD COLUMNS (z INT)") == [["r__s", "t"]]
    assert written("SELECT * FROM r__s.t") == [] and written("UPDATED_AT") == []


def test_names_that_cannot_move_are_said_in_wlr_log_once_and_again_when_they_are_current(tmp_path):
    """The follower calls refresh() after every round: a lasting failure is one line of wlr.log,
    and a shared catalog's names are said current the first time and after the failure. The
    catalog's work (_sync) is a stand-in: what is under test is what refresh() says."""
    import os
    from types import SimpleNamespace

    from wlcore.storage import Storage
    from wlr.book import StateBook
    from wlr.catalog import ReplicaCatalog

    path = os.path.join(str(tmp_path), "r")
    os.makedirs(path)
    book = StateBook(Storage.of(str(tmp_path)), path, "r")
    book.state.tick = 3
    book.save()
    outcomes = ["ok", "metastore down", "metastore down", "ok", "ok"]

    class Catalog(ReplicaCatalog):
        def _sync(self, spark, remake=False):
            if outcomes.pop(0) != "ok":
                raise RuntimeError("A lock could not be obtained due to a deadlock\n\tat org.apache.derby")
            self._seen = self._key()

    catalog = Catalog(book, SimpleNamespace(), lambda: object(), serve=True)  # type: ignore[arg-type]
    catalog.shared = True
    for tick in (3, 4, 4, 4, 5):  # a round moved the tick to 3, 4, then nothing new twice, then 5
        book.state.tick = tick
        book.save()
        catalog.refresh()
    assert outcomes == []  # the failed move was tried again at the next round though the tick stayed
    lines = [line.split(" ", 1)[1] for line in open(os.path.join(path, "wlr.log")).read().splitlines()]
    assert lines == [
        "SQL names current in the shared catalog: the tables' views and the tick record r.tick at transaction 3",
        "the tables' SQL names were not moved to the last tick: A lock could not be obtained due to a deadlock; "
        "tried again after the next round",
        "SQL names current in the shared catalog: the tables' views and the tick record r.tick at transaction 4",
    ]
