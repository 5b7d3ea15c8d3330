"""Retention over the log's levels: which batches and snapshots to delete, which to keep, what a
pruned folder records of it (``<folder>/wlc.retention``), and the pruning of one folder by it.

The rules are pure logic (no Spark, no I/O), used by capture's life cycle (:mod:`wlc.lifecycle`,
``wlc prune``): as Litestream's retention, nothing is deleted that a kept snapshot's path to a
still-promised recovery point uses (the path replay takes, :func:`wlcore.levels.restore_path`
plus level 0).

Every folder that is pruned gets a retention state file: a master's (``<db>/wlc.retention``: the
promise only; its retention is ``master.retention`` in config), a shipped copy's and a relay's
(``<copy>/wlc.retention``). Keys, as ``key=value`` lines (:mod:`wlcore.state`):

``level0``, ``level1``, ``level2``, ``snapshots``
    the copy's own retention of that level, a duration as in config (``1d``, ``30d``) or
    ``off`` (forever); a key not set takes ``master.retention``'s (the master's default).
``pruned``
    the UTC instant of the last prune (a dry run writes nothing).
``deleted``
    what prunes deleted, as ranges (JSON): ``{"level0": [[first, last], ...], "level1": ...,
    "level2": ..., "snapshots": [[first txn, last txn]]}``, level-0 batch numbers for the
    levels. A shipping pass never copies a folder these ranges cover again, so a copy pruned
    shorter than its source stays pruned. Ranges next to each other are merged, and every
    snapshot older than a deleted one is older than the kept base too (retention keeps the
    newest snapshots), so the file stays a few lines long.
``promise``
    what the folder still promises after the last prune (:func:`promise_of`).

Pruning one log folder, a master's own, a shipped copy's or a relay's: :func:`prune_folder`
applies :func:`retain` to the snapshots and batches of one folder and deletes what it no longer promises, each folder unpublished first
(:meth:`Storage.unpublish`) so a reader sees it whole or not at all. The master's life cycle
(:meth:`wlc.lifecycle.Lifecycle.prune`) and the pruning of shipped copies and relays
(:func:`wlcore.ship.prune_copy`) both use it, so every copy keeps what a replica reading it
needs to reach each promised point by the same rules as the master.
"""

from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Callable, Sequence

from pydantic import Field

from . import snapshots as snap
from .errors import ConfigError
from .levels import LEVELS, Span, Start
from .logstore import LogStore
from .settings import Every, every
from .state import JSON_DICT, TEXT, UTC, StateFile
from .storage import Storage
from .utc import utc_iso


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


RETENTION_FILE = "wlc.retention"
PRUNE_LOCK = ".wlc-prune.lock"  # held while a copy's wlc.retention is changed and while it is pruned
KEYS = ("level0", "level1", "level2", "snapshots")
FROM_MASTER = "master"  # a --retention value that drops the copy's own setting (the master's applies)

Ranges = list[list[int]]


def keep_of(keep: dict | None) -> dict[str, Every | None] | None:
    """A prune call's ``keep=`` (retention for that call only) as :func:`wlcore.retention.retain`
    takes it, checked before anything is deleted.

    Args:
        keep (dict | None): ``{"level0": "1d", ...}``: durations as in config (or ``Every``); a
            level left out, or ``"off"``: forever. None: no override.

    Returns:
        dict[str, Every | None] | None: every level of :data:`KEYS`; None when ``keep`` is None.

    Raises:
        ConfigError: a malformed duration (the message names ``keep[<level>]``).
    """
    if keep is None:
        return None
    return {k: every(keep.get(k), f"keep[{k!r}]") for k in KEYS}


