"""The planner: what replay reads and in which order.

Where replay starts and which levels it reads (a snapshot, compacted batches, level 0:
:func:`start_for`, :func:`units`, :func:`check_path`, decided from a :class:`LogView` value
that :class:`Route` reads from the log store), reading the next published batches and checking
that they are whole (:func:`read_batches`, :class:`LogError`), the replica's epoch history against its source's
(:func:`check_history`), and which transactions to apply (:func:`plan`, parsing ``until``
and cutting segments at barriers, up to the consistent tick; pure, no Spark, no I/O). A replay
round asks once, :meth:`Route.round`: the batches it reads and its plan.


Semantics of the plan:

* ``until=N`` (int): every transaction with id <= N, inclusive (MonetDB's tests,
  PostgreSQL's ``recovery_target_xid`` with ``recovery_target_inclusive=on``).
* ``until=<instant>`` (aware datetime, naive datetime taken as UTC, or ISO-8601 text): every
  transaction committed at or before the instant, inclusive (``recovery_target_time``),
  across all tables. The target counts as reached only when the master's watermark (or a
  stopped master) proves nothing committed by then is still unpublished.
* ``until=None``: everything published.

Replay by segments (:func:`segments`): for each table, a run of consecutive DML
transactions on that table, cut at a DDL or image transaction of that table (a barrier,
replayed alone) and at the end of the plan, which ends at the target. An ALTER that only
adds nullable columns (``TxnRecord.adds``) is no barrier: the segment's commit adds them,
as ``ADD COLUMNS`` would, and rows before it read NULL there. Other tables'
transactions do not cut a segment: Delta has no cross-table transactions, so replay keeps
per-table order only. A segment lands as one Delta commit on its table (MusicBrainz's
replication packets collapsed, Drizzle's reduce-then-apply).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from datetime import datetime
from itertools import takewhile
from typing import Iterator, Mapping, Sequence

from wlcore import epochs, snapshots as snap
from wlcore.batch import Manifest, TxnRecord
from wlcore.errors import BatchError
from wlcore.levels import Span, Start, choose_start, restore_path
from wlcore.logstore import BatchRef, LogStore
from wlcore.state import MasterState, ReplicaState
from wlcore.storage import Storage
from wlcore.target import Target, parse_until  # noqa: F401 (wlr.parse_until)
from wlcore.utc import utc_iso

from .errors import DivergedError, NoStartError, ReplicaStateError, TargetError


@dataclass(frozen=True)
class TxnRef:
    """What planning needs of a published transaction.

    ``table`` is ``"schema.table"``; ``barrier`` is True for DDL (create, alter, drop) and
    full images, which are replayed alone; DML (change-feed rows) and ALTERs that only add
    nullable columns can be grouped. ``unit``: the first transaction of the compacted batch
    this record belongs to (None: level 0); a compacted batch has no consistent point
    inside it, so until all its records are applied the replica stands before it.
    ``committed``: the transaction was captured late, its table unreadable for a while
    (:mod:`wlc.holds`); ``time`` is its place in the order, ``committed`` its commit time.
    """

    txn: int
    time: datetime
    batch: int
    table: str = ""
    barrier: bool = False
    unit: int | None = None
    committed: datetime | None = None  # captured late (wlc.holds): its commit time, before ``time``


def is_barrier(ddl: str | None, change: str | None, adds: Sequence[str] = ()) -> bool:
    """True for a transaction replayed alone: DDL (create, alter, drop) and full images.

    An ALTER that only adds nullable columns (``adds``, see ``TxnRecord.adds``) is no
    barrier: a segment's commit can add the columns.
    """
    return change == "image" or (ddl is not None and not (ddl == "alter" and adds))


@dataclass(frozen=True)
class Segment:
    """Transactions of one table replayed as one unit: a run of DML, or one barrier."""

    table: str
    txns: tuple[TxnRef, ...]

    @property
    def first(self) -> int:
        """The id of the segment's first transaction."""
        return self.txns[0].txn

    @property
    def last(self) -> int:
        """The id of the segment's last transaction (its replay commit's ``txnVersion``)."""
        return self.txns[-1].txn

    @property
    def barrier(self) -> bool:
        """True when the segment is one barrier transaction (:func:`is_barrier`) replayed alone."""
        return self.txns[0].barrier

    def __str__(self) -> str:
        return f"{self.table} [{span_text(self.first, self.last)}]"


@dataclass(frozen=True)
class Item:
    """A transaction of the plan as the applier takes it (:meth:`wlr.apply.Applier.apply`): its
    batch number, its batch's folder (on the logs' storage), its record, and the Parquet files
    of its change rows that its manifest lists and Spark would read (relative to the batch)."""

    batch: int
    path: str
    rec: TxnRecord
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Limits:
    """The sizes that choose how the applier lands a segment (:meth:`wlr.apply.Applier.engine_for`),
    from the replicate options of the round.

    Attributes:
        deltars_bytes (int): tables up to this many bytes take a segment in the replaying
            process, through the Arrow engine (``replica.deltars_bytes``; 0: never).
        rewrite_bytes (int): tables up to this many bytes may be rewritten whole instead of
            merged (``replica.rewrite_bytes``; 0: never).
    """

    deltars_bytes: int = 0
    rewrite_bytes: int = 0


