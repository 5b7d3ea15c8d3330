"""What ``bench/scale_follow.py`` reads afterwards: the lag of every transaction from both Delta logs
(the master's published batches and each replica table's log, with its replay tags), where the
follower's part of it goes (the segment lines of ``wlr.log``), and the report.

A transaction's lag is the commit time of the replica commit whose *final* replay tag
(``wlr:<dbid>:<first>-<last>``, :func:`wlr.apply.parse_span`) first covers it, minus its master
commit time (``TxnRecord.time``); both follow Delta's time-travel rule (In-Commit Timestamp, else
the commit file's modification time: :func:`wlcore.deltalog.read_commit` with ``file_time``). It is
split into capture's part (master commit to the batch's publication, ``manifest.created``), the
follower's wait (publication to the start of the segment that applies it: noticing the batch, the
round's reading, planning and checks, other tables' segments ahead of it) and the segment itself
(its seconds in ``wlr.log``).
"""

from __future__ import annotations

import math
import os
import re
from datetime import datetime, timezone

from bench.scale_common import Report
from wlcore.batch import read_manifest
from wlcore.deltalog import list_versions, read_commit
from wlcore.logstore import LogStore
from wlcore.state import logs_of, read_master_state
from wlcore.storage import Storage
from wlcore.utc import parse_utc
from wlr.apply import parse_span

_APPLIED = re.compile(r"^(\S+) applied (\S+) transaction (\d+)(?:-(\d+))? \((.*)\) in ([\d.]+) s$")


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``; NaN when empty."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def _ts(dt: datetime) -> float:
    return dt.timestamp()


def analyse(storage: Storage, db_path: str, rep_path: str, db: str, go: float, ended: float) -> dict:
    """Every published transaction with its master commit, publication and replica commit times.

    Returns:
        ``{"txns": [dict(txn, table, time, published, batch, replica, seg_first, seg_last)],
        "commits": [dict(table, version, time, first, last)], "batches": n}``; ``replica`` None when no
        replica commit holds the transaction.
    """
    cfg = read_master_state(storage, db_path)
    dbid, logs = cfg.dbid, logs_of(cfg, db_path)
    txns = []
    batches = [(b.number, b.path) for b in LogStore(storage, db_path, logs, db).batches()]
    for number, path in batches:
        m = read_manifest(storage, path)
        for t in m.txns:
            txns.append(
                {"txn": t.txn, "table": t.table, "time": _ts(t.time), "published": _ts(m.created), "batch": number}
                | {"version": t.version}
            )
    commits, holder = [], {}
    for table in sorted({t["table"] for t in txns}):
        path = os.path.join(rep_path, *table.split("."))
        for v in list_versions(storage, path):
            c = read_commit(storage, path, v, file_time=True)
            span = parse_span(c.user_metadata, dbid)
            if span is None or not span[2]:
                continue
            commits.append(
                {"table": table, "version": v, "time": _ts(c.timestamp), "first": span[0], "last": span[1]}
                | _metrics(c)
            )
    for c in sorted(commits, key=lambda c: c["version"]):
        for t in txns:
            if t["table"] == c["table"] and c["first"] <= t["txn"] <= c["last"] and t["txn"] not in holder:
                holder[t["txn"]] = c
    for t in txns:  # the master's own statement: its operation and Delta's timings
        if t["version"] is not None and go <= t["time"] <= ended + 0.5:
            path = os.path.join(db_path, *t["table"].split("."))
            t["master"] = _metrics(read_commit(storage, path, t["version"], file_time=True))
        c = holder.get(t["txn"])
        t["replica"] = None if c is None else c["time"]
        t["seg"] = None if c is None else (c["table"], c["first"], c["last"])
    return {"txns": txns, "commits": commits, "batches": len(batches)}


def _metrics(c) -> dict:
    """A commit's operation and Delta's own timings (``operationMetrics``: execution, scan, rewrite ms)."""
    m = c.metrics
    return {"operation": c.operation} | {
        k: int(m[k]) for k in ("executionTimeMs", "scanTimeMs", "rewriteTimeMs") if k in m
    }


