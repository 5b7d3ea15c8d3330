"""TPC-H demo of wlc/wlr: lazy master/replica replication of Delta Lake tables.

What it does (``make demo`` runs ``.venv/bin/python demo/tpch_demo.py``):

1. Generates (or reuses) TPC-H SF 0.1 data and its refresh sets with the official
   ``dbgen`` (see ``demo/tpch_data.py``).
2. Loads the 8 TPC-H tables as path-based Delta tables ``<dbfarm>/tpch/sys/<table>``, each
   declaring its primary key in the table property ``wlc.key``; lineitem gets a CHECK
   constraint.
3. Puts database ``tpch`` in master mode (``wlc.master``: snapshot of the loaded tables,
   then capture of every commit into batches published every ``--beat`` seconds).
4. Starts a follower replica ``tpch_replica`` (``wlr.replicate`` without ``until``): it
   applies everything published and keeps following in the background.
5. Runs the TPC-H refresh stream: per set N, RF1 (append ``orders.tbl.uN`` and
   ``lineitem.tbl.uN``) and RF2 (delete the orders of ``delete.N`` and their lineitems),
   mixed with UPDATEs, one MERGE (upsert into customer), and one
   ``ALTER TABLE orders ADD COLUMNS (o_note STRING)`` followed by writes that fill it.
6. Verifies replicas against the master's own Delta time travel (row count plus an
   order-independent checksum per table):
   (a) ``tpch_at_txn``: ``wlr.replicate(until=<txn id in the middle of the stream>)``;
   (b) ``tpch_at_time``: ``wlr.replicate(until=<instant between two transactions>)``;
   (c) the follower, once it has reached ``wlc.tick()`` after ``wlc.flush()``.
   The master reference for a point is, per table, the Delta version written by the last
   transaction at or before that point (from the published batch manifests), or the
   snapshot version when the table had no transaction yet.
7. Drops the master's orders table "by mistake" (removes its folder), lets the follower
   replicate the drop, then recovers with a point-in-time replica ``tpch_pitr`` made with
   ``until=<the instant just before the drop>`` and checks it holds orders as they were.
8. Prints load time, capture lag (commit -> batch published), replay time per
   transaction and total time. Exits 1 on any mismatch; prints ``DEMO OK`` on success.

Options: ``--dbfarm`` (default ./dbfarm), ``--sets`` (refresh sets, default 12),
``--beat`` (master heartbeat in seconds, default 1). Reruns start from scratch: the demo's
databases in the dbfarm are removed first.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pyspark.sql import (  # noqa: E402
    DataFrame,
    SparkSession,
    functions as F,  # noqa: E402
)

import wlc  # noqa: E402
import wlr  # noqa: E402
from demo.tpch_data import DELETE_SCHEMA, KEYS, SCHEMAS, TABLES, ensure_tpch_data, has_trailing_delimiter  # noqa: E402
from wlcore import batch as wlc_batch, snapshots as wlc_snapshot  # noqa: E402
from wlcore.logstore import LogStore  # noqa: E402

MASTER = "tpch"
FOLLOWER = "tpch_replica"
AT_TXN = "tpch_at_txn"
AT_TIME = "tpch_at_time"
PITR = "tpch_pitr"
DATABASES = (MASTER, FOLLOWER, AT_TXN, AT_TXN + "_serial", AT_TIME, PITR)
SCHEMA = "sys"
SCALE = 0.1
WAIT_SECONDS = 900  # deadline for the follower to catch up


# ----------------------------------------------------------------------------- helpers


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def hms(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def qualified(table: str) -> str:
    return f"{SCHEMA}.{table}"


def sql_path(path: str) -> str:
    """``delta.`<path>``` for SQL on a path-based Delta table."""
    return "delta.`" + path.replace("`", "``") + "`"


def checksum(df: DataFrame, cols: list[str]) -> tuple[int, int]:
    """(row count, order-independent content checksum) of ``df`` over ``cols``.

    The checksum is the sum of each row's xxhash64; summed as DECIMAL(38,0) because ANSI
    mode (on in Spark 4) makes a sum of longs fail on overflow.
    """
    row = df.select(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*[F.col(f"`{c}`") for c in cols]).cast("decimal(38,0)")).alias("h"),
    ).first()
    return int(row["n"]), int(row["h"] or 0)


@dataclass
class Txn:
    """A transaction the demo ran on the master, with the wall time just after it committed."""

    set_no: int
    label: str
    table: str
    committed: datetime


@dataclass
class Demo:
    """State shared by the steps."""

    spark: SparkSession
    dbfarm: str
    data_dir: Path
    sets: int
    beat: float
    master: "wlc.Master | None" = None
    follower: "wlr.Replica | None" = None
    txns: list[Txn] = field(default_factory=list)
    has_note: bool = False
    ok: bool = True
    timings: dict[str, float] = field(default_factory=dict)
    replay: list[tuple[str, int, float]] = field(default_factory=list)  # (replica, txns applied, seconds)
    _master_sums: dict[tuple[str, int], tuple[list[str], int, int]] = field(default_factory=dict)

    def master_path(self, table: str) -> str:
        return os.path.join(self.dbfarm, MASTER, SCHEMA, table)

    def record(self, set_no: int, label: str, table: str) -> None:
        self.txns.append(Txn(set_no, label, table, utcnow()))

    def read_tbl(self, name: str, table: str) -> DataFrame:
        """A dbgen file ``name`` (``|``-separated, no header) with the columns of ``table``."""
        path = self.data_dir / name
        ddl = DELETE_SCHEMA if table == "delete" else SCHEMAS[table]
        trailing = has_trailing_delimiter(path)
        if trailing:  # classic dbgen: one empty field after the last '|'
            ddl += ", _trailing STRING"
        df = self.spark.read.csv(str(path), sep="|", header=False, schema=ddl, mode="FAILFAST")
        return df.drop("_trailing") if trailing else df

    def master_checksum(self, table: str, version: int) -> tuple[list[str], int, int]:
        """(columns, rows, checksum) of master table ``table`` at Delta ``version`` (cached)."""
        key = (table, version)
        if key not in self._master_sums:
            df = self.spark.read.format("delta").option("versionAsOf", version).load(self.master_path(table))
            self._master_sums[key] = (df.columns, *checksum(df, df.columns))
        return self._master_sums[key]


# ----------------------------------------------------------------------------- step 1-3: data, load


def prepare(args) -> Demo:
    """Get the TPC-H data, start Spark and remove the demo's databases from earlier runs."""
    t0 = time.perf_counter()
    data_dir = ensure_tpch_data(REPO_ROOT / ".cache" / "tpch", scale=SCALE, refresh_sets=args.sets)
    print(f"TPC-H SF {SCALE} data with {args.sets} refresh sets: {data_dir} ({time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    spark = wlc.spark_session()
    print(f"Spark {spark.version} with Delta Lake ready ({time.perf_counter() - t0:.1f} s)")
    dbfarm = os.path.abspath(args.dbfarm)
    for name in DATABASES:
        shutil.rmtree(os.path.join(dbfarm, name), ignore_errors=True)
    os.makedirs(dbfarm, exist_ok=True)
    return Demo(spark, dbfarm, data_dir, args.sets, args.beat)


def load(demo: Demo) -> None:
    """Create the 8 tables under ``<dbfarm>/tpch/sys`` and load the base data."""
    print(f"\n== Load: 8 TPC-H tables into {os.path.join(demo.dbfarm, MASTER, SCHEMA)}")
    t_all = time.perf_counter()
    for table in TABLES:
        t0 = time.perf_counter()
        path = demo.master_path(table)
        key = ",".join(KEYS[table])
        demo.spark.sql(
            f"CREATE TABLE {sql_path(path)} ({SCHEMAS[table]}) USING delta TBLPROPERTIES ('wlc.key' = '{key}')"
        )
        if table == "lineitem":
            demo.spark.sql(f"ALTER TABLE {sql_path(path)} ADD CONSTRAINT positive_quantity CHECK (l_quantity > 0)")
        demo.read_tbl(f"{table}.tbl", table).write.format("delta").mode("append").save(path)
        rows = demo.spark.read.format("delta").load(path).count()
        print(f"  {table:<10} {rows:>9,} rows  key ({key})  {time.perf_counter() - t0:5.1f} s")
    demo.timings["load"] = time.perf_counter() - t_all
    print(f"  loaded in {demo.timings['load']:.1f} s")


# ----------------------------------------------------------------------------- step 4-5: master, follower


def start_master(demo: Demo) -> None:
    t0 = time.perf_counter()
    demo.master = wlc.master(MASTER, dbfarm=demo.dbfarm)
    wlc.beat(demo.beat)
    demo.timings["master"] = time.perf_counter() - t0
    print(
        f"\n== Master: wlc.master({MASTER!r}) took the snapshot in {demo.timings['master']:.1f} s; "
        f"wlc.beat({demo.beat:g})"
    )


def start_follower(demo: Demo) -> None:
    t0 = time.perf_counter()
    demo.follower = wlr.replicate(MASTER, replica=FOLLOWER, dbfarm=demo.dbfarm)
    print(
        f"== Follower: wlr.replicate({MASTER!r}, replica={FOLLOWER!r}) started from the snapshot "
        f"in {time.perf_counter() - t0:.1f} s and follows in the background"
    )


# ----------------------------------------------------------------------------- step 6: refresh stream


def rf1(demo: Demo, n: int) -> str:
    """Refresh function 1: append orders.tbl.uN and lineitem.tbl.uN (two transactions)."""
    orders = demo.read_tbl(f"orders.tbl.u{n}", "orders").cache()
    if demo.has_note:
        orders = orders.withColumn("o_note", F.lit(f"inserted by refresh set {n}"))
    n_orders = orders.count()
    orders.write.format("delta").mode("append").save(demo.master_path("orders"))
    demo.record(n, "RF1 insert", "orders")
    lineitem = demo.read_tbl(f"lineitem.tbl.u{n}", "lineitem").cache()
    n_lines = lineitem.count()
    lineitem.write.format("delta").mode("append").save(demo.master_path("lineitem"))
    demo.record(n, "RF1 insert", "lineitem")
    orders.unpersist()
    lineitem.unpersist()
    return f"+{n_orders} orders, +{n_lines} lineitems"


def rf2(demo: Demo, n: int) -> str:
    """Refresh function 2: delete the orders of delete.N and their lineitems (two transactions)."""
    from delta.tables import DeltaTable

    keys = [r.o_orderkey for r in demo.read_tbl(f"delete.{n}", "delete").collect()]
    for table, col in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        DeltaTable.forPath(demo.spark, demo.master_path(table)).delete(F.col(col).isin(keys))
        demo.record(n, "RF2 delete", table)
    return f"-{len(keys)} orders and their lineitems"


def updates(demo: Demo, n: int) -> str:
    """Two UPDATEs: close 20 of set N's new orders; ship their lineitems a day later."""
    from delta.tables import DeltaTable

    keys = [
        r.o_orderkey
        for r in demo.read_tbl(f"orders.tbl.u{n}", "orders")
        .select("o_orderkey")
        .orderBy("o_orderkey")
        .limit(20)
        .collect()
    ]
    DeltaTable.forPath(demo.spark, demo.master_path("orders")).update(
        F.col("o_orderkey").isin(keys), {"o_orderstatus": F.lit("F")}
    )
    demo.record(n, "UPDATE o_orderstatus", "orders")
    DeltaTable.forPath(demo.spark, demo.master_path("lineitem")).update(
        F.col("l_orderkey").isin(keys), {"l_shipdate": F.date_add("l_shipdate", 1)}
    )
    demo.record(n, "UPDATE l_shipdate", "lineitem")
    return "UPDATE 20 orders + their lineitems"


def merge_customers(demo: Demo, n: int) -> str:
    """One MERGE: raise the balance of customers 1..10 and insert 2 new customers."""
    from delta.tables import DeltaTable

    path = demo.master_path("customer")
    current = demo.spark.read.format("delta").load(path)
    top = current.agg(F.max("c_custkey")).first()[0]
    changed = current.filter(F.col("c_custkey") <= 10).withColumn(
        "c_acctbal", (F.col("c_acctbal") + F.lit(100)).cast("decimal(15,2)")
    )
    new = demo.spark.createDataFrame(
        [
            (
                top + 1,
                f"Customer#{top + 1:09d}",
                "1 Replica Road",
                7,
                "17-555-000-0001",
                1000,
                "BUILDING",
                "new (MERGE)",
            ),
            (
                top + 2,
                f"Customer#{top + 2:09d}",
                "2 Replica Road",
                7,
                "17-555-000-0002",
                2000,
                "MACHINERY",
                "new (MERGE)",
            ),
        ],
        SCHEMAS["customer"].replace("DECIMAL(15,2)", "INT"),
    ).withColumn("c_acctbal", F.col("c_acctbal").cast("decimal(15,2)"))
    (
        DeltaTable.forPath(demo.spark, path)
        .alias("t")
        .merge(changed.unionByName(new).alias("s"), "t.c_custkey = s.c_custkey")
        .whenMatchedUpdate(set={"c_acctbal": "s.c_acctbal"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    demo.record(n, "MERGE upsert", "customer")
    return "MERGE customer (10 updated, 2 inserted)"


def add_note_column(demo: Demo, n: int) -> str:
    """ALTER TABLE orders ADD COLUMNS (o_note STRING); RF1 fills it from now on."""
    demo.spark.sql(f"ALTER TABLE {sql_path(demo.master_path('orders'))} ADD COLUMNS (o_note STRING)")
    demo.record(n, "ALTER ADD COLUMNS", "orders")
    demo.has_note = True
    return "ALTER orders ADD COLUMNS (o_note)"


def note_old_orders(demo: Demo, n: int) -> str:
    """An UPDATE filling the new column on rows that existed before the ALTER."""
    demo.spark.sql(
        f"UPDATE {sql_path(demo.master_path('orders'))} SET o_note = 'reviewed' WHERE o_orderkey BETWEEN 1000 AND 1100"
    )
    demo.record(n, "UPDATE o_note", "orders")
    return "UPDATE o_note of old orders"


def refresh_stream(demo: Demo) -> None:
    """Run the refresh sets with the extra transactions mixed in."""
    merge_set = max(1, demo.sets // 3)
    alter_set = min(demo.sets, demo.sets // 2 + 1)
    update_sets = {n for n in range(1, demo.sets + 1) if n % 3 == 2}
    print(
        f"\n== Refresh stream: {demo.sets} sets (UPDATEs in sets {sorted(update_sets)}, "
        f"MERGE in set {merge_set}, ALTER in set {alter_set})"
    )
    t_all = time.perf_counter()
    for n in range(1, demo.sets + 1):
        t0 = time.perf_counter()
        before = len(demo.txns)
        steps = []
        if n == alter_set:
            steps.append(add_note_column(demo, n))
        steps.append(rf1(demo, n))
        if n in update_sets:
            steps.append(updates(demo, n))
        if n == alter_set:
            steps.append(note_old_orders(demo, n))
        if n == merge_set:
            steps.append(merge_customers(demo, n))
        steps.append(rf2(demo, n))
        print(
            f"  set {n:>2}: {len(demo.txns) - before} txns in {time.perf_counter() - t0:4.1f} s, "
            f"last committed {hms(demo.txns[-1].committed)}: {'; '.join(steps)}"
        )
    demo.timings["stream"] = time.perf_counter() - t_all
    print(f"  {len(demo.txns)} transactions in {demo.timings['stream']:.1f} s")


# ----------------------------------------------------------------------------- reference mapping


@dataclass
class Published:
    """What the master published: every transaction record with its batch's publish time."""

    records: list[tuple[wlc_batch.TxnRecord, datetime]]
    snapshot: dict[str, int]

    def versions(self, keep) -> dict[str, int | None]:
        """Per table, the master version after the last record ``keep(rec)`` accepts
        (the snapshot version when none; None when the table was dropped)."""
        refs: dict[str, int | None] = dict(self.snapshot)
        for rec, _ in self.records:
            if keep(rec):
                refs[rec.table] = None if rec.ddl == "drop" else rec.version
        return refs

    def at_txn(self, txn: int) -> dict[str, int | None]:
        return self.versions(lambda r: r.txn <= txn)

    def at_time(self, instant: datetime) -> dict[str, int | None]:
        return self.versions(lambda r: r.time <= instant)

    def count_at_time(self, instant: datetime) -> int:
        return sum(1 for r, _ in self.records if r.time <= instant)


def published(demo: Demo) -> Published:
    m = demo.master
    records = []
    store = LogStore(m.storage, m.path, m.logs, MASTER)
    for batch in store.batches():
        manifest = store.manifest(batch)
        records += [(rec, manifest.created) for rec in manifest.txns]
    records.sort(key=lambda x: x[0].txn)
    snap = wlc_snapshot.read(m.storage, m.config.snapshot)
    return Published(records, {name: c.version for name, c in snap.tables.items()})


# ----------------------------------------------------------------------------- verification


def compare(
    demo: Demo,
    title: str,
    replica: "wlr.Replica",
    refs: dict[str, int | None],
    expect: dict[str, tuple[list[str], int, int]] | None = None,
) -> bool:
    """Compare every table of ``replica`` with the master at ``refs`` (or precomputed ``expect``)."""
    print(f"\n{title}")
    print(f"  {'table':<13} {'master ver':>10} {'master rows':>12} {'replica rows':>13}  checksum")
    good = True
    for table in TABLES:
        name = qualified(table)
        version = refs.get(name)
        present = os.path.isdir(os.path.join(demo.dbfarm, replica.name, SCHEMA, table, "_delta_log"))
        if expect and name in expect:
            cols, m_rows, m_sum = expect[name]
        elif version is None:
            cols, m_rows, m_sum = None, None, None
        else:
            cols, m_rows, m_sum = demo.master_checksum(table, version)
        if cols is None or not present:
            same = cols is None and not present
            r_rows = "-" if not present else replica.table(name).count()
            print(
                f"  {name:<13} {'-':>10} {'(absent)' if cols is None else m_rows:>12} "
                f"{'(absent)' if not present else r_rows:>13}  {'match' if same else 'MISMATCH'}"
            )
            good &= same
            continue
        rdf = replica.table(name)
        if sorted(rdf.columns) != sorted(cols):
            print(
                f"  {name:<13} {version if version is not None else '':>10} {m_rows:>12,} {'?':>13}  "
                f"MISMATCH: columns {rdf.columns} != master {cols}"
            )
            good = False
            continue
        r_rows, r_sum = checksum(rdf, cols)
        same = (r_rows, r_sum) == (m_rows, m_sum)
        good &= same
        print(
            f"  {name:<13} {version if version is not None else 'pre-drop':>10} {m_rows:>12,} {r_rows:>13,}  "
            f"{'match' if same else 'MISMATCH'}  ({m_sum % 10**12:012d}{'' if same else f' vs {r_sum % 10**12:012d}'})"
        )
    print(f"  => {'OK' if good else 'MISMATCH'}")
    demo.ok &= good
    return good


def point_replica(demo: Demo, name: str, until, collapse: bool = True) -> "wlr.Replica":
    """Make replica ``name`` up to ``until`` (a separate wlr.Replica: the follower keeps following).

    ``collapse=False`` replays serially (one replica commit per master transaction)."""
    t0 = time.perf_counter()
    rep = wlr.Replica(MASTER, replica=name, dbfarm=demo.dbfarm).replicate(until=until, collapse=collapse)
    elapsed = time.perf_counter() - t0
    applied = rep.tick() + 1
    demo.replay.append((name, applied, elapsed))
    shown = until.isoformat() if isinstance(until, datetime) else repr(until)
    how = "" if collapse else ", collapse=False"
    print(
        f"\n  wlr.Replica({MASTER!r}, replica={name!r}).replicate(until={shown}{how}): {applied} txns up to txn "
        f"{rep.tick()} in {elapsed:.1f} s ({elapsed / max(applied, 1):.2f} s/txn, snapshot copy included)"
    )
    return rep


def wait_for(demo: Demo, what: str, done) -> float:
    """Poll ``done()`` until it is true; fail on a follower error or after WAIT_SECONDS."""
    t0 = time.perf_counter()
    deadline = time.monotonic() + WAIT_SECONDS
    while not done():
        err = demo.follower.status()["error"]
        if err:
            raise RuntimeError(f"follower {FOLLOWER} failed while waiting for {what}: {err}")
        if not demo.follower.following():
            raise RuntimeError(f"follower {FOLLOWER} stopped following while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached within {WAIT_SECONDS} s (follower at txn {demo.follower.tick()})")
        time.sleep(0.25)
    return time.perf_counter() - t0


def verify_end(demo: Demo) -> tuple[int, Published]:
    """(c) flush, wait for the follower to reach wlc.tick(), compare with the master's last versions."""
    last = wlc.flush()
    tick = wlc.tick()
    waited = wait_for(demo, f"follower at txn {tick}", lambda: demo.follower.tick() >= tick)
    pub = published(demo)
    print(
        f"\n== (c) End of stream: wlc.flush() -> txn {last}, wlc.tick() = {tick}; "
        f"follower caught up {waited:.1f} s after the flush"
    )
    if len(pub.records) != len(demo.txns):
        print(f"  MISMATCH: the master published {len(pub.records)} transactions, the demo ran {len(demo.txns)}")
        demo.ok = False
    compare(
        demo,
        f"(c) follower {FOLLOWER} at txn {demo.follower.tick()} vs master at txn {tick}",
        demo.follower,
        pub.at_txn(tick),
    )
    return tick, pub


def verify_txn(demo: Demo, pub: Published, tick: int) -> None:
    """(a) replica up to the transaction id in the middle of the stream."""
    n = tick // 2
    rec = pub.records[n][0]
    print(f"\n== (a) Mid-stream transaction: until={n} ({rec.operation} on {rec.table}, committed {hms(rec.time)})")
    rep = point_replica(demo, AT_TXN, n)
    compare(demo, f"(a) {AT_TXN} vs master at txn {n}", rep, pub.at_txn(n))
    rep.close()
    # the same point replayed serially, one replica commit per master transaction
    serial = point_replica(demo, AT_TXN + "_serial", n, collapse=False)
    compare(demo, f"(a) {AT_TXN}_serial vs master at txn {n}", serial, pub.at_txn(n))
    serial.close()
    (_, _, grouped_s), (_, _, serial_s) = demo.replay[-2:]
    print(f"  grouped replay {grouped_s:.1f} s, serial replay {serial_s:.1f} s: {serial_s / grouped_s:.1f}x faster")


def verify_time(demo: Demo, pub: Published) -> None:
    """(b) replica up to an instant between two transactions (60% into the stream, after the ALTER)."""
    k = min(len(demo.txns) - 2, (len(demo.txns) * 3) // 5)
    instant = demo.txns[k].committed
    nxt = demo.txns[k + 1]
    print(
        f"\n== (b) Mid-stream instant: until={instant.isoformat()} (just after demo txn #{k}, "
        f"set {demo.txns[k].set_no} {demo.txns[k].label} on {demo.txns[k].table}; the next, "
        f"{nxt.label} on {nxt.table}, committed at {hms(nxt.committed)})"
    )
    covered = pub.count_at_time(instant)
    if covered != k + 1:
        print(f"  MISMATCH: the manifests put {covered} transactions at or before that instant, expected {k + 1}")
        demo.ok = False
    rep = point_replica(demo, AT_TIME, instant)
    if rep.tick() != covered - 1:
        print(f"  MISMATCH: replica stopped at txn {rep.tick()}, expected {covered - 1}")
        demo.ok = False
    compare(demo, f"(b) {AT_TIME} vs master at {hms(instant)} ({covered} txns)", rep, pub.at_time(instant))
    rep.close()


def drop_folder(demo: Demo, path: str) -> None:
    """DROP TABLE by mistake: the table's folder is removed, file by file, while capture runs."""
    shutil.rmtree(path)


def drop_and_recover(demo: Demo, end_tick: int, pub: Published) -> None:
    """Drop orders on the master by mistake, replicate the drop, recover it with a PITR replica."""
    print("\n== Mistake: DROP TABLE orders on the master (its folder is removed)")
    wlc.flush()
    if wlc.tick() != end_tick:
        print(f"  MISMATCH: the master logged txns after the end of the stream ({wlc.tick()} != {end_tick})")
        demo.ok = False
    # the master's last state before the drop: what the recovered replica must hold
    expect = {}
    for table in TABLES:
        version = pub.at_txn(end_tick)[qualified(table)]
        expect[qualified(table)] = demo.master_checksum(table, version)
    orders = demo.spark.read.format("delta").load(demo.master_path("orders"))
    expect["sys.orders"] = (orders.columns, *checksum(orders, orders.columns))
    before_drop = utcnow()
    drop_folder(demo, demo.master_path("orders"))
    print(f"  instant before the drop: {before_drop.isoformat()}; orders had {expect['sys.orders'][1]:,} rows")
    drop_txn = wlc.flush()
    gone = os.path.join(demo.dbfarm, FOLLOWER, SCHEMA, "orders")
    waited = wait_for(
        demo, "follower to apply the drop", lambda: demo.follower.tick() >= drop_txn and not os.path.exists(gone)
    )
    print(
        f"  wlc.flush() -> drop logged as txn {drop_txn}; follower applied it after {waited:.1f} s "
        f"(its sys.orders is gone: {not os.path.exists(gone)})"
    )
    if drop_txn != end_tick + 1:
        print(f"  MISMATCH: expected the drop as txn {end_tick + 1}")
        demo.ok = False
    rep = point_replica(demo, PITR, before_drop)
    compare(
        demo,
        f"Point-in-time recovery: {PITR} at {hms(before_drop)} vs master just before the drop",
        rep,
        pub.at_txn(end_tick),
        expect=expect,
    )
    rep.close()


# ----------------------------------------------------------------------------- report


def report_timings(demo: Demo, pub: Published, end_tick: int, t_start: float) -> None:
    lags = [(created - rec.time).total_seconds() for rec, created in pub.records if rec.txn <= end_tick]
    print("\n== Timings")
    print(f"  load (8 tables)                  {demo.timings['load']:8.1f} s")
    print(f"  master snapshot                  {demo.timings['master']:8.1f} s")
    print(
        f"  refresh stream ({len(demo.txns)} txns)         {demo.timings['stream']:8.1f} s "
        f"({demo.timings['stream'] / max(len(demo.txns), 1):.2f} s/txn)"
    )
    if lags:
        print(
            f"  capture lag (commit -> published, beat {demo.beat:g} s, {len(lags)} stream txns): "
            f"mean {statistics.mean(lags):.2f} s, max {max(lags):.2f} s"
        )
    for name, applied, elapsed in demo.replay:
        print(f"  replay {name:<13} {applied:3d} txns  {elapsed:8.1f} s ({elapsed / max(applied, 1):.2f} s/txn)")
    print(f"  total                            {time.perf_counter() - t_start:8.1f} s")


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dbfarm", default="./dbfarm", help="folder holding the databases (default %(default)s)")
    parser.add_argument("--sets", type=int, default=12, help="TPC-H refresh sets to run (default %(default)s)")
    parser.add_argument("--beat", type=float, default=1.0, help="master heartbeat in seconds (default %(default)s)")
    args = parser.parse_args(argv)
    if args.sets < 1:
        parser.error("--sets must be at least 1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    t_start = time.perf_counter()

    demo = prepare(args)
    try:
        load(demo)
        start_master(demo)
        start_follower(demo)
        refresh_stream(demo)
        end_tick, pub = verify_end(demo)
        verify_txn(demo, pub, end_tick)
        verify_time(demo, pub)
        drop_and_recover(demo, end_tick, pub)
        report_timings(demo, pub, end_tick, t_start)
    finally:
        wlr.stop()
        if demo.master is not None:
            demo.master.close()
    if not demo.ok:
        print("\nDEMO FAILED: replicas differ from the master (see MISMATCH above)")
        return 1
    print("\nDEMO OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
