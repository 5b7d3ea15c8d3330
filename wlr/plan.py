"""Which transactions to apply: parsing ``until`` and planning replay (pure, no Spark, no I/O).

Semantics:

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

from dataclasses import dataclass, field
from datetime import datetime
from itertools import takewhile
from typing import Sequence

from wlcore.target import Target, parse_until  # noqa: F401 (wlr.parse_until)

from .errors import TargetError


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
    target as the message names it (default its instant; :func:`wlr.target.meaning` says
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