def _by_operation(title: str, commits: list[dict]) -> str:
    """``title: OP n, Delta's execution p50 x s (scan y, rewrite z); ...`` (NaN: the operation has no timings)."""
    parts = []
    for op in sorted({c["operation"] for c in commits}):
        mine = [c for c in commits if c["operation"] == op]
        ms = {k: [c[k] / 1000 for c in mine if k in c] for k in ("executionTimeMs", "scanTimeMs", "rewriteTimeMs")}
        timing = (
            f", execution p50 {pct(ms['executionTimeMs'], 50):.2f} s (scan {pct(ms['scanTimeMs'], 50):.2f}, "
            f"rewrite {pct(ms['rewriteTimeMs'], 50):.2f})"
            if ms["executionTimeMs"]
            else ""
        )
        parts.append(f"{op} {len(mine)}{timing}")
    return f"{title}: " + "; ".join(parts)


def follower_log(rep_path: str) -> dict[tuple[str, int, int], tuple[float, float, str]]:
    """``{(table, first, last): (logged at, seconds, what)}`` of the ``applied`` lines of ``wlr.log``."""
    out = {}
    path = os.path.join(rep_path, "wlr.log")
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for line in fh:
            m = _APPLIED.match(line.strip())
            if m:
                first = int(m.group(3))
                last = int(m.group(4) or first)
                out[(m.group(2), first, last)] = (_ts(parse_utc(m.group(1))), float(m.group(6)), m.group(5))
    return out


