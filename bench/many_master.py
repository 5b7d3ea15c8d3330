"""The master of the ``many`` workload (``bench/scale_many.py``), written with delta-rs (the
``deltalake`` package, a writer engine the product captures): many keyed tables, a few large
and busy (``busy.t00``...), most small and quiet (``quiet.t000``...), and a backlog of small
transactions over them.

Every table has the same columns (``k`` BIGINT the key, ``grp``, ``name``, ``amount``, ``n``,
``note``), the change data feed on from its first commit and ``wlc.key`` = ``k`` (set by a
second commit: delta-rs refuses a property it does not know at creation). A large table is
loaded in key-ordered chunks, one file each, so a write of a few keys rewrites one chunk.

Every backlog statement is one Delta version that changes rows and that the change feed
describes (delta-rs writes ``_change_data`` files for UPDATE, DELETE and MERGE), so capture
carries each as change rows, never as the table's image: appends of new keys, UPDATEs of a
few keys (on busy tables mostly the same hot keys again and again), DELETEs of a few keys,
MERGEs (some keys updated, some inserted). A share of the transactions (``hot_share``) goes
to the busy tables, the rest to the quiet ones with weights 1/sqrt(rank) (a few quiet tables
get tens of transactions, most a handful, some none).
"""

from __future__ import annotations

import os
import random
import time
import warnings
from collections import Counter

import pyarrow as pa

DB = "many"  # the master database
OPS = (("append", 0.3), ("update", 0.4), ("delete", 0.1), ("merge", 0.2))
HOT_KEYS = 20  # keys of a busy table updated again and again
CHUNK = 20_000  # rows of a large table's initial chunk (one file each)


def table_names(tables: int, busy: int) -> list[str]:
    """``busy.t00``... then ``quiet.t000``...: ``tables`` names, the first ``busy`` of them busy."""
    return [f"busy.t{i:02d}" for i in range(busy)] + [f"quiet.t{i:03d}" for i in range(tables - busy)]


def rows(keys: list[int], note: str) -> pa.Table:
    """The rows of ``keys`` (every column a function of the key, ``note`` in ``note``)."""
    n = len(keys)
    return pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "grp": pa.array([k % 17 for k in keys], pa.int32()),
            "name": pa.array([f"name {k}" for k in keys]),
            "amount": pa.array([k * 0.25 for k in keys], pa.float64()),
            "n": pa.array([0] * n, pa.int64()),
            "note": pa.array([note] * n),
        }
    )