def add_range(ranges: Ranges, lo: int, hi: int, hull: bool = False) -> Ranges:
    """``ranges`` (sorted, disjoint ``[first, last]`` pairs) with ``[lo, hi]`` added, overlapping
    and adjacent ranges merged.

    Args:
        ranges (list[list[int]]): the ranges so far (not changed).
        lo (int): the first number of the range added.
        hi (int): the last number of it (inclusive, >= ``lo``).
        hull (bool): keep one range from the lowest number to the highest (snapshots: every one
            older than a deleted snapshot is deletable too).

    Returns:
        list[list[int]]: the new ranges, sorted.
    """
    out: Ranges = []
    for a, b in sorted([[int(a), int(b)] for a, b in ranges] + [[lo, hi]]):
        if out and (hull or a <= out[-1][1] + 1):
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(ranges: Ranges, lo: int, hi: int) -> bool:
    """True when one range of ``ranges`` holds all of ``[lo, hi]``.

    Args:
        ranges (list[list[int]]): sorted, disjoint ``[first, last]`` pairs.
        lo (int): the first number asked for.
        hi (int): the last number asked for (inclusive).
    """
    return any(a <= lo and hi <= b for a, b in ranges)


class RetentionState(StateFile):
    """``<folder>/wlc.retention``, typed (see the module).

    Attributes:
        level0, level1, level2, snapshots: the folder's own retention of each level as written
            (``""``: not set, ``master.retention``'s applies).
        pruned: UTC instant of the last prune (None: never pruned).
        deleted: ``{kind: [[first, last], ...]}`` of what prunes deleted.
        promise: what the folder promises since the last prune (``{}``: never pruned).
    """

    level0: Annotated[str, TEXT] = ""
    level1: Annotated[str, TEXT] = ""
    level2: Annotated[str, TEXT] = ""
    snapshots: Annotated[str, TEXT] = ""
    pruned: Annotated[datetime | None, UTC] = None
    deleted: Annotated[dict[str, Ranges], JSON_DICT] = Field(default_factory=dict)
    promise: Annotated[dict, JSON_DICT] = Field(default_factory=dict)

    def keep(self, default: dict[str, Every | None]) -> dict[str, Every | None]:
        """The retention in force: each key set here, else ``default``'s.

        Args:
            default (dict[str, Every | None]): ``master.retention`` (:meth:`Retention.by_name`).

        Returns:
            dict[str, Every | None]: per ``level0``, ``level1``, ``level2``, ``snapshots`` (None: forever).

        Raises:
            ConfigError: a stored value is malformed (the message names the file's key).
        """
        return {
            k: every(getattr(self, k), f"{RETENTION_FILE} {k}") if getattr(self, k) else default.get(k) for k in KEYS
        }

    def set_keep(self, changes: dict[str, str | None]) -> None:
        """Set the folder's own retention of some levels.

        Args:
            changes (dict[str, str | None]): ``{level: duration}`` (``"1d"``, ``"off"``: forever);
                None or ``"master"``: drop it (``master.retention``'s applies again).

        Raises:
            ConfigError: an unknown level or a malformed duration; nothing is changed.
        """
        checked: dict[str, str | None] = {}
        for key, value in changes.items():
            if key not in KEYS:
                raise ConfigError(f"retention {key!r} is not a level: use one of {', '.join(KEYS)} (e.g. level0=1d)")
            if value is None or str(value).strip() == FROM_MASTER:
                checked[key] = None
                continue
            every(value, f"retention {key}")  # raises on a malformed one
            checked[key] = str(value).strip()
        for key, value in checked.items():
            if value is None:
                self.drop(key)
            else:
                setattr(self, key, value)

    def described(self) -> str:
        """The retention in force as one line: ``level0 1d, level1 master's, ...``."""
        return ", ".join(f"{k} {getattr(self, k) or 'as master.retention'}" for k in KEYS)

    def record(self, deleted: list[Span], deleted_snapshots: list[Start], promise: dict, now: datetime) -> None:
        """Note a prune: when, what it deleted (added to ``deleted``) and the promise since.

        Args:
            deleted (list[Span]): the batches deleted.
            deleted_snapshots (list[Start]): the snapshots deleted.
            promise (dict): what the folder promises now (:func:`wlcore.retention.promise_of`).
            now (datetime): the prune's instant (UTC).
        """
        ranges = {k: list(v) for k, v in self.deleted.items()}
        for span in deleted:
            kind = f"level{span.level}"
            ranges[kind] = add_range(ranges.get(kind, []), span.first_batch, span.last_batch)
        for start in deleted_snapshots:
            if start.path:
                ranges["snapshots"] = add_range(ranges.get("snapshots", []), start.txn, start.txn, hull=True)
        self.pruned, self.promise = now, promise
        if ranges:
            self.deleted = ranges

    def skips_batch(self, level: int, first: int, last: int) -> bool:
        """True when a prune here deleted the batch of ``level`` holding level-0 batches
        ``first``..``last`` (a shipping pass does not copy it again).

        Args:
            level (int): the batch's level.
            first (int): its first level-0 batch.
            last (int): its last level-0 batch.
        """
        return covered(self.deleted.get(f"level{level}", []), first, last)

    def skips_snapshot(self, txn: int) -> bool:
        """True when a prune here deleted the snapshot at transaction ``txn``, or a newer one.

        Args:
            txn (int): the snapshot's transaction.
        """
        return any(txn <= b for _a, b in self.deleted.get("snapshots", []))


