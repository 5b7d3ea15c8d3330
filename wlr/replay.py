"""Replay (:class:`Replay`): rounds that read the published batches up to the target, plan, apply, record.

A round reads the source's batches from the replica's next batch on (compacted batches
first where they fit, :mod:`wlr.planner`), plans what may be applied now (:func:`wlr.planner.plan`),
applies it by segments (:class:`wlr.round.Round`) and returns a :class:`RoundResult`; the
replica's state (``tick``, ``clock``, ``batches``, the view) is saved as it moves.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from wlcore import batch as batchfmt
from wlcore.master_state import MasterState
from wlcore.replica_state import ReplicaState
from wlcore.utc import utc_iso

from . import failure, monitor
from .book import StateBook
from .errors import DivergedError, ReplicationError, ReplicationTimeout
from .options import ReplayOptions
from .planner import (
    LogError,
    Target,
    TxnRef,
    consistent_tick,
    is_barrier,
    plan,
    published_batches,
    reaches,
    read_batches,
)
from .relay import Relay
from .round import Failure, Item, Round
from .select import Selection
from .setup import ReplicaSetup
from .source import Source
from .view import ConsistentView

if TYPE_CHECKING:  # wlr.apply imports pyspark: `wlr status` and `wlr log` start without it
    from .apply import Applier
    from .metrics import ReplicaMetrics


@dataclass
class RoundResult:
    """What a round did.

    Attributes:
        reached: the target is reached (following: everything published is applied).
        waiting_for: what replay waits for when not reached (a sentence; "" when reached).
        master: the source's wlc.config as the round read it.
        handoff: level 0 stopped before this batch number, where a compacted batch takes
            over; the caller runs another round at once (None: no hand-off).
        tick: the replica's last applied transaction after the round.
    """

    reached: bool
    waiting_for: str
    master: MasterState
    handoff: int | None = None
    tick: int = -1


@dataclass
class _Read:
    """The batches a round read: compacted ``units`` first, then level 0 (``batches`` holds both)."""

    units: list[Any]
    batches: list[Any]
    tick: int
    next_batch: int
    watermark: Any = None
    handoff: int | None = None
    broken: LogError | None = None
    unit_refs: list[TxnRef] = field(default_factory=list)


class Replay:
    """Runs rounds of replay for :class:`wlr.replica.Replica`.

    Args:
        book: the replica's state and log.
        setup: the replica's set-up (first copy, checks of the source, its route).
        view: the replica's consistent view (moved with the tick).
        relay: the replica's relay (ships what was applied after the rounds).
        options: how replay runs.
        source: returns where the replica reads now.
        applier: returns the replica's applier.
        selection: returns the replica's selection (None: every table).
        stop: when set, a round ends after the segments being applied.
        metrics: the replica's metrics (segments landed, failures stored).
    """

    def __init__(
        self,
        book: StateBook,
        setup: ReplicaSetup,
        view: ConsistentView,
        relay: Relay,
        options: ReplayOptions,
        source: Callable[[], Source],
        applier: Callable[[], Applier],
        selection: Callable[[], Selection | None],
        stop: threading.Event,
        metrics: ReplicaMetrics,
    ) -> None:
        self.book = book
        self.setup = setup
        self.view = view
        self.relay = relay
        self.options = options
        self._source = source
        self._applier = applier
        self._selection = selection
        self.stop = stop
        self.metrics = metrics

    @property
    def state(self) -> ReplicaState:
        """The replica's state in memory."""
        return self.book.state

    def steps(self, target: Target, progress: bool = True) -> RoundResult:
        """Apply what the plan allows now: rounds until ``target`` is reached or no compacted
        batch takes over from level 0 (the source's wlc.config read once a round); then relay.

        Args:
            target (Target): the replay target.
            progress (bool): a bar for a long round, on a terminal or in a notebook.

        Returns:
            RoundResult: the last round's result.

        Raises:
            ReplicationError, ReplicationTimeout, DivergedError: as :meth:`run`.
            ReplicaStateError: the source's wlc.config is missing or another master's
                (:meth:`wlr.setup.ReplicaSetup.master_config`).
        """
        diverged = False
        mcfg: MasterState | None = None
        try:
            while True:
                mcfg = self.setup.master_config()
                result = self.run(target, mcfg, progress)
                if result.reached or result.handoff is None or self.stop.is_set():
                    return result
        except DivergedError:
            diverged = True  # nothing more is relayed from a source on another history
            raise
        finally:
            if not diverged:
                self.relay.ship(mcfg)

    def run(self, target: Target, mcfg: MasterState, progress: bool) -> RoundResult:
        """One round toward ``target``: prepare (first copy, checks), read the batches, plan, apply,
        record.

        Args:
            target (Target): the replay target.
            mcfg (MasterState): the source's ``wlc.config``, read for this round.
            progress (bool): a bar for a long round, on a terminal or in a notebook.

        Returns:
            RoundResult: whether the target was reached, why not, and where the replica stands.

        Raises:
            ReplicationError: a transaction or batch failed (stored in wlr.config first).
            ReplicationTimeout: the master stopped logging before a ``txn`` target.
            DivergedError: a batch read belongs to another history than the replica's.
        """
        logs = self._prepare(mcfg, target)
        read = self._read(mcfg, logs, target)
        todo = self._plan(read, target, mcfg)
        self.setup.check_batches(read.batches)  # read after the config was: a batch of another history is never applied
        wanted = {r.txn for r in todo.apply}
        failed = self._round(todo.apply, read.batches, *self._items(read.batches, wanted), progress)
        self._record(read.batches, read.tick)
        retry = self._after_failure(failed, read, target)
        if retry is not None:
            return RoundResult(False, retry, mcfg, read.handoff, self._tick())
        if self.stop.is_set():  # the round may have ended early: the target is not known reached
            return RoundResult(False, "stop() was called", mcfg, read.handoff, self._tick())
        if target.kind == "txn" and not todo.reached and mcfg.stopped:
            raise ReplicationTimeout(
                f"the master stopped logging at transaction {mcfg.tick if mcfg.has('tick') else None}; "
                f"transaction {target.upto_txn} will never be published (the replica "
                f"applied everything up to {self.state.tick})"
            )
        return RoundResult(todo.reached, todo.waiting_for, mcfg, read.handoff, self._tick())

    def _tick(self) -> int:
        return self.state.tick

    def _prepare(self, mcfg: MasterState, target: Target) -> str:
        """Make the replica on first use, record a relay switch and the source; returns the log folder."""
        self.setup.ensure(mcfg, target)
        if self.options.relay_wanted is not None:
            self.state.relay = bool(self.options.relay_wanted)
            self.options.relay_wanted = None
        self.setup.check_history(self.state, mcfg)
        return self.setup.note_source(mcfg)

    def _read(self, mcfg: MasterState, logs: str, target: Target) -> _Read:
        """Read the compacted batches that fit, then level 0 up to the batch reaching ``target``."""
        next_batch, tick = self.state.batches, self._tick()
        units = self._units(mcfg, logs, tick, next_batch, target)
        if units:  # level 0 continues after them
            self.book.log("replaying through compacted " + ", ".join(os.path.basename(b.path) for b in units))
            tick, next_batch = units[-1].manifest.last_txn, units[-1].number + 1
        route = self.setup.route(mcfg)
        route.check_level0(logs, tick, next_batch, mcfg, False, target)
        read = _Read(units, list(units), tick, next_batch, mcfg.watermark_time)
        walked = route.take_walked()
        try:
            source = self._source().storage
            published = published_batches(mcfg)
            for b in read_batches(
                source, logs, self.setup.master, self.state.dbid, next_batch, tick, target, walked, published
            ):
                read.batches.append(b)
                if read.watermark is None or b.manifest.watermark > read.watermark:
                    read.watermark = b.manifest.watermark
        except LogError as exc:
            if exc.batch > next_batch and self._compacted_from(logs, exc.batch):
                read.handoff = exc.batch  # pruned or damaged at level 0: a compacted batch starts there
            else:
                read.broken = exc  # the intact batches before it are applied first
        return read

    def _plan(self, read: _Read, target: Target, mcfg: MasterState):
        """Plan the round (:func:`wlr.planner.plan`): the compacted units' transactions first."""
        batches, units, tick = read.batches, read.units, read.tick
        reached_read = bool(batches and reaches(batches[-1].manifest, target))
        # the last batch read; every batch there is, when reading did not stop at the target
        read_up_to = batches[-1].number if batches else read.next_batch - 1
        if not reached_read:
            read_up_to = sys.maxsize
        if read.handoff is not None:
            read_up_to = read.handoff - 1
        self._note_recovery(read_up_to if read.broken is None else read.broken.batch - 1)  # a batch's failure
        read.unit_refs = [
            TxnRef(
                t.txn, t.time, b.number, t.table, is_barrier(t.ddl, t.change, t.adds), b.manifest.first_txn, t.committed
            )
            for b in units
            for t in b.manifest.txns
        ]
        refs = [
            TxnRef(t.txn, t.time, b.number, t.table, is_barrier(t.ddl, t.change, t.adds), None, t.committed)
            for b in batches[len(units) :]
            for t in b.manifest.txns
            if t.txn > tick
        ]
        todo = plan(tick, refs, target, read.watermark, mcfg.stopped)
        if read.handoff is not None and not reached_read:
            todo.reached = False  # the batches after the hand-off are not read yet
        todo.apply = read.unit_refs + todo.apply
        return todo

    def _record(self, batches: list[Any], tick: int) -> None:
        """Save where the round got: the next batch, the epoch history, a ``tick`` line in wlr.log."""
        self._advance(batches)
        self.setup.note_history(batches)
        self.book.save()
        if self._tick() > tick:  # wlr.lag_history() reads these lines
            clock = self.state.clock
            self.book.log(f"{monitor.TICK_LINE} {self.state.tick} (committed {utc_iso(clock) if clock else ''})")
        self._note_recovery(-1)  # a transaction's failure, passed now

    def _after_failure(self, failed: Failure | None, read: _Read, target: Target) -> str | None:
        """Store and raise the round's failure; returns what replay waits for when a compacted
        batch failed (its range is replayed from level 0 next), else None."""
        if failed is not None and any(r.txn == failed.txn for r in read.unit_refs):
            unit = next(b for b in read.units if b.manifest.first_txn <= failed.txn <= b.manifest.last_txn)
            self.options.level0_until = unit.manifest.last_txn
            self.book.log(
                f"compacted batch {os.path.basename(unit.path)} failed on {failed.table} ({failed.cause}); "
                f"replaying transactions up to {unit.manifest.last_txn} from level 0"
            )
            return "level-0 replay of a compacted batch's range"
        if failed is not None:
            self.fail(failed.batch, failed.txn, failed.table, failed.cause)
        # reading stops at the batch that reaches the target, so a broken batch was needed,
        # unless the replica already stood at a target transaction
        broken = read.broken
        if broken is not None and not target.reached_by(read.tick, None):  # by id alone: no watermark
            self.fail(broken.batch, None, None, broken.cause)
        return None

    def _compacted_from(self, logs: str, number: int) -> bool:
        """True when replay may use compacted batches and one begins at level-0 batch ``number``."""
        if not self.options.use_compacted or self._tick() < self.options.level0_until:
            return False
        listed = batchfmt.list_compacted(self._source().storage, logs, self.setup.master)
        return any(first == number for _lv, first, _l, _p in listed)

    def _units(self, mcfg: MasterState, logs: str, tick: int, next_batch: int, target: Target) -> list:
        """The compacted batches to apply first (none with ``collapse=False`` or
        ``compacted=False``, or inside a range that failed compacted)."""
        if not self.options.use_compacted or tick < self.options.level0_until:
            return []
        try:
            return self.setup.route(mcfg).units(logs, tick, next_batch, target, published_batches(mcfg))
        except LogError as exc:  # level 0 holds everything a compacted batch does
            self.book.log(f"not using compacted batches: {exc.cause}")
            return []

    def _note_recovery(self, read_up_to: int) -> None:
        """Clear a stored failure once replay got past it (a later retry succeeded)."""
        line = failure.clear_if_passed(self.state, read_up_to)
        if line:
            self.book.save()
            self.book.last_error = None
            self.book.log(line)

    def _items(self, batches, wanted: set[int]) -> tuple[dict[int, Item], dict[int, str]]:
        """``({txn: Item}, {txn: cause})`` of the wanted transactions, files verified; the
        causes are the transactions that cannot be applied as published."""
        items, bad = {}, {}
        selection, storage = self._selection(), self._source().storage
        for b in batches:
            records = [
                t for t in b.manifest.txns if t.txn in wanted and (selection is None or selection.wants(t.table))
            ]
            if not records:
                continue
            problems = batchfmt.verify_files(storage, b.path, b.manifest, [r.rows for r in records if r.rows])
            for rec in records:
                items[rec.txn] = Item(b.number, b.path, rec)
                found = {f: p for f, p in problems.items() if rec.rows and f.startswith(rec.rows.rstrip("/") + "/")}
                if found:
                    bad[rec.txn] = "checksum verification failed: " + "; ".join(
                        f"{f}: {p}" for f, p in sorted(found.items())[:3]
                    )
                elif rec.lost:
                    bad[rec.txn] = f"its change rows were not captured: {rec.lost}"
        return items, bad

    def _advance(self, batches) -> None:
        """Move ``batches`` (the next batch to read) past every batch whose transactions are all handled."""
        tick = self.state.tick
        for b in batches:
            if tick < b.manifest.last_txn:
                break
            self.state.batches = b.number + 1

    def _round(
        self, todo: list[TxnRef], batches, items: dict[int, Item], bad: dict[int, str], progress: bool = True
    ) -> Failure | None:
        """Apply ``todo`` by segments, tables in parallel; tick, clock, the next batch and the
        read view follow the consistent point after every segment (the caller saves at the end)."""
        if not todo:
            return None
        tick0 = self._tick()
        times = {r.txn: r.time for r in todo}

        def progressed(done: dict[str, int]) -> None:
            reached = consistent_tick(tick0, todo, done)
            if reached > self.state.tick:
                self.state.tick, self.state.clock = reached, times[reached]
                self._advance(batches)
                self.view.set_view(reached, done)  # saved with the tick: readers see both move together
            self.book.save()

        applier = self._applier()
        # a rewrite shows in the replica's change feed as every row, so collapse=False keeps MERGEs
        applier.rewriter.limit = self.options.rewrite_bytes if self.options.collapse else 0
        applier.deltars_limit = self.options.deltars_bytes
        rnd = Round(applier, self.state, self.book.lock, items, bad, progressed, self.book.log, self.stop)
        rnd.observe = self.metrics.segment
        sel = self._selection()
        skipped = {r.table for r in todo if sel is not None and not sel.wants(r.table)}
        if skipped:  # tables this replica does not carry: handled without being applied
            rnd.done.update({t: max(r.txn for r in todo if r.table == t) for t in skipped})
            for t in skipped:  # a drop or create there must not leave a stale table entry
                self.state.drop_version(t)
        failed = rnd.run(
            [r for r in todo if r.table not in skipped],
            collapse=self.options.collapse,
            parallelism=self.options.parallelism,
            progress=progress,
        )
        if skipped:
            with self.book.lock:
                progressed(dict(rnd.done))
        return failed

    def fail(self, batch: int | None, txn: int | None, table: str | None, cause: str) -> None:
        """Store the failure in wlr.config, log it, and raise it (PostgreSQL's apply worker stops the same way).

        Args:
            batch (int | None): the level-0 batch the failure is in.
            txn (int | None): the transaction that failed (None: a failure of the logs themselves).
            table (str | None): the table it failed on.
            cause (str): the error's text.

        Raises ReplicationError: always (``batch``, ``txn``, ``table`` and ``cause`` name it).
        """
        err: ReplicationError = failure.record(self.state, batch, txn, table, cause)
        self.metrics.failed(failure.kind(self.state))
        self.book.save()
        self.book.last_error = err
        self.book.log(f"FAILED {err}")
        raise err