def span_text(first: int, last: int) -> str:
    """``"first-last"``, or ``"txn"`` for one transaction (replay tags and log lines)."""
    return f"{last}" if first == last else f"{first}-{last}"


@dataclass
class Plan:
    """The transactions to apply now, and whether the target is reached after them."""

    apply: list[TxnRef] = field(default_factory=list)
    reached: bool = False
    waiting_for: str = ""


def check_not_passed(target: Target, tick: int, clock: datetime | None, named: str | None = None) -> None:
    """Refuse a target the replica has already passed (replay cannot go back).

    ``tick``/``clock``: id and commit time of the last transaction handled; ``named``: the
    target as the message names it (default its instant; :func:`wlcore.target.meaning` says
    what a date-only ``until`` was taken to mean).

    Raises:
        TargetError: ``until=N`` with N < tick, or an instant before ``clock``.
    """
    if (target.kind == "time" and clock is None) or target.admits(tick, clock):
        return  # at or after the last transaction handled (a time not known proves nothing)
    if target.kind == "txn":
        msg = f"the replica has already applied up to transaction {tick}; it cannot go back to {target.upto_txn}: "
        raise TargetError(
            msg + f"make a new replica with replicate(until={target.upto_txn})",
            cli=msg + f"make a new replica with: wlr replicate <dbfarm> <master> <new replica> "
            f"--until {target.upto_txn}",
        )
    if clock is not None:
        msg = (
            f"the replica has already applied transactions up to {clock.isoformat()}; it "
            f"cannot go back to {named or target.upto_time.isoformat()}: make a new replica with "
        )
        raise TargetError(
            msg + "that until",
            cli=msg + f"wlr replicate <dbfarm> <master> <new replica> --until {target.upto_time.isoformat()}",
        )


def plan(
    tick: int, published: Sequence[TxnRef], target: Target, watermark: datetime | None, master_stopped: bool
) -> Plan:
    """Choose what to apply.

    Args:
        tick: id of the last transaction handled (applied or accepted); -1 for none.
        published: published transactions with id > tick, ascending and gap-free.
        target: from :func:`parse_until`.
        watermark: the master's watermark (UTC): every commit at or before it is published.
        master_stopped: the master logs nothing more (wlc.stop()).

    Returns:
        Plan: ``apply`` is a gap-free run of ids starting at tick+1; ``reached`` says the
        target holds after applying it.

    Raises:
        TargetError: an instant between a late transaction's commit and its place in the
            order (:mod:`wlc.holds`): no replica state is the master's as of it.
    """
    expected = tick + 1
    for ref in published:
        if ref.txn != expected:
            raise ValueError(f"published transactions are not gap-free: expected {expected}, got {ref.txn}")
        expected += 1
    if target.kind == "all":
        return Plan(list(published), True)
    todo = list(takewhile(lambda r: target.admits(r.txn, r.time), published))
    last = published[-1].txn if published else tick
    if target.kind == "txn":
        if target.reached_by(last, None):
            return Plan(todo, True)
        return Plan(todo, False, f"transaction {target.upto_txn} (published up to {last})")
    for ref in published:
        if ref.committed is not None and ref.committed <= target.upto_time < ref.time:
            raise TargetError(
                f"table {ref.table} could not be read by capture for a while: its transaction {ref.txn}, committed "
                f"{ref.committed.isoformat()}, was captured late, after transactions committed later; no state of "
                f"the replica is the master as of {target.upto_time.isoformat()}. Choose an instant before "
                f"{ref.committed.isoformat()} or at or after {ref.time.isoformat()}, or a transaction id"
            )
    # the watermark is the proof (Target.reached_by); a later transaction is proof only where
    # there is no watermark, since a held table's transactions may be published after later ones
    later = len(todo) < len(published)
    reached = master_stopped or (target.reached_by(last, watermark) if watermark is not None else later)
    return Plan(
        todo,
        reached,
        ""
        if reached
        else f"the master's watermark to pass {target.upto_time.isoformat()} (now {watermark.isoformat() if watermark else 'none'})",
    )


def segments(todo: Sequence[TxnRef], collapse: bool = True) -> dict[str, list[Segment]]:
    """Group the transactions to apply into per-table segments.

    Args:
        todo: ``Plan.apply``: ascending transactions, ending at the target.
        collapse: False keeps one segment per transaction (``replicate(collapse=False)``:
            one replica commit per master transaction).

    Returns:
        ``{table: [Segment, ...]}`` with each table's segments in transaction order;
        tables in the order of their first transaction. A barrier (DDL or image) is a
        segment of its own and cuts the table's run of DML; other tables do not.
    """
    out: dict[str, list[Segment]] = {}
    runs: dict[str, list[TxnRef]] = {}

    def close(table: str) -> None:
        run = runs.pop(table, None)
        if run:
            out[table].append(Segment(table, tuple(run)))

    for ref in todo:
        out.setdefault(ref.table, [])
        if ref.barrier or not collapse:
            close(ref.table)
            out[ref.table].append(Segment(ref.table, (ref,)))
        else:
            runs.setdefault(ref.table, []).append(ref)
    for table in list(runs):
        close(table)
    return out


