"""A TPC-H master and its backlog, for the benchmarks: ``orders`` and ``lineitem`` from the demo's
``dbgen`` (keyed by ``wlc.key``), an unkeyed ``events`` table with duplicate rows and a small
``hot`` table, then cycles of master statements: RF1/RF2 refresh sets, UPDATEs of hot keys that
change the same rows again and again (MusicBrainz's ``edits_pending`` +1 then -1), DELETEs, MERGEs
and one ADD COLUMNS in the middle (:meth:`Bench.backlog`).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from pyspark.sql import DataFrame, functions as F

import wlc
from demo.tpch_data import DELETE_SCHEMA, SCHEMAS, ensure_tpch_data, has_trailing_delimiter
from wlcore.deltalog import list_versions, read_commit
from wlcore.storage import Storage

REPO_ROOT = Path(__file__).resolve().parent.parent

MASTER = "bench"
KEYS = {"tpch.orders": ["o_orderkey"], "tpch.lineitem": ["l_orderkey", "l_linenumber"], "s.events": [], "s.hot": ["id"]}
MAIN_TABLES = ("tpch.orders", "tpch.lineitem", "s.events")
TXNS_PER_CYCLE = 6  # transactions a cycle at least (of its 14 statements, some change nothing)


class Bench:
    """A TPC-H master ``bench`` in a new temporary dbfarm and the statements of its backlog.

    Args:
        txns (int): master transactions the backlog will hold (refresh sets are made for them).
        scale (float): TPC-H scale factor (0.1: orders 150,000 rows, lineitem 600,000; 1: ten times that).
        prefix (str): the temporary dbfarm's name prefix.
    """

    def __init__(self, txns: int, scale: float = 0.1, prefix: str = "wlc-catchup-"):
        sets = max(12, math.ceil(txns / TXNS_PER_CYCLE) + 1)
        self.data = ensure_tpch_data(REPO_ROOT / ".cache" / "tpch", scale=scale, refresh_sets=sets)
        self.spark = wlc.spark_session()
        self.farm = tempfile.mkdtemp(prefix=prefix)
        self.set_no = 0
        self.hot = []
        self.storage = Storage.of(self.farm)
        self.next_version: dict[str, int] = {}
        self.logged = 0  # transactions in the master tables' Delta logs since mark()

    def path(self, table: str) -> str:
        schema, name = table.split(".")
        return os.path.join(self.farm, MASTER, schema, name)

    def ref(self, table: str) -> str:
        return f"delta.`{self.path(table)}`"

    def run(self, sql_text: str) -> None:
        self.spark.sql(sql_text)

    def mark(self, tables) -> None:
        """Count transactions from here on (see count)."""
        self.next_version = {t: max(list_versions(self.storage, self.path(t))) + 1 for t in tables}
        self.logged = 0

    def count(self) -> int:
        """Transactions written since mark(), read from the tables' own Delta logs the way capture
        reads them: a commit that changes data or the table's shape (a statement that changes
        nothing commits no data change and is no transaction)."""
        for t, version in self.next_version.items():
            while True:
                try:
                    commit = read_commit(self.storage, self.path(t), version)
                except FileNotFoundError:
                    break
                if commit.data_change or commit.metadata is not None:
                    self.logged += 1
                version += 1
            self.next_version[t] = version
        return self.logged

    def tbl(self, name: str, table: str) -> DataFrame:
        path = self.data / name
        ddl = DELETE_SCHEMA if table == "delete" else SCHEMAS[table]
        trailing = has_trailing_delimiter(path)
        df = self.spark.read.csv(str(path), sep="|", schema=ddl + (", _t STRING" if trailing else ""))
        return df.drop("_t") if trailing else df

    # ------------------------------------------------------------------ set-up and workload
    def load(self) -> None:
        for table in ("orders", "lineitem"):
            keys = ",".join(KEYS[f"tpch.{table}"])
            self.spark.sql(
                f"CREATE TABLE {self.ref('tpch.' + table)} ({SCHEMAS[table]}) USING delta "
                f"TBLPROPERTIES ('wlc.key' = '{keys}')"
            )
            self.tbl(f"{table}.tbl", table).write.format("delta").mode("append").save(self.path("tpch." + table))
        self.spark.sql(f"CREATE TABLE {self.ref('s.events')} (kind STRING, n INT) USING delta")
        (
            self.spark.range(10_000)
            .selectExpr("concat('k', CAST(id % 50 AS STRING)) AS kind", "CAST(id % 7 AS INT) AS n")
            .write.format("delta")
            .mode("append")
            .save(self.path("s.events"))
        )  # many duplicate rows
        self.spark.sql(
            f"CREATE TABLE {self.ref('s.hot')} (id BIGINT, edits_pending INT, name STRING) USING delta "
            "TBLPROPERTIES ('wlc.key' = 'id')"
        )
        (
            self.spark.range(1_000)
            .selectExpr("id", "0 AS edits_pending", "concat('artist ', id) AS name")
            .write.format("delta")
            .mode("append")
            .save(self.path("s.hot"))
        )

    def cycle(self, altered: bool):
        """One round of the backlog (14 statements); yields after each."""
        from delta.tables import DeltaTable

        self.set_no += 1
        n = self.set_no
        orders = self.tbl(f"orders.tbl.u{n}", "orders")
        if altered:
            orders = orders.withColumn("o_note", F.lit(f"refresh {n}"))
        orders.write.format("delta").mode("append").save(self.path("tpch.orders"))  # RF1
        yield
        self.tbl(f"lineitem.tbl.u{n}", "lineitem").write.format("delta").mode("append").save(self.path("tpch.lineitem"))
        yield
        hot = "(1, 2, 3, 4, 5, 6, 7, 32, 33, 34)"
        for delta in (1, -1, 1, -1):  # edits_pending: the same rows changed again and again
            self.run(
                f"UPDATE {self.ref('tpch.orders')} SET o_shippriority = o_shippriority + ({delta}) "
                f"WHERE o_orderkey IN {hot}"
            )
            yield
        self.run(
            f"UPDATE {self.ref('tpch.lineitem')} SET l_quantity = l_quantity + 1 "
            f"WHERE l_orderkey IN {hot} AND l_linenumber = 1"
        )
        yield
        self.run(f"DELETE FROM {self.ref('tpch.lineitem')} WHERE l_orderkey = {100 + 4 * n} AND l_linenumber > 1")
        yield
        src = (
            self.spark.read.format("delta")
            .load(self.path("tpch.orders"))
            .filter(F.col("o_orderkey").between(1000 + n * 40, 1000 + n * 40 + 39))
            .withColumn("o_comment", F.lit(f"merged {n}"))
        )
        (
            DeltaTable.forPath(self.spark, self.path("tpch.orders"))
            .alias("t")
            .merge(src.alias("s"), "t.o_orderkey = s.o_orderkey")
            .whenMatchedUpdate(set={"o_comment": "s.o_comment"})
            .whenNotMatchedInsertAll()
            .execute()
        )
        yield
        self.run(
            f"INSERT INTO {self.ref('s.events')} VALUES ('k{n % 50}', {n % 7}), ('k{n % 50}', {n % 7}), ('new', {n})"
        )
        yield
        self.run(f"DELETE FROM {self.ref('s.events')} WHERE kind = 'k{(n + 25) % 50}' AND n = {(n + 1) % 7}")
        yield
        keys = [r[0] for r in self.tbl(f"delete.{n}", "delete").collect()]
        for table, col in (("tpch.orders", "o_orderkey"), ("tpch.lineitem", "l_orderkey")):  # RF2
            DeltaTable.forPath(self.spark, self.path(table)).delete(F.col(col).isin(keys))
            yield
        self.run(f"UPDATE {self.ref('s.events')} SET n = n + 100 WHERE kind = 'new' AND n = {n - 1}")
        yield

    def backlog(self, total: int) -> None:
        """Write statements until the master's logs hold ``total`` transactions."""
        self.mark(MAIN_TABLES)
        altered = False
        while self.logged < total:
            for _ in self.cycle(altered):
                if self.count() >= total:
                    break
                if not altered and self.logged >= total // 2:
                    self.run(f"ALTER TABLE {self.ref('tpch.orders')} ADD COLUMNS (o_note STRING)")
                    altered = True
                    self.count()
                    break  # the rest of this cycle's RF1 has no o_note; start a cycle that has it
            print(f"\r  backlog: {self.logged} transactions", end="", flush=True)
        print()

    def hot_edits(self, count: int) -> None:
        """MusicBrainz-style edits on the same 20 keys: +1 when an edit opens, -1 when it applies."""
        for i in range(count):
            delta = 1 if i % 2 == 0 else -1
            self.run(
                f"UPDATE {self.ref('s.hot')} SET edits_pending = edits_pending + ({delta}), "
                f"name = concat('artist ', id, ' v{i // 2}') WHERE id < 20"
            )

    def versions(self, tables) -> dict[str, int]:
        return {t: int(self.spark.sql(f"DESCRIBE HISTORY {self.ref(t)} LIMIT 1").first()["version"]) for t in tables}
