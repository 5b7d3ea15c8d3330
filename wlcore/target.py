"""The replay target: up to transaction N, up to instant T, or everything published.

One type and one rule, used by the planner (:mod:`wlr.planner`: planning, log reading, level
routing) and the levels (:mod:`wlcore.levels`):

* :meth:`Target.admits` - is a point (a transaction id and its commit time) at or before the
  target? A snapshot, a compacted span or a transaction is usable toward the target only when
  its last transaction is admitted. Inclusive, as PostgreSQL's ``recovery_target_inclusive``.
* :meth:`Target.reached_by` - does a published batch hold the target or pass it, so that no
  later batch is needed? By id for ``up to N``; for an instant, only the batch's watermark
  proves that every commit by then is published (a later commit is no proof: capture may
  publish a transaction late, after a table was unreadable for a while).

:func:`parse_until` turns the ``until`` a caller gives (``wlr.replicate(until=...)``,
``wlr replicate --until``) into a Target, once per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .errors import TargetError
from .utc import as_utc

ALL, TXN, TIME = "all", "txn", "time"


@dataclass(frozen=True)
class Target:
    """A replay target.

    Attributes:
        kind: ``"all"`` (everything published), ``"txn"`` (every transaction with id <=
            ``txn``; -1: before the first) or ``"time"`` (every transaction committed at or
            before ``time``, a UTC instant).
        txn: the transaction id of a ``"txn"`` target.
        time: the aware UTC instant of a ``"time"`` target.
        given: the ``until`` this target was parsed from, as the caller wrote it (messages quote
            it; not part of equality); None: built from its bound.
    """

    kind: str
    txn: int | None = None
    time: datetime | None = None
    given: int | str | datetime | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Raises TargetError when the kind lacks its bound (a ``"txn"`` target without
        ``txn``, a ``"time"`` one without ``time``)."""
        if (self.kind == TXN and self.txn is None) or (self.kind == TIME and self.time is None):
            raise TargetError(f"a {self.kind!r} target needs its {self.kind}; build targets with parse_until")

    @property
    def until(self) -> int | str | datetime | None:
        """The ``until`` that asks for this target: :attr:`given`, else the bound (None for ``"all"``)."""
        if self.given is not None:
            return self.given
        return self.txn if self.kind == TXN else self.time

    @property
    def upto_txn(self) -> int:
        """The bound of a ``"txn"`` target: the last transaction id it includes (-1: before the first).

        Raises:
            TargetError: the target is not a ``"txn"`` one.
        """
        if self.kind != TXN or self.txn is None:
            raise TargetError(f"a {self.kind!r} target has no transaction id; check target.kind first")
        return self.txn

    @property
    def upto_time(self) -> datetime:
        """The bound of a ``"time"`` target: the last UTC commit instant it includes.

        Raises:
            TargetError: the target is not a ``"time"`` one.
        """
        if self.kind != TIME or self.time is None:
            raise TargetError(f"a {self.kind!r} target has no instant; check target.kind first")
        return self.time

    def published_by(self, tick: int, watermark: datetime | None, stopped: bool = False) -> bool:
        """True when a source that has published every transaction up to ``tick`` (-1: none), with
        the watermark ``watermark`` (UTC; None: none yet), holds the whole target: by id for ``up
        to N``; for an instant, its watermark passes it (:meth:`reached_by`), or the master
        ``stopped`` logging (every commit of a stopped master is published). Always for
        ``"all"``: everything published is published."""
        if self.kind == TXN:
            return self.reached_by(tick, None)
        if self.kind == TIME:
            return stopped or self.reached_by(tick, watermark)
        return True

    def precedes(self, txn: int, time: datetime) -> bool:
        """True when the point ``txn`` committed at ``time`` comes before the bound, exclusive:
        the rule of a lower bound such as ``wlr log --since``. Never for ``"all"``.

        Args:
            txn (int): a transaction id.
            time (datetime): its commit time (UTC).
        """
        if self.kind == TXN:
            return txn < self.upto_txn
        if self.kind == TIME:
            return time < self.upto_time
        return False

    def __str__(self) -> str:
        if self.kind == TXN:
            return f"transaction {self.txn}"
        if self.kind == TIME:
            assert self.time is not None  # __post_init__
            return self.time.isoformat()
        return "everything published"

    def admits(self, txn: int, time: datetime | None) -> bool:
        """True when a point is at or before the target, inclusive (MonetDB's ``wlr.replicate(N)``;
        PostgreSQL's ``recovery_target_inclusive``).

        A point of unknown time is admitted by an instant only when it is before the first
        transaction (an empty start): a time that is not known proves nothing.

        Args:
            txn (int): a transaction id (-1: before the first).
            time (datetime | None): its commit time (UTC; None: not known).
        """
        if self.kind == TXN:
            assert self.txn is not None  # __post_init__
            return txn <= self.txn
        if self.kind == TIME:
            assert self.time is not None  # __post_init__
            return txn < 0 if time is None else time <= self.time
        return True

    def reached_by(self, last_txn: int | None, watermark: datetime | None) -> bool:
        """True when a published batch holds the target or passes it, so no later batch is needed.
        Never for ``"all"``: everything published has no last batch.

        Args:
            last_txn (int | None): the batch's last transaction (None: it holds none).
            watermark (datetime | None): the batch's watermark (UTC): every commit at or before it
                is published (None: none).
        """
        if last_txn is None:
            return False
        if self.kind == TXN:
            assert self.txn is not None  # __post_init__
            return last_txn >= self.txn
        if self.kind == TIME:
            assert self.time is not None  # __post_init__
            return watermark is not None and watermark >= self.time
        return False


EVERYTHING = Target(ALL)


def parse_until(until: Target | int | str | datetime | None) -> Target:
    """Turn ``until`` into a :class:`Target`.

    Args:
        until: None (everything published); an int transaction id >= 0, or -1 for before the
            first transaction; a datetime (naive means UTC); or an ISO-8601 string such as
            ``"2026-11-22T10:15:00Z"`` or ``"2026-11-22 10:15:00+01:00"`` (a date alone,
            ``"2026-11-22"``, is the start of that day, UTC: see :mod:`wlr.target`).

    Returns:
        the Target, carrying ``until`` as given (:attr:`Target.given`).

    Raises:
        TargetError: any other value, e.g. ``Timestamp 'halo' has incorrect format``.
    """
    if until is None:
        return EVERYTHING
    if isinstance(until, Target):
        return until
    if isinstance(until, bool):
        raise TargetError(f"until={until!r} is neither a transaction id nor an instant")
    if isinstance(until, int):
        if until < -1:
            raise TargetError(f"transaction id {until} is negative; ids start at 0 (-1: before the first transaction)")
        return Target(TXN, txn=until, given=until)
    if isinstance(until, datetime):
        return Target(TIME, time=as_utc(until), given=until)
    if isinstance(until, str):
        text = until.strip()
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            raise TargetError(
                f"Timestamp '{until}' has incorrect format; use ISO-8601, "
                "e.g. '2026-11-22T10:15:00Z', or an int transaction id"
            ) from None
        return Target(TIME, time=as_utc(parsed), given=until)
    raise TargetError(
        f"until={until!r} ({type(until).__name__}) is neither a transaction id (int) "
        "nor an instant (datetime or ISO-8601 string)"
    )