def consistent_tick(tick: int, todo: Sequence[TxnRef], done: dict[str, int]) -> int:
    """The highest N with every transaction <= N applied.

    Args:
        tick: the tick before this round.
        todo: the round's transactions, ascending from ``tick + 1`` (a compacted batch's
            records count as one unit: see :attr:`TxnRef.unit`).
        done: ``{table: last transaction applied to it}`` after the round (absent: none).
    """
    for ref in todo:
        if done.get(ref.table, -1) < ref.txn:
            return (ref.txn if ref.unit is None else ref.unit) - 1
    return todo[-1].txn if todo else tick


# Reading a master's published logs in order, for replay: which batches, and are they whole.
#
# Every problem found here belongs to a *batch*, not to one transaction: a batch missing
# from the sequence, a missing or damaged manifest, a folder holding another batch's
# manifest (swapped or copied folders), another database's batch, or transaction ids that
# do not continue where the previous batch ended. They raise :class:`LogError` naming the
# batch and what is wrong; replay stores it, and ``accept()`` refuses it (skipping an intact
# transaction would not repair the logs).


class LogError(Exception):
    """A batch of the logs is missing, damaged or out of place.

    Args:
        batch (int): the batch's number (kept as ``batch``).
        cause (str): what is wrong, with the fix (kept as ``cause``; the message).
    """

    def __init__(self, batch: int, cause: str):
        super().__init__(cause)
        self.batch, self.cause = batch, cause


@dataclass
class Batch:
    """A published level-0 batch as replay reads it: its ``number``, folder ``path`` and
    checked ``manifest``."""

    number: int
    path: str
    manifest: Manifest


def read_batches(
    store: LogStore,
    dbid: str,
    next_batch: int,
    tick: int,
    target: Target,
    read: Mapping[str, Manifest] | None = None,
    published: int | None = None,
) -> Iterator[Batch]:
    """Yield the published batches from ``next_batch`` on, in order, each checked.

    Args:
        store: the master's log folder (batch folders are ``<master>_<12 digits>``).
        dbid: the master's database id the replica follows.
        next_batch: first batch number to read.
        tick: the last transaction the replica handled; the first batch must hold ``tick + 1``.
        target: stop reading once a batch reaches it (a damaged batch past the target
            does not stop a point-in-time replay before it).
        read: manifests already read and checked in this call, by batch folder (a new replica's
            path walk, :meth:`wlr.planner.Route.take_walked`); the others are read here.
        published: the level-0 batches the source's ``wlc.config`` says are published (its
            ``batches``, read before this call); None: not known. With it, a replica at most
            :data:`PROBE` batches behind looks its next batches up by name and lists the folder
            only when one it needs is missing (see :func:`numbered`).

    Raises:
        LogError: a batch is missing, unreadable, misplaced, foreign or breaks the
            sequence of transaction ids; checked before anything of it is applied.
    """
    storage, logs, master = store.storage, store.logs, store.database
    if not storage.isdir(logs):
        raise LogError(
            next_batch,
            f"the log folder {logs} is not there (unmounted, moved or deleted?); put it back where wlc.config says",
        )
    expected_batch, expected_txn = next_batch, tick + 1
    for ref in numbered(store, next_batch, published):
        number, path = ref.number, ref.path
        if number != expected_batch:
            raise LogError(
                expected_batch,
                f"batch {expected_batch} is missing from {logs} (batch {number} "
                "follows it): the logs have a gap; restore the missing batch from a copy",
            )
        try:
            manifest = read[path] if read and path in read else store.manifest(ref)
        except BatchError as exc:
            raise LogError(number, f"batch {number}: {exc}") from None
        if (manifest.database, manifest.batch) != (master, number):
            raise LogError(
                number,
                f"batch {number}: its folder holds the manifest of batch {manifest.batch} of "
                f"{manifest.database!r} (a batch folder copied or renamed?); put the right batch back",
            )
        if manifest.dbid != dbid:
            raise LogError(
                number,
                f"batch {number} belongs to database id {manifest.dbid}, not {dbid} (the logs of another master?)",
            )
        ids = [t.txn for t in manifest.txns]
        if ids and ids != list(range(ids[0], ids[0] + len(ids))):
            raise LogError(number, f"batch {number}: its transaction ids are not consecutive ({ids[:6]}...)")
        # the first batch holds tick + 1 (or ends at tick: a crash between saving tick and batches)
        if ids and not (ids[0] <= expected_txn <= ids[-1] + 1 if number == next_batch else ids[0] == expected_txn):
            raise LogError(
                number,
                f"batch {number} holds transactions {ids[0]}-{ids[-1]} but {expected_txn} was "
                "expected: a batch is missing, duplicated or out of order",
            )
        if ids:
            expected_txn = ids[-1] + 1
        yield Batch(number, path, manifest)
        expected_batch += 1
        if reaches(manifest, target):
            return


def published_batches(mcfg: MasterState) -> int | None:
    """The number of level-0 batches ``mcfg`` (a source's ``wlc.config``) says are published: its
    ``batches``, the next number capture publishes; None when the file does not say."""
    return mcfg.batches if mcfg.has("batches") else None


PROBE = 16


"""At most this many batches behind, replay looks its next level-0 batches up by name."""


