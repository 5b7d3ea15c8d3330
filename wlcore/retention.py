"""Retention over the log's levels: which batches and snapshots to delete, which to keep.

Pure logic (no Spark, no I/O), used by capture's life cycle (:mod:`wlc.lifecycle`, ``wlc
prune``): as Litestream's retention, nothing is deleted that a kept snapshot's path to a
still-promised recovery point uses (the path replay takes, :func:`wlcore.levels.restore_path`
plus level 0).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Sequence

from .levels import LEVELS, Span, Start
from .settings import Every


@dataclass
class Retention:
    """What :func:`retain` decided: what to delete, what stays reachable."""

    delete: list[Span] = field(default_factory=list)
    delete_snapshots: list[Start] = field(default_factory=list)
    kept: list[Span] = field(default_factory=list)
    kept_snapshots: list[Start] = field(default_factory=list)
    earliest: Start | None = None  # the oldest kept snapshot: the earliest reachable point
    # (level, from txn, its time): every transaction (level 0) or every boundary of that level
    # from there on is promised (within the level's retention)
    granularity: list[tuple[str, int, datetime | None]] = field(default_factory=list)


def _older(when: datetime | None, keep: Every | None, now: datetime) -> bool:
    """True when ``when`` is older than the retention ``keep`` (None: kept forever)."""
    if keep is None:
        return False
    return when is None or when < now - timedelta(seconds=keep.amount)


def retain(starts: Sequence[Start], spans: Sequence[Span], now: datetime, keep: dict[str, Every | None]) -> Retention:
    """Decide what retention deletes.

    Args:
        starts: the snapshots.
        spans: every published batch, all levels.
        now: the current instant (UTC).
        keep: retention per ``level0``, ``level1``, ``level2`` and ``snapshots`` (None: forever).

    Kept: snapshots within their retention, plus the newest one older than it (the base the
    oldest promised points are reached from; always the newest snapshot); batches within
    their level's retention; the newest level-0 batch (capture resumes from it); and every
    batch that replay's :func:`restore_path` plus level 0 uses from a kept snapshot to a
    promised point: a transaction in a kept level-0 batch, the end of a kept compacted batch,
    a kept snapshot. Everything else is deleted. Cost: O(B log B) for B batches.
    """
    starts = sorted(starts, key=lambda s: s.txn)
    out = Retention()
    if not starts:
        out.kept = list(spans)
        return out
    ks = keep.get("snapshots")
    inside = [s for s in starts if not _older(s.time, ks, now)]
    older = [s for s in starts if _older(s.time, ks, now)]
    base = older[-1:] if older else []
    # the empty start (no folder) costs nothing: kept, reachable while a batch begins at it
    kept_starts = [s for s in older[:-1] if not s.path] + base + inside
    out.delete_snapshots = [s for s in starts if s not in kept_starts]

    fresh = {s for s in spans if not _older(s.last_time, keep.get(f"level{s.level}"), now)}
    level0 = [s for s in spans if s.level == 0]
    if level0:
        fresh.add(max(level0, key=lambda s: s.first_batch))
    # promised points: (lo, hi) txn ranges every point of which must stay reachable
    points = sorted({s.last_txn for s in fresh if s.level > 0} | {s.txn for s in kept_starts})
    ranges = sorted((s.first_txn, s.last_txn) for s in fresh if s.level == 0)

    def promised(lo: int, hi: float) -> bool:
        """A promised point in [lo, hi)."""
        i = bisect.bisect_left(points, lo)
        if i < len(points) and points[i] < hi:
            return True
        return _any_range(ranges, lo, hi)

    needed = _needed(spans, kept_starts, promised)
    for s in sorted(spans, key=lambda s: (s.level, s.first_batch)):
        (out.kept if (s in fresh or s in needed) else out.delete).append(s)
    if not kept_starts[0].path and not any(s.first_txn == kept_starts[0].txn + 1 for s in out.kept):
        kept_starts.pop(0)  # nothing begins at the empty start any more
    out.kept_snapshots = kept_starts
    out.earliest = kept_starts[0] if kept_starts else None
    out.granularity = _granularity(fresh, out.earliest)
    return out


def _needed(spans: Sequence[Span], kept_starts: list[Start], promised) -> set[Span]:
    """The batches replay's path (:func:`restore_path` plus level 0) uses from each kept
    snapshot up to the next one, wherever that path passes a promised point
    (``promised(lo, hi)``: a promised point in [lo, hi))."""
    by_start: dict[int, list[Span]] = {}
    for s in spans:
        by_start.setdefault(s.first_txn, []).append(s)
    needed: set[Span] = set()
    bounds = [s.txn for s in kept_starts[1:]] + [math.inf]
    for start, end in zip(kept_starts, bounds):
        todo, seen = [start.txn], set()
        while todo:
            pos = todo.pop()
            if pos in seen or pos >= end:
                continue
            seen.add(pos)
            here = sorted(by_start.get(pos + 1, ()), key=lambda s: s.level)
            for s in here:
                coarser = [c.last_txn for c in here if c.level > s.level and c.last_txn > pos]
                hi = min(coarser + [end])
                lo = s.first_txn if s.level == 0 else s.last_txn
                if promised(lo, hi):
                    needed.add(s)
                    todo.append(s.last_txn)
    return needed


def _granularity(fresh: set[Span], earliest: Start | None) -> list[tuple[str, int, datetime | None]]:
    """What is promised at each level: ``(level name, first transaction, its commit time)``
    (kept chains between promises are not promises)."""
    out: list[tuple[str, int, datetime | None]] = []
    for level in LEVELS:  # what is promised at each level (kept chains between are not promises)
        mine = [s for s in fresh if s.level == level and earliest and s.last_txn > earliest.txn]
        if mine:
            first = min(mine, key=lambda s: s.first_txn)
            if level == 0:  # every transaction from the batch's first one on: its own commit time
                out.append((f"level {level}", first.first_txn, first.first_time))
            else:  # every boundary from the batch's end on: the end's commit time
                out.append((f"level {level}", first.last_txn, first.last_time))
    return out


def _any_range(ranges: list[tuple[int, int]], lo: int, hi: float) -> bool:
    """A range of ``ranges`` (sorted, disjoint) meeting [lo, hi)."""
    i = bisect.bisect_right(ranges, (lo, math.inf))
    for a, b in ranges[max(0, i - 1) : i + 1]:
        if a < hi and b >= lo:
            return True
    return False


def promise_of(decision: Retention) -> dict:
    """What a log folder still promises after :func:`retain`, as a JSON-ready dict (stored with a
    pruned folder and shown by ``wlc prune`` and ``wlr status``; :func:`promise_lines` says it).

    Args:
        decision (Retention): what :func:`retain` decided.

    Returns:
        dict: ``{"earliest": {"txn", "time", "snapshot"}, "levels": [[level name, first
        transaction, its UTC time], ...], "snapshots": [transaction, ...]}``; times as ISO-8601
        UTC text (None: not known), ``snapshot`` the earliest snapshot's folder name ("": an empty
        start); ``{}`` when nothing is reachable (no snapshot).
    """
    from os.path import basename

    from .utc import utc_iso

    first = decision.earliest
    if first is None:
        return {}
    return {
        "earliest": {
            "txn": first.txn,
            "time": utc_iso(first.time) if first.time else None,
            "snapshot": basename(first.path.rstrip("/")) if first.path else "",
        },
        "levels": [[what, txn, utc_iso(at) if at else None] for what, txn, at in decision.granularity],
        "snapshots": [s.txn for s in decision.kept_snapshots],
    }


def promise_lines(promise: dict) -> list[str]:
    """A promise (:func:`promise_of`) as lines for a person: the earliest reachable point, then
    what is promised at each level from which transaction on, then the snapshots kept.

    Args:
        promise (dict): as :func:`promise_of` returns it (``{}``: nothing reachable).

    Returns:
        list[str]: the lines (``["nothing reachable (no snapshot)"]`` for ``{}``).
    """
    first = promise.get("earliest")
    if not first:
        return ["nothing reachable (no snapshot)"]
    when = first.get("time") or "the start of master mode"
    where = f"the snapshot {first['snapshot']}" if first.get("snapshot") else "an empty start"
    out = [f"earliest reachable point: transaction {first['txn']} ({when}), {where}"]
    for what, txn, at in promise.get("levels", []):
        detail = "every transaction" if what == "level 0" else f"every {what} boundary"
        out.append(f"  {detail} from transaction {txn} ({at or '-'}) on")
    out.append("  snapshots at transactions " + ", ".join(str(t) for t in promise.get("snapshots", [])))
    return out
