"""Where replay starts and which batches it reads: a snapshot, compacted batches, then level 0.

A new replica starts from the newest snapshot at or before its target (PostgreSQL's restore
from the base backup nearest the recovery target; Litestream's snapshot then levels). From
a replica's position, replay takes the coarsest compacted batches that start there and end
at or before the target (:func:`wlcore.levels.restore_path`), then level-0 batches up to the
exact target. When retention has pruned what a position or a target needs, the error names
the earliest reachable point and nothing changes.
"""

from __future__ import annotations

import os
from datetime import datetime

from wlcore import batch as batchfmt, snapshots as snap
from wlcore.errors import BatchError
from wlcore.levels import Span, Start, choose_start, restore_path
from wlcore.master_state import MasterState
from wlcore.storage import Storage
from wlcore.utc import utc_iso

from .errors import NoStartError, ReplicaStateError, TargetError
from .logs import Batch, LogError, published_batches, reaches
from .plan import Target


def describe(start: Start) -> str:
    """A starting point for messages: ``transaction <txn> (<UTC time>, the snapshot <folder>)``.

    Args:
        start (Start): a snapshot, or the empty start of master mode.

    Returns:
        str: the text.
    """
    when = utc_iso(start.time) if start.time else "the start of master mode"
    where = f"the snapshot {os.path.basename(start.path)}" if start.path else "an empty start"
    return f"transaction {start.txn} ({when}, {where})"