def numbered(store: LogStore, next_batch: int, published: int | None) -> Iterator[BatchRef]:
    """The level-0 batches from ``next_batch`` on, ascending, as
    :meth:`wlcore.logstore.LogStore.batches` lists them, read lazily.

    A replica that follows is one or two batches behind a log that may hold tens of thousands:
    listing the whole folder every round would make each round cost as much as the log is long.
    When the source's ``wlc.config`` says at most :data:`PROBE` batches are left to read, each
    is looked up by its name (one ``stat``, or a request on an object store) until one is missing
    at or past what the config says is published (capture publishes a batch before it counts it
    there, a shipped copy writes its config after its batches). A batch missing below that count
    lists the folder, so that a gap is named as it always was, from the batches found after it.

    Args:
        store (LogStore): the master's log folder.
        next_batch (int): the first batch number wanted.
        published (int | None): the number of level-0 batches published, from ``wlc.config``
            (None: not known; the folder is listed).

    Yields:
        BatchRef: each batch (its number and folder).
    """
    if published is None or published - next_batch > PROBE:
        yield from store.batches(next_batch)
        return
    number = next_batch
    while True:
        found = store.batch(number)
        if found is not None:
            yield found
            number += 1
            continue
        if number < published:  # counted as published but not there: a gap, or pruned
            yield from store.batches(number)
        return


def reaches(manifest: Manifest, target: Target) -> bool:
    """True when ``manifest`` holds the target or passes it (later batches are not needed):
    :meth:`wlcore.target.Target.reached_by`.

    Args:
        manifest (Manifest): a batch's manifest (its last transaction and watermark).
        target (Target): the replay target.
    """
    return target.reached_by(manifest.last_txn if manifest.txns else None, manifest.watermark)


def manifest_of(store: LogStore, number: int | None) -> Manifest | None:
    """The manifest of batch ``number`` when it is there and intact.

    Args:
        store (LogStore): the master's log folder.
        number (int | None): the level-0 batch number (None: none).

    Returns:
        Manifest | None: None when ``number`` is None or the batch is missing or damaged.
    """
    ref = store.batch(number) if number is not None else None
    if ref is None:
        return None
    try:
        return store.manifest(ref)
    except BatchError:
        return None


# A replica's epoch history against its source's (:mod:`wlcore.epochs`): replay refuses a
# source that wrote other transactions under ids the replica already applied (a master restored
# from a copy, its logs reset), as PostgreSQL refuses a timeline that forked before the
# standby's position, and CouchDB a checkpoint of another session.


def check_history(
    state: ReplicaState,
    their_text: str,
    their_tick: int,
    where: str,
    *,
    label: str,
    master: str,
    path: str,
    promoted: int | None = None,
) -> None:
    """Refuse a source whose epoch history disagrees with the replica's on a transaction both have.

    Args:
        state (ReplicaState): the replica's state (``epochs``, ``tick``).
        their_text (str): the source's epoch history as text (``first:epoch`` entries).
        their_tick (int): the last transaction that history covers.
        where (str): where it was read, for the message (``batch 7``, ``...'s wlc.config``).
        label (str): the source as messages name it (``the master``, ``the relay ...``).
        master (str): the master's name, for the fix the message gives.
        path (str): the replica's folder, for the message.
        promoted (int | None): the source's ``promoted_tick`` when it is a promoted master (its
            new history starts after it), for the message; None: not promoted.

    Raises:
        DivergedError: the histories disagree; ``txn`` is the first id they disagree on.
        ReplicaStateError: either history is damaged.
    """
    try:
        mine, theirs = epochs.parse(state.epochs), epochs.parse(their_text)
    except ValueError as exc:
        raise ReplicaStateError(
            f"the epoch history in {where} or in {path}'s wlr.config is damaged ({exc}); make a new replica"
        ) from None
    tick = state.tick
    at = epochs.diverged(mine, tick, theirs, their_tick)
    if at is None:
        return
    cause = (
        f"{label} wrote another history from transaction {at} on (epoch "
        f"{epochs.at(theirs, at)}) than this replica followed up to transaction {tick} (epoch "
        f"{epochs.at(mine, at)}): the master was restored from a copy or its logs were reset. "
        "Nothing was applied"
    )
    if promoted is not None and at == promoted + 1:
        cause = (
            f"{label} was promoted to master at transaction {promoted} and this replica applied transactions "
            f"{at}..{tick} of the old master that the new history leaves out (the first: {at}). Nothing was applied"
        )
    raise DivergedError(
        f"{cause}; make a new replica (wlr.replicate({master!r}, replica='<new name>')) or read from a "
        "source that kept this history (source=...)",
        at,
        cli=f"{cause}; make a new replica (wlr replicate <dbfarm> {master} <new name>) or read from a "
        "source that kept this history (--source)",
    )


def note_history(state: ReplicaState, batches: Sequence[Batch]) -> None:
    """Keep in ``state`` the epoch history of the batch holding the replica's tick (its manifest's).

    Args:
        state (ReplicaState): the replica's state; ``epochs`` and ``epoch`` are set in place
            (the caller saves it).
        batches (Sequence[Batch]): the batches of the round, ascending; nothing changes when
            none holds the tick or records a history.
    """
    tick = state.tick
    for b in reversed(batches):
        if b.manifest.epochs and b.manifest.first_txn <= tick:
            hist = epochs.upto(epochs.parse(b.manifest.epochs), tick)
            state.epochs = epochs.format(hist)
            state.epoch = epochs.at(hist, tick) or ""
            return