class Workload:
    """The tables of master folder ``master_path`` and the statements of their backlog.

    Args:
        master_path (str): the master database's folder (tables at ``<path>/<schema>/<table>``).
        tables (int): tables in all.
        busy (int): large, busy tables among them.
        rows (int): rows of a quiet table.
        big_rows (int): rows of a busy table.
        seed (int): the random generator's seed (the same sizes write the same backlog).
    """

    def __init__(self, master_path: str, tables: int, busy: int, rows: int, big_rows: int, seed: int = 7):
        self.path = master_path
        self.names = table_names(tables, busy)
        self.busy = self.names[:busy]
        self.quiet = self.names[busy:]
        self.size = {t: (big_rows if t in self.busy else rows) for t in self.names}
        self.rng = random.Random(seed)
        self.live: dict[str, list[int]] = {}  # keys on the table (a list: random picks)
        self.next_key: dict[str, int] = {}
        self.handles: dict = {}
        self.ops: Counter = Counter()

    def table_path(self, table: str) -> str:
        return os.path.join(self.path, *table.split("."))

    def create(self) -> None:
        """Create every table with its rows: change feed on, ``wlc.key`` = ``k``."""
        import deltalake

        for t in self.names:
            n = self.size[t]
            first = min(n, CHUNK)
            deltalake.write_deltalake(
                self.table_path(t),
                rows(list(range(first)), "load"),
                configuration={"delta.enableChangeDataFeed": "true"},
            )
            dt = deltalake.DeltaTable(self.table_path(t))
            for lo in range(first, n, CHUNK):
                deltalake.write_deltalake(dt, rows(list(range(lo, min(n, lo + CHUNK))), "load"), mode="append")
            dt.alter.set_table_properties({"wlc.key": "k"}, raise_if_not_exists=False)
            self.handles[t] = dt
            self.live[t] = list(range(n))
            self.next_key[t] = n

    def _pick(self, t: str, count: int) -> list[int]:
        live = self.live[t]
        # busy tables: mostly their first keys (deletes spare them), the same rows again and again
        span = min(HOT_KEYS, len(live)) if t in self.busy and self.rng.random() < 0.7 else len(live)
        return sorted({live[self.rng.randrange(span)] for _ in range(count)})

    def _new(self, t: str, count: int) -> list[int]:
        k = self.next_key[t]
        self.next_key[t] = k + count
        return list(range(k, k + count))

    def statement(self, t: str, i: int) -> str:
        """Write backlog statement ``i`` on table ``t`` (one Delta version); returns its kind."""
        import deltalake

        dt = self.handles[t]
        big = t in self.busy
        kind = self.rng.choices([o for o, _w in OPS], [w for _o, w in OPS])[0]
        if len(self.live[t]) < 50 and kind == "delete":
            kind = "append"
        if kind == "append":
            keys = self._new(t, self.rng.randint(20, 200) if big else self.rng.randint(1, 10))
            deltalake.write_deltalake(dt, rows(keys, f"a{i}"), mode="append")
            self.live[t].extend(keys)
        elif kind == "update":
            keys = self._pick(t, self.rng.randint(1, 10))
            dt.update(predicate=f"k IN ({', '.join(map(str, keys))})", updates={"n": "n + 1", "note": f"'u{i}'"})
        elif kind == "delete":
            keys = self._pick(t, self.rng.randint(1, 5))
            if big:  # the hot keys stay: delete elsewhere
                keys = sorted({self.live[t][self.rng.randrange(HOT_KEYS, len(self.live[t]))] for _ in keys})
            dt.delete(f"k IN ({', '.join(map(str, keys))})")
            gone = set(keys)
            self.live[t] = [k for k in self.live[t] if k not in gone]
        else:
            old = self._pick(t, self.rng.randint(1, 5))
            new = self._new(t, self.rng.randint(1, 5))
            src = rows(old + new, f"m{i}")
            (
                dt.merge(src, "t.k = s.k", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            self.live[t].extend(new)
        self.ops[kind] += 1
        return kind

    def backlog(self, txns: int, hot_share: float, progress: bool = True) -> Counter:
        """Write ``txns`` statements: a share ``hot_share`` on the busy tables (evenly), the rest on
        the quiet ones (weights 1/sqrt(rank)). Returns the statements written per table."""
        weights = [1 / (r + 1) ** 0.5 for r in range(len(self.quiet))]
        per_table: Counter = Counter()
        for i in range(txns):
            if self.busy and (not self.quiet or self.rng.random() < hot_share):
                t = self.busy[self.rng.randrange(len(self.busy))]
            else:
                t = self.rng.choices(self.quiet, weights)[0]
            self.statement(t, i)
            per_table[t] += 1
            if progress and (i + 1) % 100 == 0:
                print(f"\r  many: backlog {i + 1}/{txns} statements (delta-rs)", end="", flush=True)
        if progress:
            print()
        return per_table


# ----------------------------------------------------------------------------- set-up (a process of its own)
def session(cfg: str):
    from wlcore.settings import choose_config

    choose_config(cfg)  # this process's settings (nothing written to os.environ)
    import wlc

    return wlc.spark_session()


def build_master(farm: str, cfg: str, sz: dict) -> dict:
    """The master, its ``base`` replica before the backlog, the backlog captured; what the methods need."""
    t0 = time.perf_counter()
    spark = session(cfg)
    import wlc
    import wlr
    from bench.methods import checksum, in_threads
    from wlcore.logstore import LogStore
    from wlcore.settings import settings
    from wlcore.storage import Storage

    m = wlc.master(DB, dbfarm=farm)
    wlc.beat(3600)
    w = Workload(m.path, sz["tables"], sz["busy"], sz["rows"], sz["big_rows"])
    w.create()
    start = wlc.flush()
    made = time.perf_counter()
    if sz.get("replay", True):  # the replica the methods start from
        wlr.replicate(DB, until=start, replica="base", dbfarm=farm).close()
    based = time.perf_counter()
    m.close()  # capture catches up after the backlog: the methods measure replay, not capture
    per_table = w.backlog(sz["txns"], sz["hot_share"])
    written = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "already in master mode": capture resumes, as meant
        m = wlc.master(DB, dbfarm=farm)
    end = wlc.flush()
    m.close()
    captured = time.perf_counter()
    storage = Storage.of(farm)
    logs = os.path.join(farm, DB, "wlc_logs")
    store = LogStore(storage, os.path.dirname(logs), logs, DB)
    recs = [
        (t.txn, t.table, t.version, sum(t.counts.values()), t.change)
        for b in store.batches()
        for t in store.manifest(b).txns
    ]
    cols = {t: [c for c in spark.read.format("delta").load(w.table_path(t)).columns] for t in w.names}
    jobs = {t: lambda t=t: checksum(spark.read.format("delta").load(w.table_path(t)), cols[t]) for t in w.names}
    expected = in_threads(spark, jobs, settings().replica.parallelism, "check")
    return {
        "tables": w.names,
        "start": start,
        "end": end,
        "recs": recs,
        "cols": cols,
        "expected": expected,
        "ops": dict(w.ops),
        "per_table": dict(per_table),
        "batches": len(store.batches()),
        "times": {
            "Spark started, tables made and captured": made - t0,
            "base replica": based - made,
            "backlog written (delta-rs)": written - based,
            "backlog captured": captured - written,
        },
    }


def versions(recs, upto: int) -> dict[str, int]:
    """Each table's master Delta version at transaction ``upto``."""
    out: dict[str, int] = {}
    for txn, table, version, _rows, _change in recs:
        if txn <= upto and version is not None:
            out[table] = version
    return out
