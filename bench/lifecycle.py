"""Benchmark: the log's life cycle. Recovering a dropped table, today's way against snapshots
and compacted levels; log size before and after prune; compaction ratios.

``make bench-lifecycle`` runs it (one SparkSession, 2 cores are enough). Two workloads:

1. A MusicBrainz-style edit stream (its replication packets' example): ``mb.editor`` (keyed), ``mb.artist`` (keyed)
   and ``mb.edit`` (unkeyed, one row per edit). Each edit is four master transactions:
   the editor's ``edits_pending`` +1, the edit applied to an artist, the edit logged, the
   editor's ``edits_pending`` -1. Capture runs at a 2 s beat (``--beat``) with automatic snapshots
   (``master.snapshot_interval``) and automatic compaction (level 1 every ``--level1``
   level-0 batches, level 2 every ``--level2`` level-1 batches) while the edits are written.
   Then ``mb.artist`` is dropped by mistake, and recovered to the instant before the drop:
   * level 0:  ``wlr.replicate(until=<instant>, snapshot=-1, compacted=False)``, from the
     first snapshot through every level-0 batch (what wlr did before snapshots and levels);
   * levels:   ``wlr.replicate(until=<instant>)``, from the newest snapshot at or before the
     instant, through compacted batches, then level 0 up to the instant.
   Both recovered tables are checked equal to the master's table before the drop. Then the
   logs are pruned with retention level 0: 1 day, level 1: 30 days, level 2 and snapshots:
   1 year, counted from two days after the last edit, and the log size is reported before
   and after.
2. The TPC-H refresh stream of ``bench/catchup.py`` (RF1/RF2 on ``orders`` and
   ``lineitem``, hot-key updates, MERGEs, an unkeyed table) captured at a 1 s beat, then
   compacted into level 1.

For each, the compaction ratio: change rows and bytes of the level-0 batches a compacted
batch merges, against the compacted batch's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import wlc  # noqa: E402
import wlr  # noqa: E402
from bench.catchup import Bench, checksum  # noqa: E402
from wlc.lifecycle import Lifecycle  # noqa: E402
from wlcore import batch as batchfmt  # noqa: E402
from wlcore.logstore import LogStore  # noqa: E402
from wlcore.settings import Every, choose_config, config_file  # noqa: E402
from wlcore.snapshots import list_snapshots  # noqa: E402
from wlcore.storage import Storage  # noqa: E402


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(path) for f in fs)


def compaction_ratio(storage: Storage, logs: str, db: str, level: int) -> tuple[int, int, int, int, int]:
    """``(compacted batches, rows before, rows after, bytes before, bytes after)`` over every
    batch of ``level`` (before: the level-0 batches each one merges)."""
    store = LogStore(storage, os.path.dirname(logs), logs, db)
    level0 = {b.number: b.path for b in store.batches()}
    n = rows_b = rows_a = bytes_b = bytes_a = 0
    for c in store.compacted():
        lv, first, last, path = c.level, c.first, c.last, c.path
        if lv != level or any(b not in level0 for b in range(first, last + 1)):
            continue
        n += 1
        m = batchfmt.read_manifest(storage, path)
        rows_a += sum(sum(t.counts.values()) for t in m.txns)
        bytes_a += sum(f.size for f in m.files.values())
        for b in range(first, last + 1):
            mb = batchfmt.read_manifest(storage, level0[b])
            rows_b += sum(sum(t.counts.values()) for t in mb.txns)
            bytes_b += sum(f.size for f in mb.files.values())
    return n, rows_b, rows_a, bytes_b, bytes_a


def ratio_line(name: str, figures: tuple[int, int, int, int, int]) -> str:
    n, rb, ra, bb, ba = figures
    return (
        f"{name:<34} {n:>4} batches  rows {rb:>9,} -> {ra:>9,} ({rb / max(ra, 1):5.1f}x)  "
        f"bytes {bb / 1e6:8.2f} MB -> {ba / 1e6:7.2f} MB ({bb / max(ba, 1):5.1f}x)"
    )


def edit_stream(args, spark, farm: str) -> list[str]:
    """Part 1; returns the report lines."""
    db = "mb"
    m = wlc.master(db, dbfarm=farm)
    wlc.beat(args.beat)
    ref = {t: f"delta.`{m.table_path('mb.' + t)}`" for t in ("editor", "artist", "edit")}
    spark.sql(
        f"CREATE TABLE {ref['editor']} (id BIGINT, name STRING, edits_pending INT) USING delta "
        "TBLPROPERTIES ('wlc.key' = 'id')"
    )
    spark.sql(
        f"CREATE TABLE {ref['artist']} (id BIGINT, name STRING, comment STRING, last_edit BIGINT) USING delta "
        "TBLPROPERTIES ('wlc.key' = 'id')"
    )
    spark.sql(f"CREATE TABLE {ref['edit']} (edit BIGINT, editor BIGINT, artist BIGINT, status STRING) USING delta")
    (
        spark.range(500)
        .selectExpr("id", "concat('editor ', id) AS name", "0 AS edits_pending")
        .write.format("delta")
        .mode("append")
        .save(m.table_path("mb.editor"))
    )
    (
        spark.range(5_000)
        .selectExpr("id", "concat('artist ', id) AS name", "'' AS comment", "CAST(-1 AS BIGINT) AS last_edit")
        .write.format("delta")
        .mode("append")
        .save(m.table_path("mb.artist"))
    )
    t0 = time.perf_counter()
    for i in range(args.edits):
        editor, artist = (i * 7) % 500, (i * 13) % 400  # 400 artists edited again and again
        spark.sql(f"UPDATE {ref['editor']} SET edits_pending = edits_pending + 1 WHERE id = {editor}")
        spark.sql(f"UPDATE {ref['artist']} SET comment = 'edit {i}', last_edit = {i} WHERE id = {artist}")
        spark.sql(f"INSERT INTO {ref['edit']} VALUES ({i}, {editor}, {artist}, 'applied')")
        spark.sql(f"UPDATE {ref['editor']} SET edits_pending = edits_pending - 1 WHERE id = {editor}")
        if i % 25 == 24:
            print(
                f"\r  edits: {i + 1}/{args.edits}, master transaction {wlc.last_logged()}, {time.perf_counter() - t0:.0f} s",
                end="",
                flush=True,
            )
    print()
    written = time.perf_counter() - t0
    before_drop = wlc.flush()
    # let the background life cycle catch up with what was published
    deadline = time.monotonic() + 600
    cycle = Lifecycle(m.storage, m.path, db)
    while time.monotonic() < deadline:
        made = cycle.compact(spark, {1: Every(args.level1, "batches"), 2: Every(args.level2, "batches")})
        if not made:
            break
    artist_rows = spark.read.format("delta").load(m.table_path("mb.artist"))
    expected = checksum(artist_rows, artist_rows.columns)
    target = m.clock()
    shutil.rmtree(os.path.join(m.path, "mb", "artist"))  # DROP by mistake
    dropped = wlc.flush()
    m.close()
    storage = Storage.of(farm)
    logs = os.path.join(farm, db, "wlc_logs")
    store = LogStore(storage, os.path.join(farm, db), logs, db)
    snaps = list_snapshots(storage, os.path.join(farm, db), "", store)
    n0 = len(store.batches())
    lv = [c.level for c in store.compacted()]
    print(
        f"  {dropped + 1} transactions ({args.edits} edits, written in {written:.0f} s), {n0} level-0 batches, {lv.count(1)} level-1, "
        f"{lv.count(2)} level-2, snapshots at {[s.txn for s in snaps]}; drop is transaction {dropped}"
    )
    times = {}
    for name, kwargs in (
        ("level 0 from the first snapshot", {"snapshot": -1, "compacted": False}),
        ("nearest snapshot + compacted levels", {}),
    ):
        replica = "r_" + name.split()[0]
        t = time.perf_counter()
        rep = wlr.replicate(db, until=target.isoformat(), replica=replica, dbfarm=farm, **kwargs)
        times[name] = time.perf_counter() - t
        got = rep.table("mb.artist")
        ok = checksum(got, got.columns) == expected
        start = [ln for ln in open(os.path.join(farm, replica, "wlr.log")) if "started" in ln][0].split(" ", 1)[1]
        print(
            f"  {name}: {times[name]:.1f} s, {'equal' if ok else 'NOT EQUAL'} to mb.artist before the drop; "
            f"{start.strip()}"
        )
        if not ok:
            raise SystemExit(f"{name}: the recovered table differs")
    ratios = [
        ratio_line("edit stream, level 1", compaction_ratio(storage, logs, db, 1)),
        ratio_line("edit stream, level 2", compaction_ratio(storage, logs, db, 2)),
    ]
    sizes = (folder_bytes(logs), folder_bytes(os.path.join(farm, db, "wlc_snapshot")))
    day = 86400
    keep = {"level0": Every(day), "level1": Every(30 * day), "level2": Every(365 * day), "snapshots": Every(365 * day)}
    report = Lifecycle(storage, os.path.join(farm, db), db).prune(now=target + timedelta(days=2), keep=keep)
    after = (folder_bytes(logs), folder_bytes(os.path.join(farm, db, "wlc_snapshot")))
    for line in report.lines():
        if not line.startswith("  deleted"):
            print("  prune: " + line)
    a, b = times.values()
    return [
        f"recovery of mb.artist to {target.isoformat()} (transaction {before_drop}, before the drop):",
        f"  level 0 from the first snapshot      {a:7.1f} s",
        f"  nearest snapshot + compacted levels  {b:7.1f} s  ({a / b:.1f}x faster)",
        f"log size: logs {sizes[0] / 1e6:.1f} MB + snapshots {sizes[1] / 1e6:.1f} MB before prune, "
        f"{after[0] / 1e6:.1f} MB + {after[1] / 1e6:.1f} MB after ({len(report.deleted)} folders deleted)",
        *ratios,
    ]


def tpch_stream(args, spark) -> list[str]:
    """Part 2; returns the report lines."""
    b = Bench(argparse.Namespace(txns=args.tpch_txns))
    b.load()
    m = wlc.master("bench", dbfarm=b.farm)
    wlc.beat(1)
    b.backlog(args.tpch_txns)
    wlc.flush()
    m.compact(level1=f"{args.level1} batches", level2=f"{args.level2} batches")
    m.close()
    storage = Storage.of(b.farm)
    logs = os.path.join(b.farm, "bench", "wlc_logs")
    store = LogStore(storage, os.path.join(b.farm, "bench"), logs, "bench")
    lv = [c.level for c in store.compacted()]
    print(
        f"  TPC-H stream: {wlc.tick() + 1} transactions, {len(store.batches())} "
        f"level-0 batches, {lv.count(1)} level-1, {lv.count(2)} level-2"
    )
    out = [
        ratio_line("TPC-H refresh stream, level 1", compaction_ratio(storage, logs, "bench", 1)),
        ratio_line("TPC-H refresh stream, level 2", compaction_ratio(storage, logs, "bench", 2)),
    ]
    if not args.keep:
        shutil.rmtree(b.farm, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=400, help="edits in the edit stream (4 transactions each)")
    ap.add_argument("--beat", type=float, default=2.0, help="the master's beat in seconds (default 2)")
    ap.add_argument("--snapshot-every", type=int, default=500, help="master.snapshot_interval in transactions")
    ap.add_argument("--level1", type=int, default=8, help="level-0 batches a level-1 batch merges")
    ap.add_argument("--level2", type=int, default=6, help="level-1 batches a level-2 batch merges")
    ap.add_argument("--tpch-txns", type=int, default=150, help="transactions of the TPC-H refresh stream")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dbfarms")
    args = ap.parse_args()
    farm = tempfile.mkdtemp(prefix="wlc-lifecycle-")
    base = config_file()  # the file chosen so far (WLC_CONFIG), if any
    cfg = (yaml.safe_load(base.read_text()) or {}) if base is not None else {}
    cfg.setdefault("master", {}).update(
        {
            "snapshot_interval": f"{args.snapshot_every} transactions",
            "compact": {"auto": True, "level1": f"{args.level1} batches", "level2": f"{args.level2} batches"},
        }
    )
    cfg_path = os.path.join(farm, "lifecycle.yaml")
    with open(cfg_path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    choose_config(cfg_path)  # this process's settings from now on (nothing written to os.environ)
    spark = wlc.spark_session()
    print(f"== edit stream in {farm}")
    lines = edit_stream(args, spark, farm)
    print("== TPC-H refresh stream")
    lines += tpch_stream(args, spark)
    print("\n".join(["", "== life cycle"] + lines))
    if not args.keep:
        shutil.rmtree(farm, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