def _busy(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by at least one interval."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0.0)


def _cpu(seconds: float, wall: float, txns: int) -> str:
    return f"{seconds:.1f} s = {seconds / wall:.2f} core, {seconds / max(txns, 1):.2f} s/txn"


def _dist(values: list[float]) -> str:
    return f"p50 {pct(values, 50):.2f} / p95 {pct(values, 95):.2f} / max {max(values, default=math.nan):.2f} s"


def report(**k) -> Report:
    """The workload's report from what :func:`bench.scale_follow.run` measured (keyword arguments)."""
    lag, go, ended, beat = k["lag"], k["go"], k["ended"], k["beat"]
    segs = follower_log(k["rep_path"])
    steady = [t for t in lag["txns"] if go <= t["time"] <= ended + 0.5]
    held = [t for t in steady if t["replica"] is not None]
    missing = len(lag["txns"]) - sum(t["replica"] is not None for t in lag["txns"])
    lags = [t["replica"] - t["time"] for t in held]
    cap = [t["published"] - t["time"] for t in held]
    wait, apply = [], []
    for t in held:
        s = segs.get(t["seg"])
        if s is not None:
            start = t["replica"] - s[1]
            wait.append(start - t["published"])
            apply.append(s[1])
    goal, most = 2 * beat + 3, 2 * beat + 10
    p95, worst = pct(lags, 95), max(lags, default=math.nan)
    wall1, c0, c1, c2 = k["wall1"], k["cpu0"], k["cpu1"], k["cpu2"]
    cpu = {n: c1[n] - c0[n] for n in c1}
    writers = cpu["writer"] + cpu.get("pipeline", 0.0)
    master = writers + cpu["capture"]  # the master database's processes: its writers and capture
    ratio = cpu["follower"] / master if master else math.inf
    alone = cpu["follower"] / cpu["capture"] if cpu["capture"] else math.inf
    wrote = k["wrote"]
    last = max(steady, key=lambda t: t["txn"]) if steady else None
    end_lag = (last["replica"] - last["time"]) if last and last["replica"] else math.nan
    tail = [t["replica"] - t["time"] for t in held if t["time"] >= ended - 30]
    drain_log = max((t["replica"] for t in held), default=math.nan) - ended
    sums = k["sums"]
    bad = [t for t, (a, b) in sums.items() if a != b]
    equal = not bad and not missing and k["drained"]
    ok = {True: "met", False: "MISSED"}
    rows = [
        ("transactions written (steady phase)", len(steady), "", ""),
        ("writer's rate", f"{len(steady) / wall1:.2f} txn/s", "", ""),
        ("lag p50", f"{pct(lags, 50):.2f} s", "", ""),
        ("lag p95", f"{p95:.2f} s", f"<= {goal:g} s", ok[p95 <= goal]),
        ("lag max", f"{worst:.2f} s", f"<= {most:g} s", ok[worst <= most]),
        ("lag of the last transaction written", f"{end_lag:.2f} s", "", ""),
        ("lag max over the last 30 s of writing", f"{max(tail, default=math.nan):.2f} s", "", ""),
        ("drain after the writer stopped (logs)", f"{drain_log:.2f} s", "", ""),
        ("drain (wlr.config tick polled)", f"{k['wall2']:.2f} s", "", ok[k["drained"]]),
        ("CPU writer (Spark)", _cpu(cpu["writer"], wall1, len(steady)), "", ""),
        *(
            [("CPU pipeline (delta-rs)", _cpu(cpu["pipeline"], wall1, len(steady)), "", "")]
            if "pipeline" in cpu
            else []
        ),
        ("CPU capture", _cpu(cpu["capture"], wall1, len(steady)), "", ""),
        ("CPU follower", _cpu(cpu["follower"], wall1, len(steady)), "", ""),
        ("CPU follower / the master's (writers + capture)", f"{ratio:.3f}", "<= 0.10", ok[ratio <= 0.1]),
        ("CPU follower / capture alone", f"{alone:.2f}", "", ""),
        ("machine load (1-minute average, end of writing)", f"{k.get('load', math.nan):.1f}", "", ""),
        ("replica equals the master", "yes" if equal else "NO", "yes", ok[equal]),
    ]
    notes = [
        f"lag = replica commit - master commit, over the {len(held)} transactions committed while writing "
        f"({wall1:.0f} s; {len(steady) - len(held)} of them not on the replica, {missing} in all)",
        f"  capture's part (master commit -> batch published):   {_dist(cap)}",
        f"  follower's wait (published -> its segment started): {_dist(wait)}",
        f"  follower's segment (wlr.log seconds):               {_dist(apply)}",
    ]
    by_writer = {
        "the Spark writer's": [t for t in held if t["table"] != "f.rs"],
        "the delta-rs pipeline's": [t for t in held if t["table"] == "f.rs"],
    }
    for name, mine in by_writer.items():
        if mine:
            notes.append(f"lag of {name} {len(mine)} transactions: {_dist([t['replica'] - t['time'] for t in mine])}")
    notes += _trend(held, go, wall1)
    notes += _delta_timings(steady, lag["commits"], segs, go, ended)
    notes += _follower_lines(segs, held, go, ended, lag)
    notes.append(
        f"drain: capture published the last commit {k['publish_wait']:.2f} s after the writer stopped; "
        f"final tick {k['final_tick']} (published {k['last']}); CPU while draining ({k['wall2']:.1f} s): "
        f"capture {c2['capture'] - c1['capture']:.1f} s, follower {c2['follower'] - c1['follower']:.1f} s"
    )
    for name, groups in (k.get("threads") or {}).items():
        top = sorted(groups.items(), key=lambda kv: -kv[1])[:7]
        gone = cpu[name] - sum(groups.values())
        notes.append(
            f"CPU of {name}'s threads while writing, by name: "
            + ", ".join(f"{g} {v:.1f}" for g, v in top)
            + f"; not sampled {gone:.1f} s"
        )
    idle = k.get("idle") or {}
    if idle:
        notes.append(
            f"idle CPU (nothing written, {idle['seconds']:.0f} s before the writing): capture {idle['capture']:.3f} core, "
            f"follower {idle['follower']:.3f} core, writer {idle['writer']:.3f} core"
        )
    notes.append(
        "writer statements: "
        + ", ".join(f"{op} {n} ({wrote['seconds'][op] / max(n, 1):.2f} s each)" for op, n in wrote["counts"].items())
    )
    piped = k.get("piped")
    if piped:
        notes.append(
            "pipeline commits (delta-rs): "
            + ", ".join(
                f"{op} {n} ({piped['seconds'][op] / max(n, 1):.3f} s each)" for op, n in piped["counts"].items()
            )
        )
    if k.get("busy"):
        notes.append(f"other work: {k['busy']} processes each keeping a core busy while writing")
    if bad:
        notes.append("tables that differ: " + ", ".join(f"{t} master {sums[t][0]} replica {sums[t][1]}" for t in bad))
    if k.get("farm"):
        notes.append(f"kept: {k['farm']} (control/: the processes' output)")
    summary = (
        f"{len(steady)} txns in {k['minutes']:g} min ({len(steady) / wall1:.2f}/s) over {len(k['tables'])} tables; "
        f"lag p50 {pct(lags, 50):.2f} s, p95 {p95:.2f} s, max {max(lags, default=math.nan):.2f} s "
        f"(goals p95 <= {goal:g} s: {ok[p95 <= goal]}, max <= {most:g} s: {ok[worst <= most]}), load "
        f"{k.get('load', math.nan):.1f}; drained {k['wall2']:.1f} s after the writers stopped; "
        f"CPU follower/master (writers + capture) {ratio:.3f} (goal <= 0.1: {ok[ratio <= 0.1]}); "
        f"replica equal: {'yes' if equal else 'NO'}"
    )
    return Report(
        workload="follow",
        title=f"a master written for {k['minutes']:g} min over {len(k['tables'])} tables (a Spark job"
        + (", a delta-rs pipeline" if k.get("piped") else "")
        + f"), capture beat {beat:g} s, wlr replicate --follow beat {beat:g} s"
        + (f", {k['busy']} cores' worth of other work" if k.get("busy") else "")
        + (", lean Spark settings" if k.get("lean") else ""),
        header=("measure", "value", "goal", ""),
        rows=rows,
        summary=summary,
        equal=equal,
        notes=notes,
    )


def _trend(held: list[dict], go: float, wall: float) -> list[str]:
    """Lag p50/p95 per minute of writing: does the follower keep up or fall behind?"""
    out = []
    for minute in range(int(math.ceil(wall / 60))):
        lags = [t["replica"] - t["time"] for t in held if minute * 60 <= t["time"] - go < (minute + 1) * 60]
        if lags:
            out.append(f"{minute + 1}: {pct(lags, 50):.1f}/{pct(lags, 95):.1f}")
    return ["lag p50/p95 by minute of writing: " + ", ".join(out)] if out else []


def _delta_timings(steady: list[dict], commits: list[dict], segs: dict, go: float, ended: float) -> list[str]:
    """The master's statements and the replica's commits by operation, with Delta's own timings,
    and what a segment costs beyond its Delta command (reading the batch, collapse, checks)."""
    mine = [c for c in commits if go <= c["time"] <= ended + 60]
    extra = []
    for c in mine:
        s = segs.get((c["table"], c["first"], c["last"]))
        if s is not None and "executionTimeMs" in c:
            extra.append(s[1] - c["executionTimeMs"] / 1000)
    out = [
        _by_operation("master statements while writing", [t["master"] for t in steady if "master" in t]),
        _by_operation("replica commits (segments) while writing", mine),
    ]
    if extra:
        out.append(f"  a replica segment beyond its Delta command (read, collapse, checks, commit): {_dist(extra)}")
    return out


def _follower_lines(segs: dict, held: list[dict], go: float, ended: float, lag: dict) -> list[str]:
    """The follower's segments while writing: how many, their size, seconds and how busy replay was."""
    mine = [(k, v) for k, v in segs.items() if go <= v[0] <= ended + 60]
    if not mine:
        return []
    seconds = [v[1] for _k, v in mine]
    sizes = [sum(1 for t in held if t["seg"] == k) for k, _v in mine]
    busy = _busy([(v[0] - v[1], v[0]) for _k, v in mine], go, ended)
    batches = sorted({t["batch"] for t in held})
    per_batch = len(held) / len(batches) if batches else math.nan
    return [
        f"follower: {len(mine)} segments ({sum(sizes) / len(mine):.2f} transactions each, {_dist(seconds)}), "
        f"sum {sum(seconds):.0f} s; a segment running {busy / max(ended - go, 1e-9):.0%} of the writing time",
        f"capture: {len(batches)} batches while writing ({per_batch:.2f} transactions each)",
    ]


def utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")