# Where replay starts and which batches it reads: a snapshot, compacted batches, then level 0.
#
# A new replica starts from the newest snapshot at or before its target (PostgreSQL's restore
# from the base backup nearest the recovery target; Litestream's snapshot then levels). From
# a replica's position, replay takes the coarsest compacted batches that start there and end
# at or before the target (:func:`wlcore.levels.restore_path`), then level-0 batches up to the
# exact target. When retention has pruned what a position or a target needs, the error names
# the earliest reachable point and nothing changes.


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


@dataclass(frozen=True)
class LogView:
    """What the planner knows of a master's log folder when it decides: a value, no storage.

    :class:`Route` reads it from the :class:`~wlcore.logstore.LogStore` (the one place the
    planner reads the folder); a test builds it from dicts and tuples. The deciding functions
    below (:func:`start_for`, :func:`first_after`, :func:`units`, :func:`level0_suffices`,
    :func:`check_path`, :func:`check_level0`) take it and read nothing else. The reader's
    mappings are lazy: a key looks one batch up by name or reads one manifest, iterating lists
    the folder once, so a follower near the end of a long log reads only what a decision asks for.

    Attributes:
        master (str): the master database's name its batches carry.
        dbid (str): the master's database id; a batch of another id is refused.
        level0 (Mapping[int, BatchRef]): the published level-0 batches, by number.
        compacted (Sequence[BatchRef]): the published compacted batches, by first batch, then level.
        starts (Sequence[Start]): the snapshots a new replica can start from, oldest first
            (:func:`wlcore.snapshots.list_snapshots`).
        manifests (Mapping[str, Manifest]): batch manifests by batch folder; a missing or damaged
            one raises :class:`~wlcore.errors.BatchError`.
        snapshot_command (str): the command that takes a snapshot on the master, for messages.
    """

    master: str
    dbid: str
    level0: Mapping[int, BatchRef]
    compacted: Sequence[BatchRef]
    starts: Sequence[Start]
    manifests: Mapping[str, Manifest]
    snapshot_command: str = ""