def read_retention_state(storage: Storage, root: str) -> RetentionState:
    """The ``wlc.retention`` of the folder ``root`` (an empty state when there is none).

    Args:
        storage (Storage): the storage holding the folder.
        root (str): a master's folder, a shipped copy's or a relay's.

    Returns:
        RetentionState: the state.

    Raises:
        ConfigError: the file is malformed (the message names it and the key).
    """
    path = Storage.join(root, RETENTION_FILE)
    if not storage.exists(path):
        return RetentionState()
    return RetentionState.from_text(storage.read_text(path), path)


def write_retention_state(storage: Storage, root: str, state: RetentionState) -> None:
    """Write ``state`` as ``<root>/wlc.retention`` (atomically: readers see the old or the new file).

    Args:
        storage (Storage): the storage holding the folder.
        root (str): the folder.
        state (RetentionState): the state to write.
    """
    storage.write_atomic(Storage.join(root, RETENTION_FILE), state.to_text())


def write_promise(storage: Storage, root: str, report, now: datetime, ranges: bool = False) -> RetentionState:
    """Note a prune of the folder ``root`` in its ``wlc.retention`` (the caller holds its lock).

    Args:
        storage (Storage): the storage holding the folder.
        root (str): the folder pruned.
        report (PruneReport): what the prune did (:func:`wlcore.retention.prune_folder`; not a dry run).
        now (datetime): the prune's instant (UTC).
        ranges (bool): also add what it deleted to ``deleted`` (shipped copies and relays, which a
            shipping pass fills again).

    Returns:
        RetentionState: the state written.
    """
    state = read_retention_state(storage, root)
    decision = report.decision
    deleted = list(decision.delete) if decision and ranges else []
    snapshots = list(decision.delete_snapshots) if decision and ranges else []
    state.record(deleted, snapshots, report.promise, now)
    write_retention_state(storage, root, state)
    return state


def described_retention(storage: Storage, root: str, changes: dict[str, str | None]) -> str:
    """The retention in force in the folder ``root`` with ``changes`` over it, as one line
    (:meth:`RetentionState.described`): what a prune of it used, also a dry run's.

    Args:
        storage (Storage): the storage holding the folder.
        root (str): a shipped copy's or relay's folder.
        changes (dict[str, str | None]): the ``--retention`` given (:func:`retention_args`; ``{}``: none).

    Raises:
        ConfigError: the folder's ``wlc.retention`` or ``changes`` is malformed.
    """
    state = read_retention_state(storage, root)
    state.set_keep(changes)
    return state.described()


