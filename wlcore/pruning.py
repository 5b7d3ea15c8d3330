"""Pruning one log folder by retention: a master's own, a shipped copy's or a relay's.

:func:`prune_folder` applies :func:`wlcore.retention.retain` to the snapshots and batches of
one folder and deletes what it no longer promises, each folder unpublished first
(:meth:`Storage.unpublish`) so a reader sees it whole or not at all. The master's life cycle
(:meth:`wlc.lifecycle.Lifecycle.prune`) and the pruning of shipped copies and relays
(:func:`wlcore.ship.prune_copy`) both use it, so every copy keeps what a replica reading it
needs to reach each promised point by the same rules as the master.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Sequence

from . import snapshots as snap
from .levels import Span, Start
from .retention import Retention, promise_lines, promise_of, retain
from .settings import Every
from .storage import Storage


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
    storage: Storage,
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
        storage (Storage): the storage holding the folder.
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
    decision = retain(starts, spans, now, keep)
    report = PruneReport(dry_run, decision=decision)
    doomed = list(decision.delete) + [s for s in decision.delete_snapshots if s.path]
    for item in doomed:
        name = os.path.basename(item.path.rstrip("/"))
        report.deleted.append(name if isinstance(item, Span) else f"{snap.SNAPSHOT_DIR}/{name}")
        report.bytes_freed += storage.tree_size(item.path)
    if dry_run:
        return report
    if decided is not None:
        decided(report)
    for item in doomed:
        storage.unpublish(item.path)
    return report