def start_for(view: LogView, target: Target, snapshot: int | None = None) -> Start:
    """The snapshot a new replica starts from (PostgreSQL's base backup nearest the recovery target).

    Args:
        view (LogView): the log folder (its ``starts``).
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
    starts, master = list(view.starts), view.master
    if snapshot is not None:
        found = [s for s in starts if s.txn == snapshot]
        if not found:
            raise TargetError(
                f"master {master!r} has no snapshot at transaction {snapshot}; its snapshots "
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
                f"master {master!r} has no reachable starting point: its snapshots and first "
                "batches were pruned; take a snapshot on the master (wlc.snapshot())",
                cli=f"master {master!r} has no reachable starting point; take a snapshot: {view.snapshot_command}",
            )
        raise TargetError(
            f"the target {target} is older than the earliest reachable point of master "
            f"{master!r}: {describe(starts[0])}; retention pruned what came before. "
            "Choose a later target"
        )
    return best


def first_after(view: LogView, start: Start) -> tuple[int, datetime] | None:
    """The first transaction after ``start``, from the level-0 batches after it.

    Args:
        view (LogView): the log folder (its ``level0`` and their ``manifests``).
        start (Start): a snapshot.

    Returns:
        tuple[int, datetime] | None: ``(txn, commit time UTC)``; None when none is published,
        level 0 was pruned there, or a manifest is damaged (replay names it).
    """
    for number in sorted(n for n in view.level0 if n > start.batch):
        try:
            txns = view.manifests[view.level0[number].path].txns
        except BatchError:
            return None  # replay names the damaged batch
        for rec in txns:
            if rec.txn > start.txn:
                return (rec.txn, rec.time) if rec.txn == start.txn + 1 else None
    return None


def units(view: LogView, tick: int, next_batch: int, target: Target, published: int | None = None) -> list[Batch]:
    """The compacted batches to apply from position ``tick``: the coarsest first, each ending at
    or before the target (:func:`wlcore.levels.restore_path`, Litestream's restore plan).

    Args:
        view (LogView): the log folder.
        tick (int): the replica's position: every transaction <= ``tick`` applied.
        next_batch (int): the next level-0 batch replay would read.
        target (Target): the replay target.
        published (int | None): the level-0 batches the source's ``wlc.config`` says are
            published (None: not known); see :func:`level0_suffices`, which spares the listing.

    Returns:
        list[Batch]: in order; empty when level 0 goes on from ``next_batch``.

    Raises:
        LogError: a compacted batch on the path is damaged or another database's.
    """
    if level0_suffices(view, next_batch, target, published):
        return []
    spans, manifests = [], {}
    for batch in view.compacted:
        level, first, path = batch.level, batch.first, batch.path
        if first < next_batch:
            continue
        try:
            manifest = view.manifests[path]
        except BatchError as exc:
            raise LogError(first, f"compacted batch {os.path.basename(path)}: {exc}") from None
        if manifest.dbid != view.dbid or manifest.database != view.master or manifest.level != level:
            raise LogError(
                first,
                f"{path} is not a level-{level} batch of this master (id {view.dbid}); move it out of the log folder",
            )
        spans.append(Span.of(manifest, path))
        manifests[path] = manifest
    return [Batch(span.last_batch, span.path, manifests[span.path]) for span in restore_path(tick, spans, target)]


def level0_suffices(view: LogView, next_batch: int, target: Target, published: int | None) -> bool:
    """True when a compacted batch could stand only for level-0 batch ``next_batch`` and that is
    there: nothing is published after it (``published``, wlc.config's count), or it reaches the
    target. One lookup by name and one manifest, instead of listing a log of tens of thousands of
    batches on every round of a follower.

    Args:
        view (LogView): the log folder.
        next_batch (int): the next level-0 batch replay would read.
        target (Target): the replay target.
        published (int | None): wlc.config's count of published level-0 batches (None: not known).

    Returns:
        bool: level 0 goes on from ``next_batch``; no compacted batch is needed.
    """
    if published is not None and published <= next_batch:
        return True
    found = view.level0.get(next_batch)
    if found is None:
        return False  # pruned, perhaps: a compacted batch may hold it
    if published is not None and published == next_batch + 1:
        return True
    try:
        manifest = view.manifests[found.path]
    except BatchError:
        return False  # damaged: a compacted batch may stand for it (read_batches names it otherwise)
    return reaches(manifest, target)


def check_path(
    view: LogView, start: Start, target: Target, compacted: bool = True, published: int | None = None
) -> None:
    """Walk a new replica's path from ``start`` to ``target`` (manifests only) and refuse it,
    before anything is written, where retention pruned what it needs.

    Args:
        view (LogView): the log folder (listed whole: the walk needs where it ends).
        start (Start): the snapshot the replica starts from.
        target (Target): the replay target.
        compacted (bool): use compacted batches (False: level 0 only).
        published (int | None): wlc.config's count of published level-0 batches (None: not known).

    Raises:
        TargetError: the target is not reachable exactly any more (see :func:`check_level0`).
        LogError: a batch on the path is damaged or another database's.
    """
    level0 = dict(view.level0)
    firsts = {b.first for b in view.compacted if compacted}
    last = max(list(level0) + [b.last for b in view.compacted] + [-1])
    pos, nb = start.txn, start.batch + 1
    while nb <= last and not target.reached_by(pos, None):  # by id alone: no watermark
        found = units(view, pos, nb, target) if nb in firsts else []
        if found:
            pos, nb = found[-1].manifest.last_txn, found[-1].number + 1
            continue
        if nb not in level0:
            check_level0(view, pos, nb, True, target, published)
            return  # a gap in the logs: replay names it
        try:
            manifest = view.manifests[level0[nb].path]
        except BatchError as exc:
            raise LogError(nb, f"batch {nb}: {exc}") from None
        if reaches(manifest, target):
            return
        pos, nb = manifest.last_txn, nb + 1


def check_level0(
    view: LogView, tick: int, next_batch: int, new: bool, target: Target, published: int | None = None
) -> None:
    """Refuse a position whose next level-0 batch retention pruned.

    Pruned, not damaged: a compacted batch holds that batch (replay did not take it: it
    starts before the position or ends past the target), or level 0 now begins after it.
    A batch missing with neither is a gap in the logs, which :func:`wlr.planner.read_batches`
    names.

    Args:
        view (LogView): the log folder (its ``starts`` name the earliest point).
        tick (int): the position: every transaction <= ``tick`` applied.
        next_batch (int): the level-0 batch replay needs next.
        new (bool): the replica is being made (a pruned batch is then the target's fault).
        target (Target): the replay target.
        published (int | None): wlc.config's count of published level-0 batches (None: not known).

    Raises:
        ReplicaStateError: an existing replica is further behind than what is kept.
        TargetError: the target is not reachable exactly any more (a new replica's, or
            one inside a compacted batch whose level-0 batches were pruned).
    """
    if next_batch in view.level0:
        return
    if published is not None and next_batch >= published:
        return  # not published yet (a follower waiting): nothing to list
    listed = sorted(view.level0)
    holders = [b for b in view.compacted if b.first <= next_batch <= b.last]
    if not listed or (not holders and listed[0] <= next_batch):
        return  # nothing after it yet, or a gap in the logs: read_batches names that
    starts = view.starts
    earliest = describe(starts[0]) if starts else "none (take a snapshot on the master)"
    what = f"level-0 batch {next_batch} (transactions after {tick}) was pruned by retention"
    if holders:
        ends = sorted({b.last for b in holders if b.first == next_batch})
        what += (
            f"; the compacted batches holding it end at level-0 batch {', '.join(map(str, ends))}"
            if ends
            else "; it lies inside a compacted batch"
        )
    if new or any(b.first == next_batch for b in holders):
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


# The reader: what the deciding functions above know of the log folder, read from the LogStore.


class _Level0(Mapping[int, BatchRef]):
    """A log store's level-0 batches by number: a key is looked up by its name
    (:meth:`~wlcore.logstore.LogStore.batch`) until the mapping is iterated, which lists the
    folder once (:meth:`~wlcore.logstore.LogStore.batches`)."""

    def __init__(self, store: LogStore):
        self._store = store
        self._found: dict[int, BatchRef | None] = {}
        self._listed: dict[int, BatchRef] | None = None

    def __getitem__(self, number: int) -> BatchRef:
        if self._listed is not None:
            return self._listed[number]
        if number not in self._found:
            self._found[number] = self._store.batch(number)
        found = self._found[number]
        if found is None:
            raise KeyError(number)
        return found

    def _listing(self) -> dict[int, BatchRef]:
        if self._listed is None:
            self._listed = {b.number: b for b in self._store.batches()}
        return self._listed

    def __iter__(self) -> Iterator[int]:
        return iter(self._listing())

    def __len__(self) -> int:
        return len(self._listing())


class _Compacted(Sequence[BatchRef]):
    """A log store's compacted batches, listed on first use (:meth:`~wlcore.logstore.LogStore.compacted`)."""

    def __init__(self, store: LogStore):
        self._store = store
        self.listed: list[BatchRef] | None = None

    def _listing(self) -> list[BatchRef]:
        if self.listed is None:
            self.listed = self._store.compacted()
        return self.listed

    def __getitem__(self, index):  # type: ignore[override]
        return self._listing()[index]

    def __len__(self) -> int:
        return len(self._listing())


class _Starts(Sequence[Start]):
    """A master's snapshots, listed on first use (:func:`wlcore.snapshots.list_snapshots`)."""

    def __init__(self, storage: Storage, master_path: str, mcfg: MasterState | None, store: LogStore):
        self._args = (storage, master_path, mcfg, store)
        self._listed: list[Start] | None = None

    def _listing(self) -> list[Start]:
        if self._listed is None:
            storage, master_path, mcfg, store = self._args
            snapshot, tick = (mcfg.snapshot, mcfg.tick) if mcfg is not None else ("", -1)
            self._listed = snap.list_snapshots(storage, master_path, snapshot, store, tick)
        return self._listed

    def __getitem__(self, index):  # type: ignore[override]
        return self._listing()[index]

    def __len__(self) -> int:
        return len(self._listing())


class _Manifests(Mapping[str, Manifest]):
    """Batch manifests by folder, read once each into ``cache`` (a damaged one raises
    :class:`~wlcore.errors.BatchError` and is read again when asked again)."""

    def __init__(self, store: LogStore, cache: dict[str, Manifest]):
        self._store, self._cache = store, cache

    def __getitem__(self, path: str) -> Manifest:
        if path not in self._cache:
            self._cache[path] = self._store.manifest(path)
        return self._cache[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)


class Route:
    """Reads a master's log folder and snapshots for one replica's planning (:class:`LogView`,
    manifests cached across rounds) and asks the deciding functions above.

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
        self._manifests: dict[str, Manifest] = {}  # read so far: compacted ones kept, level-0 ones handed over
        self._checked: tuple | None = None  # what the last check_path walked, and the compacted batches then

    def view(self, store: LogStore, mcfg: MasterState | None = None) -> LogView:
        """The log folder as the deciding functions see it: the one place planning reads it.

        Args:
            store (LogStore): the log folder read.
            mcfg (MasterState | None): the master's ``wlc.config`` (names its snapshot in an
                earlier layout, and its tick); None: not read.

        Returns:
            LogView: lazy: each listing and manifest is read when a decision first asks for it.
        """
        return LogView(
            self.master,
            self.dbid,
            _Level0(store),
            _Compacted(store),
            _Starts(self.storage, self.master_path, mcfg, store),
            _Manifests(store, self._manifests),
            self.snapshot_command,
        )

    def take_walked(self) -> dict[str, Manifest]:
        """The level-0 manifests read so far (by batch folder), handed over once: the first round of
        a new replica reads each manifest of its path once, not twice."""
        walked = {p: m for p, m in self._manifests.items() if m.level == 0}
        for path in walked:
            del self._manifests[path]
        return walked

    def starts(self, mcfg: MasterState, store: LogStore) -> list[Start]:
        """The snapshots a new replica can start from, oldest first (:attr:`LogView.starts`)."""
        return list(self.view(store, mcfg).starts)

    def start_for(self, mcfg: MasterState, store: LogStore, target: Target, snapshot: int | None = None) -> Start:
        """:func:`start_for` over the log folder ``store`` and ``mcfg``."""
        return start_for(self.view(store, mcfg), target, snapshot)

    def first_after(self, store: LogStore, start: Start) -> tuple[int, datetime] | None:
        """:func:`first_after` over the log folder ``store``."""
        return first_after(self.view(store), start)

    def units(
        self, store: LogStore, tick: int, next_batch: int, target: Target, published: int | None = None
    ) -> list[Batch]:
        """:func:`units` over the log folder ``store``; forgets the compacted manifests of batches gone."""
        view = self.view(store)
        out = units(view, tick, next_batch, target, published)
        listed = view.compacted.listed if isinstance(view.compacted, _Compacted) else None
        if listed is not None:
            there = {b.path for b in listed}
            for gone in [p for p, m in self._manifests.items() if m.level > 0 and p not in there]:
                del self._manifests[gone]
        return out

    def check_path(
        self, store: LogStore, mcfg: MasterState | None, start: Start, target: Target, compacted: bool = True
    ) -> None:
        """:func:`check_path` over the log folder ``store``, once for the same path over the same
        published batches (a call's check, then its run).

        Raises:
            TargetError, LogError: as :func:`check_path`.
        """
        view = self.view(store, mcfg)
        level0, compacted_batches = list(view.level0), list(view.compacted)
        key = (store.logs, start, target, compacted, min(level0, default=-1), max(level0, default=-1), len(level0))
        if self._checked == (key, compacted_batches):
            return
        check_path(view, start, target, compacted, published_batches(mcfg) if mcfg is not None else None)
        self._checked = (key, compacted_batches)

    def check_level0(
        self, store: LogStore, tick: int, next_batch: int, mcfg: MasterState, new: bool, target: Target
    ) -> None:
        """:func:`check_level0` over the log folder ``store`` and ``mcfg`` (its count of batches).

        Raises:
            ReplicaStateError, TargetError: as :func:`check_level0`.
        """
        check_level0(self.view(store, mcfg), tick, next_batch, new, target, published_batches(mcfg))

    def round(
        self, store: LogStore, mcfg: MasterState, dbid: str, tick: int, next_batch: int, target: Target, compacted: bool
    ) -> RoundRead:
        """Read and plan one replay round: the compacted batches that fit (:func:`units`), then
        level 0 from ``next_batch`` up to the batch reaching ``target`` (:func:`read_batches`),
        then what to apply (:func:`plan`), the compacted batches' transactions first.

        Args:
            store (LogStore): the log folder read.
            mcfg (MasterState): the source's ``wlc.config``, read for this round.
            dbid (str): the replica's master's database id (a batch of another is refused).
            tick (int): every transaction <= ``tick`` is applied (-1: none).
            next_batch (int): the first level-0 batch not read yet.
            target (Target): the replay target.
            compacted (bool): compacted batches may be used this round.

        Returns:
            RoundRead: the batches read and the plan. A missing or damaged level-0 batch is
            ``broken`` (the batches before it are planned), or the ``handoff`` to a compacted
            batch beginning there.

        Raises:
            ReplicaStateError, TargetError: as :func:`check_level0`.
        """
        published = published_batches(mcfg)
        read = RoundRead([], [], tick, next_batch, mcfg.watermark_time)
        if compacted:
            try:
                read.units = self.units(store, tick, next_batch, target, published)
            except LogError as exc:  # level 0 holds everything a compacted batch does
                read.notes.append(f"not using compacted batches: {exc.cause}")
        if read.units:  # level 0 continues after them
            read.notes.append("replaying through compacted " + ", ".join(os.path.basename(b.path) for b in read.units))
            read.tick, read.next_batch = read.units[-1].manifest.last_txn, read.units[-1].number + 1
        read.batches = list(read.units)
        self.check_level0(store, read.tick, read.next_batch, mcfg, False, target)
        try:
            walked = self.take_walked()
            for b in read_batches(store, dbid, read.next_batch, read.tick, target, walked, published):
                read.batches.append(b)
                if read.watermark is None or b.manifest.watermark > read.watermark:
                    read.watermark = b.manifest.watermark
        except LogError as exc:
            if exc.batch > read.next_batch and compacted and any(b.first == exc.batch for b in store.compacted()):
                read.handoff = exc.batch  # pruned or damaged at level 0: a compacted batch starts there
            else:
                read.broken = exc  # the intact batches before it are applied first
        batches, units = read.batches, read.units
        reached_read = bool(batches and reaches(batches[-1].manifest, target))
        # the last batch read; every batch there is, when reading did not stop at the target
        read.read_up_to = batches[-1].number if batches else read.next_batch - 1
        if not reached_read:
            read.read_up_to = sys.maxsize
        if read.handoff is not None:
            read.read_up_to = read.handoff - 1
        if read.broken is not None:
            read.read_up_to = read.broken.batch - 1
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
            if t.txn > read.tick
        ]
        todo = plan(read.tick, refs, target, read.watermark, mcfg.stopped)
        if read.handoff is not None and not reached_read:
            todo.reached = False  # the batches after the hand-off are not read yet
        todo.apply = read.unit_refs + todo.apply
        read.plan = todo
        return read


@dataclass
class RoundRead:
    """What one replay round read and planned (:meth:`Route.round`).

    Attributes:
        units (list[Batch]): the compacted batches applied first.
        batches (list[Batch]): every batch read: the ``units``, then level 0.
        tick (int): where level 0 continues: the replica's tick, or the last unit's last transaction.
        next_batch (int): the first level-0 batch read after the units.
        watermark (datetime | None): the newest watermark read (UTC).
        handoff (int | None): a level-0 batch gone or damaged where a compacted batch begins.
        broken (LogError | None): the first missing or damaged batch (the ones before it are planned).
        unit_refs (list[TxnRef]): the units' transactions.
        plan (Plan): what to apply, the units' transactions first.
        read_up_to (int): the last batch the round read every batch up to (a stored failure
            before it has passed).
        notes (list[str]): lines for the replica's log (compacted batches used, or why not).
    """

    units: list[Batch]
    batches: list[Batch]
    tick: int
    next_batch: int
    watermark: datetime | None = None
    handoff: int | None = None
    broken: LogError | None = None
    unit_refs: list[TxnRef] = field(default_factory=list)
    plan: Plan = field(default_factory=Plan)
    read_up_to: int = -1
    notes: list[str] = field(default_factory=list)