def retention_args(values: list[str] | None, option: str = "--retention") -> dict[str, str | None]:
    """Command-line ``--retention LEVEL=DURATION`` values as :meth:`RetentionState.set_keep` takes them.

    Args:
        values (list[str] | None): the option's values (each ``level0=1d``, or several
            comma-separated: ``level0=1d,snapshots=30d``; ``level1=master`` drops the copy's own).
        option (str): the option's name, for the message.

    Returns:
        dict[str, str | None]: ``{level: duration}`` (None: ``master.retention``'s again).

    Raises:
        ConfigError: a value without ``=``, an unknown level or a malformed duration.
    """
    out: dict[str, str | None] = {}
    for part in (p.strip() for v in values or [] for p in v.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq:
            raise ConfigError(
                f"{option} {part!r}: write LEVEL=DURATION with LEVEL one of {', '.join(KEYS)}, "
                f"e.g. {option} level0=1d (off: forever; {FROM_MASTER}: as master.retention)"
            )
        out[key.strip()] = None if value.strip() == FROM_MASTER else value.strip()
    RetentionState().set_keep(out)  # checked here, before anything is done
    return out


@dataclass
class PruneReport:
    """What one prune deleted (or would delete, ``dry_run``) and what stays reachable.

    Attributes:
        dry_run: nothing was deleted; ``deleted`` says what would be.
        deleted: the folders deleted, by name (``<db>_<batch>``, ``wlc_snapshot/<T>``).
        bytes_freed: the bytes in them.
        decision: what :func:`wlcore.retention.retain` decided (None: not decided).
    """

    dry_run: bool
    deleted: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    decision: Retention | None = None

    @property
    def promise(self) -> dict:
        """What the folder still promises (:func:`wlcore.retention.promise_of`; ``{}``: not decided)."""
        return promise_of(self.decision) if self.decision is not None else {}

    def lines(self) -> list[str]:
        """Human lines: what was deleted, the earliest reachable point, the granularity by age."""
        verb = "would delete" if self.dry_run else "deleted"
        out = [f"{verb} {len(self.deleted)} folders ({self.bytes_freed / 1e6:.1f} MB)"]
        out += [f"  {verb} {name}" for name in self.deleted]
        if self.decision is not None and self.decision.earliest is not None:
            out += promise_lines(self.promise)
        return out

    def block(self, title: str) -> str:
        """The report under a title line, as ``wlc prune`` and ``wlr prune`` print each folder's.

        Args:
            title (str): the folder's line (``master shop (<path>):``), printed first.

        Returns:
            str: the title, then :meth:`lines` indented.
        """
        return "\n".join([title, *("  " + line for line in self.lines())])


def prune_folder(
    store: LogStore,
    starts: Sequence[Start],
    spans: Sequence[Span],
    now: datetime,
    keep: dict[str, Every | None],
    dry_run: bool = False,
    decided: Callable[[PruneReport], None] | None = None,
) -> PruneReport:
    """Delete the batches and snapshots of one log folder that ``keep`` no longer promises
    (:func:`wlcore.retention.retain`: never one a kept snapshot's path to a promised point uses).
    The caller holds the folder's lock (the master's life-cycle lock, a copy's shipping lock).

    Args:
        store (LogStore): the log folder (its batches are deleted through it; its snapshots,
            in the folder above, through its storage).
        starts (Sequence[Start]): its snapshots (:func:`wlcore.snapshots.list_snapshots`).
        spans (Sequence[Span]): its published batches, every level.
        now (datetime): the instant retention counts back from (UTC).
        keep (dict[str, Every | None]): retention per ``level0``, ``level1``, ``level2`` and
            ``snapshots`` (None for one: forever).
        dry_run (bool): only say what would be deleted.
        decided (Callable[[PruneReport], None] | None): called with the report once the decision
            is made and before anything is deleted (not on a dry run): a copy notes there what
            it is about to delete, so that no shipping pass copies it again meanwhile.

    Returns:
        PruneReport: what was (or would be) deleted, and the decision (what stays reachable).

    Raises:
        OSError: the store cannot be reached or a file cannot be deleted (what was unpublished
            stays unseen; the next prune deletes the rest).
    """
    storage = store.storage
    decision = retain(starts, spans, now, keep)
    report = PruneReport(dry_run, decision=decision)
    snapshots = [s for s in decision.delete_snapshots if s.path]
    doomed = list(decision.delete) + snapshots
    for item in doomed:
        name = os.path.basename(item.path.rstrip("/"))
        report.deleted.append(name if isinstance(item, Span) else f"{snap.SNAPSHOT_DIR}/{name}")
        report.bytes_freed += storage.tree_size(item.path)
    if dry_run:
        return report
    if decided is not None:
        decided(report)
    store.delete(decision.delete)
    for start in snapshots:
        storage.unpublish(start.path)
    return report