class Route:
    """Reads a master's snapshots and compacted batches for one replica (manifests cached).

    Args:
        storage (Storage): the storage holding the master (or its shipped copy).
        master_path (str): the master's folder (or the shipped copy's).
        master (str): the master database's name.
        dbid (str): the master's database id; a batch of another id is refused.
        snapshot_command (str): the command that takes a snapshot on the master, in messages
            (``wlc snapshot <dbfarm> <folder>``: a promoted master's folder has another name than
            its database).
    """

    def __init__(self, storage: Storage, master_path: str, master: str, dbid: str, snapshot_command: str):
        self.storage, self.master_path, self.master, self.dbid = storage, master_path, master, dbid
        self.snapshot_command = snapshot_command
        self._spans: dict[str, tuple[Span, batchfmt.Manifest]] = {}
        self._walked: dict[str, batchfmt.Manifest] = {}  # level-0 manifests check_path read, for the next round
        self._checked: tuple | None = None  # what the last check_path walked, and the compacted batches then

    def take_walked(self) -> dict[str, batchfmt.Manifest]:
        """The level-0 manifests :meth:`check_path` read (by batch folder), handed over once: the
        first round of a new replica reads each manifest of its path once, not twice."""
        walked, self._walked = self._walked, {}
        return walked

    # ------------------------------------------------------------------ snapshots
    def starts(self, mcfg: MasterState, logs: str) -> list[Start]:
        """The snapshots a new replica can start from: the empty start only while level 0
        (or a compacted batch) still begins at batch 0.

        Args:
            mcfg (MasterState): the master's ``wlc.config`` (names its snapshot in an earlier layout).
            logs (str): the log folder read.

        Returns:
            list[Start]: oldest first (:func:`wlcore.snapshots.list_snapshots`).
        """
        return snap.list_snapshots(self.storage, self.master_path, mcfg.snapshot, logs, self.master, mcfg.tick)

    def start_for(self, mcfg: MasterState, logs: str, target: Target, snapshot: int | None = None) -> Start:
        """The snapshot a new replica starts from (PostgreSQL's base backup nearest the recovery target).

        Args:
            mcfg (MasterState): the master's ``wlc.config``.
            logs (str): the log folder read.
            target (Target): the replay target.
            snapshot (int | None): the transaction of the snapshot to start from; None: the newest
                at or before ``target``.

        Returns:
            Start: the snapshot.

        Raises:
            NoStartError: the master has no starting point at all (snapshots and first batches pruned).
            TargetError: no snapshot is at or before the target (it is older than the earliest
                reachable point, which the message names), or ``snapshot`` names none, or one after
                the target.
        """
        starts = self.starts(mcfg, logs)
        if snapshot is not None:
            found = [s for s in starts if s.txn == snapshot]
            if not found:
                raise TargetError(
                    f"master {self.master!r} has no snapshot at transaction {snapshot}; its snapshots "
                    f"are at transactions {', '.join(str(s.txn) for s in starts) or 'none'}"
                )
            chosen = found[0]
            if not target.admits(chosen.txn, chosen.time):
                raise TargetError(f"the snapshot at transaction {snapshot} is after the target {target}")
            return chosen
        best = choose_start(starts, target)
        if best is None:
            if not starts:
                raise NoStartError(
                    f"master {self.master!r} has no reachable starting point: its snapshots and first "
                    "batches were pruned; take a snapshot on the master (wlc.snapshot())",
                    cli=f"master {self.master!r} has no reachable starting point; take a snapshot: "
                    f"{self.snapshot_command}",
                )
            raise TargetError(
                f"the target {target} is older than the earliest reachable point of master "
                f"{self.master!r}: {describe(starts[0])}; retention pruned what came before. "
                "Choose a later target"
            )
        return best

    def first_after(self, logs: str, start: Start) -> tuple[int, datetime] | None:
        """The first transaction after ``start``, read from the level-0 batches after it.

        Args:
            logs (str): the log folder read.
            start (Start): a snapshot.

        Returns:
            tuple[int, datetime] | None: ``(txn, commit time UTC)``; None when none is published,
            level 0 was pruned there, or a manifest is damaged (replay names it).
        """
        for _number, path in batchfmt.list_batches(self.storage, logs, self.master, start.batch + 1):
            try:
                txns = batchfmt.read_manifest(self.storage, path).txns
            except BatchError:
                return None  # replay names the damaged batch
            for rec in txns:
                if rec.txn > start.txn:
                    return (rec.txn, rec.time) if rec.txn == start.txn + 1 else None
        return None

    # ------------------------------------------------------------------ compacted batches
    def units(self, logs: str, tick: int, next_batch: int, target: Target, published: int | None = None) -> list[Batch]:
        """The compacted batches to apply from position ``tick``: the coarsest first, each ending at
        or before the target (:func:`wlcore.levels.restore_path`, Litestream's restore plan).

        Args:
            logs (str): the log folder read.
            tick (int): the replica's position: every transaction <= ``tick`` applied.
            next_batch (int): the next level-0 batch replay would read.
            target (Target): the replay target.
            published (int | None): the level-0 batches the source's ``wlc.config`` says are
                published (None: not known); see :meth:`_level0_suffices`, which spares the listing.

        Returns:
            list[Batch]: in order; empty when level 0 goes on from ``next_batch``.

        Raises:
            LogError: a compacted batch on the path is damaged or another database's.
        """
        if self._level0_suffices(logs, next_batch, target, published):
            return []
        spans = []
        for level, first, _last, path in batchfmt.list_compacted(self.storage, logs, self.master):
            if first < next_batch:
                continue
            if path not in self._spans:
                try:
                    manifest = batchfmt.read_manifest(self.storage, path)
                except BatchError as exc:
                    raise LogError(first, f"compacted batch {os.path.basename(path)}: {exc}") from None
                if manifest.dbid != self.dbid or manifest.database != self.master or manifest.level != level:
                    raise LogError(
                        first,
                        f"{path} is not a level-{level} batch of this master (id {self.dbid}); "
                        "move it out of the log folder",
                    )
                self._spans[path] = (Span.of(manifest, path), manifest)
            spans.append(self._spans[path][0])
        out = []
        for span in restore_path(tick, spans, target):
            manifest = self._spans[span.path][1]
            out.append(Batch(span.last_batch, span.path, manifest))
        for gone in [p for p in self._spans if not self.storage.exists(p)]:
            del self._spans[gone]
        return out

    def _level0_suffices(self, logs: str, next_batch: int, target: Target, published: int | None) -> bool:
        """True when a compacted batch could stand only for level-0 batch ``next_batch`` and that is
        there: nothing is published after it (``published``, wlc.config's count), or it reaches the
        target. One lookup by name and one manifest (kept for the round's reading), instead of
        listing a log of tens of thousands of batches on every round of a follower."""
        if published is not None and published <= next_batch:
            return True
        path = Storage.join(logs, batchfmt.batch_name(self.master, next_batch))
        if not self.storage.is_published(path):
            return False  # pruned, perhaps: a compacted batch may hold it
        if published is not None and published == next_batch + 1:
            return True
        try:
            manifest = self._walked.get(path) or batchfmt.read_manifest(self.storage, path)
        except BatchError:
            return False  # damaged: a compacted batch may stand for it (read_batches names it otherwise)
        self._walked[path] = manifest
        return reaches(manifest, target)

    def check_path(self, logs: str, mcfg: MasterState, start: Start, target: Target, compacted: bool = True) -> None:
        """Walk a new replica's path from ``start`` to ``target`` (reading manifests only) and refuse
        it, before anything is written, where retention pruned what it needs.

        Args:
            logs (str): the log folder read.
            mcfg (MasterState): the master's ``wlc.config``.
            start (Start): the snapshot the replica starts from.
            target (Target): the replay target.
            compacted (bool): use compacted batches (False: level 0 only).

        Raises:
            TargetError: the target is not reachable exactly any more (see :meth:`check_level0`).
            LogError: a batch on the path is damaged or another database's.
        """
        level0 = dict(batchfmt.list_batches(self.storage, logs, self.master))
        compacted_batches = batchfmt.list_compacted(self.storage, logs, self.master)
        # the same path over the same published batches (a call's check, then its run): walked already
        key = (logs, start, target, compacted, min(level0, default=-1), max(level0, default=-1), len(level0))
        if self._checked == (key, compacted_batches):
            return
        self._walk(logs, mcfg, start, target, compacted, level0, compacted_batches)
        self._checked = (key, compacted_batches)

    def _walk(
        self, logs: str, mcfg: MasterState, start: Start, target: Target, compacted: bool, level0, compacted_batches
    ) -> None:
        """:meth:`check_path`'s walk over the listed ``level0`` ({number: path}) and ``compacted_batches``."""
        firsts = {first for _lv, first, _l, _p in compacted_batches if compacted}
        last = max(list(level0) + [last for *_x, last, _p in compacted_batches] + [-1])
        pos, nb = start.txn, start.batch + 1
        while nb <= last and not target.reached_by(pos, None):  # by id alone: no watermark
            units = self.units(logs, pos, nb, target) if nb in firsts else []
            if units:
                pos, nb = units[-1].manifest.last_txn, units[-1].number + 1
                continue
            if nb not in level0:
                self.check_level0(logs, pos, nb, mcfg, True, target)
                return  # a gap in the logs: replay names it
            try:
                manifest = batchfmt.read_manifest(self.storage, level0[nb])
            except BatchError as exc:
                raise LogError(nb, f"batch {nb}: {exc}") from None
            self._walked[level0[nb]] = manifest
            if reaches(manifest, target):
                return
            pos, nb = manifest.last_txn, nb + 1

    def check_level0(self, logs: str, tick: int, next_batch: int, mcfg: MasterState, new: bool, target: Target) -> None:
        """Refuse a position whose next level-0 batch retention pruned.

        Pruned, not damaged: a compacted batch holds that batch (replay did not take it: it
        starts before the position or ends past the target), or level 0 now begins after it.
        A batch missing with neither is a gap in the logs, which :func:`wlr.logs.read_batches`
        names.

        Args:
            logs (str): the log folder read.
            tick (int): the position: every transaction <= ``tick`` applied.
            next_batch (int): the level-0 batch replay needs next.
            mcfg (MasterState): the master's ``wlc.config`` (its snapshots name the earliest point).
            new (bool): the replica is being made (a pruned batch is then the target's fault).
            target (Target): the replay target.

        Raises:
            ReplicaStateError: an existing replica is further behind than what is kept.
            TargetError: the target is not reachable exactly any more (a new replica's, or
                one inside a compacted batch whose level-0 batches were pruned).
        """
        if self.storage.exists(Storage.join(logs, batchfmt.batch_name(self.master, next_batch))):
            return
        count = published_batches(mcfg)
        if count is not None and next_batch >= count:
            return  # not published yet (a follower waiting): nothing to list
        published = batchfmt.list_batches(self.storage, logs, self.master)
        holders = [
            (lv, first, last)
            for lv, first, last, _p in batchfmt.list_compacted(self.storage, logs, self.master)
            if first <= next_batch <= last
        ]
        if not published or (not holders and published[0][0] <= next_batch):
            return  # nothing after it yet, or a gap in the logs: read_batches names that
        starts = self.starts(mcfg, logs)
        earliest = describe(starts[0]) if starts else "none (take a snapshot on the master)"
        what = f"level-0 batch {next_batch} (transactions after {tick}) was pruned by retention"
        if holders:
            ends = sorted({last for _lv, first, last in holders if first == next_batch})
            what += (
                f"; the compacted batches holding it end at level-0 batch {', '.join(map(str, ends))}"
                if ends
                else "; it lies inside a compacted batch"
            )
        if new or any(first == next_batch for _lv, first, _l in holders):
            raise TargetError(
                f"the target {target} is not reachable exactly any more: {what}. The earliest "
                f"reachable point is {earliest}; choose a target at a snapshot or at the end of "
                "a compacted batch (wlr log lists them), or after level 0 begins"
            )
        raise ReplicaStateError(
            f"this replica is at transaction {tick}, further behind than the master keeps: "
            f"{what}. The earliest reachable point is {earliest}: make a new replica",
            cli=f"this replica is at transaction {tick}, further behind than the master keeps: "
            f"{what}. The earliest reachable point is {earliest}: make a new replica with "
            "wlr replicate <dbfarm> <master> <new replica>",
        )
