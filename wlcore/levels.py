"""The log's levels as ranges: which compacted batches to make, which to replay, which to keep.

Pure logic (no Spark, no I/O), shared by capture's life cycle (:mod:`wlc.lifecycle`,
:mod:`wlc.prune`) and replay (``wlr``):

* Level 0 is what capture publishes; a level-1 batch merges a run of consecutive level-0
  batches, a level-2 batch a run of consecutive level-1 batches (MusicBrainz's hourly packets
  and daily ones, Litestream's compaction levels). Runs never overlap and are aligned: every
  boundary of a coarser batch is a boundary of every finer level.
* :func:`restore_path` plans replay as Litestream restores: from the replica's position,
  the coarsest batch that starts there and ends at or before the target, again and again;
  level 0 then reaches the exact target. A compacted batch is applied only as a whole.
* :func:`wlcore.retention.retain` decides what retention deletes: nothing that a kept
  snapshot's path to a still-promised recovery point uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Sequence

from .settings import Every
from .target import EVERYTHING, Target

LEVELS = (0, 1, 2)


@dataclass(frozen=True)
class Span:
    """A published batch as a range: ``level``, the level-0 batches it holds
    (``first_batch``..``last_batch``), its transactions (``first_txn``..``last_txn``), the
    commit time of its last transaction (UTC), its watermark, its folder and the commit time of
    its first transaction."""

    level: int
    first_batch: int
    last_batch: int
    first_txn: int
    last_txn: int
    last_time: datetime | None
    watermark: datetime | None = None
    path: str = ""
    first_time: datetime | None = None

    @classmethod
    def of(cls, manifest, path: str = "") -> "Span":
        """The span of a batch's manifest.

        Args:
            manifest (Manifest): the batch's :class:`wlcore.batch.Manifest`.
            path (str): the batch's folder ("": not known).

        Returns:
            Span: its level, level-0 batches, transactions and times (None without transactions).
        """
        return cls(
            manifest.level,
            manifest.batch,
            manifest.end_batch,
            manifest.first_txn,
            manifest.last_txn,
            manifest.txns[-1].time if manifest.txns else None,
            manifest.watermark,
            path,
            manifest.txns[0].time if manifest.txns else None,
        )

    @property
    def placed_at(self) -> datetime:
        """The instant that places the batch in a time window (compaction's windows): the
        commit time of its last transaction, else its watermark.

        Raises:
            ValueError: the span has neither (it was not made from a manifest).
        """
        when = self.last_time or self.watermark
        if when is None:
            raise ValueError(f"{self.name} has neither a commit time nor a watermark")
        return when

    @property
    def name(self) -> str:
        """The batch as people name it: ``level-0 batch N`` or ``level-L batch F-L``."""
        if self.level == 0:
            return f"level-0 batch {self.first_batch}"
        return f"level-{self.level} batch {self.first_batch}-{self.last_batch}"


@dataclass(frozen=True)
class Start:
    """A snapshot as a starting point: every transaction <= ``txn`` is in it (-1: none),
    ``time`` the commit time of ``txn`` (None for -1), ``batch`` the last level-0 batch it holds."""

    txn: int
    time: datetime | None
    batch: int
    path: str = ""


def fits(span: Span, target: Target = EVERYTHING) -> bool:
    """True when all of ``span`` is at or before ``target`` (:meth:`wlcore.target.Target.admits`).

    Args:
        span (Span): a batch.
        target (Target): the replay target (default: everything).

    Returns:
        bool: its last transaction is admitted.
    """
    return target.admits(span.last_txn, span.last_time)


def restore_path(tick: int, compacted: Iterable[Span], target: Target = EVERYTHING) -> list[Span]:
    """The compacted batches replay applies from position ``tick`` toward the target: each
    time the coarsest batch that starts at the next transaction and ends at or before the
    target, as Litestream's restore plan. Cost: O(number of compacted batches).

    Args:
        tick (int): every transaction <= ``tick`` is applied (-1: none).
        compacted (Iterable[Span]): the published batches (level-0 ones are ignored).
        target (Target): the replay target (default: everything).

    Returns:
        list[Span]: in order (empty: level 0 from ``tick``). Level 0 continues from the last
        one's ``last_batch + 1`` and ``last_txn``.
    """
    starts: dict[int, list[Span]] = {}
    for s in compacted:
        if s.level > 0:
            starts.setdefault(s.first_txn, []).append(s)
    path: list[Span] = []
    pos = tick
    while True:
        fitting = [s for s in starts.get(pos + 1, ()) if fits(s, target) and s.last_txn > pos]
        if not fitting:
            return path
        best = max(fitting, key=lambda s: (s.last_txn, s.level))
        path.append(best)
        pos = best.last_txn


def choose_start(starts: Sequence[Start], target: Target = EVERYTHING) -> Start | None:
    """The newest snapshot at or before ``target``.

    Args:
        starts (Sequence[Start]): the snapshots, any order.
        target (Target): the replay target (default: everything).

    Returns:
        Start | None: the one with the highest ``txn`` the target admits; None when none is.
    """
    best = None
    for s in starts:
        if target.admits(s.txn, s.time) and (best is None or s.txn > best.txn):
            best = s
    return best


# ----------------------------------------------------------------------------- compaction


def window_of(when: datetime, seconds: float) -> int:
    """The number of the UTC-aligned window of ``seconds`` that holds ``when``.

    Args:
        when (datetime): an aware instant.
        seconds (float): the window's length in seconds.

    Returns:
        int: ``floor(epoch seconds / seconds)``.
    """
    return math.floor(when.timestamp() / seconds)


def window_end(window: int, seconds: float) -> datetime:
    """The UTC instant window number ``window`` of ``seconds`` (:func:`window_of`) ends at.

    Args:
        window (int): a window number.
        seconds (float): the window's length in seconds.

    Returns:
        datetime: the end (UTC), excluded from the window.
    """
    return datetime.fromtimestamp((window + 1) * seconds, tz=timezone.utc)


def _after(lower: Sequence[Span], upper: Sequence[Span]) -> tuple[int, list[Span]]:
    """``(the last level-0 batch the newest of upper holds (-1: none), the lower batches after it
    in order)``: what :func:`runs_to_merge` may merge."""
    done = max((u.last_batch for u in upper), default=-1)
    return done, sorted((s for s in lower if s.first_batch > done), key=lambda s: s.first_batch)


def runs_to_merge(
    lower: Sequence[Span], upper: Sequence[Span], every: Every, closed_before: datetime
) -> list[list[Span]]:
    """Runs of consecutive ``lower`` batches to merge into one batch of the next level each.

    Args:
        lower: the batches of the level below (any order).
        upper: the batches of the level being made that exist already: only batches after
            the last of them are merged (runs never overlap; a hole behind is never filled).
        every: ``Every(n, "batches")``: each run of n batches (complete runs only); or
            ``Every(seconds)``: the batches whose last transaction falls in one UTC-aligned
            window, once the window is over (its end at or before ``closed_before``, the
            master's watermark) so no later batch can still belong to it.
        closed_before: the master's watermark (UTC).

    Returns the runs in order, each ascending and gap-free. Merging stops at a gap.
    """
    done, todo = _after(lower, upper)
    chain: list[Span] = []
    for s in todo:
        expected = chain[-1].last_batch + 1 if chain else (done + 1 if upper else s.first_batch)
        if s.first_batch != expected or (chain and s.first_txn != chain[-1].last_txn + 1):
            break
        chain.append(s)
    runs: list[list[Span]] = []
    if every.unit == "batches":
        n = max(1, int(every.amount))
        runs = [chain[i : i + n] for i in range(0, len(chain) - n + 1, n)]
        return runs
    seconds = every.amount
    for s in chain:
        when = s.placed_at
        w = window_of(when, seconds)
        if runs and window_of(runs[-1][-1].placed_at, seconds) == w:
            runs[-1].append(s)
        else:
            runs.append([s])
    closed = []
    for run in runs:
        end = window_end(window_of(run[-1].placed_at, seconds), seconds)
        if end > closed_before:
            break
        closed.append(run)
    return closed


def next_due(lower: Sequence[Span], upper: Sequence[Span], every: Every, closed_before: datetime, level: int) -> str:
    """When the next batch of ``level`` is due, for people (``wlc compact`` with nothing to do).

    Args:
        lower (Sequence[Span]): the batches of the level below (any order).
        upper (Sequence[Span]): the batches of ``level`` that exist already.
        every (Every): the level's interval, as for :func:`runs_to_merge`.
        closed_before (datetime): the master's watermark (UTC).
        level (int): the level being made (1 or 2).

    Returns:
        str: e.g. ``level 1: due once the master's watermark passes 2026-11-25T11:00:00Z (the
        end of the 1 h window of level-0 batches 40-42)`` or ``level 1: 3 of 10 level-0 batches
        since the last level-1 batch``.
    """
    _done, todo = _after(lower, upper)
    below = f"level-{level - 1} batch"
    if every.unit == "batches":
        return (
            f"level {level}: {len(todo)} of {int(every.amount)} {below}es since the last level-{level} batch "
            "(due when they are complete)"
        )
    if not todo:
        return (
            f"level {level}: no {below} since the last level-{level} batch; due at the end of the {every} "
            "window of the next one"
        )
    first = todo[0]
    w = window_of(first.placed_at, every.amount)
    end = window_end(w, every.amount)
    inside = [s for s in todo if window_of(s.placed_at, every.amount) == w]
    names = f"{inside[0].first_batch}" + (
        f"-{inside[-1].last_batch}" if inside[-1].last_batch != inside[0].first_batch else ""
    )
    return (
        f"level {level}: due once the master's watermark passes {end.isoformat().replace('+00:00', 'Z')} (the "
        f"end of the {every} window of {below}es {names}; the watermark is {closed_before.isoformat()})"
    )
