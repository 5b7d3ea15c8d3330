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

What a target was taken to mean, and whether it can come (pure: no Spark, no I/O): the
functions below say what the target means where that may surprise, and decide, before
anything is written, which targets ``replicate()`` refuses instead of building the wrong
replica or waiting in silence:

* a date without a time (``"2026-11-24"``, as :meth:`datetime.fromisoformat` reads ISO-8601
  dates) is the start of that day, UTC: :func:`date_note` says so;
* a new replica whose target is before the master's first transaction (an instant before
  its first commit, or ``until=-1``) would hold none of the master's transactions:
  :func:`check_not_empty` refuses it unless an empty replica is asked for;
* a target the master has not published yet (a transaction id above its tick, an instant
  after its watermark: :func:`ahead`) is waited for, up to ``replica.timeout`` seconds;
  :func:`check_capture` refuses one that cannot come because capture is stale or the master
  stopped logging, and :func:`check_in_time` an instant later than the wait can cover (the
  watermark passes an instant ``capture.settle`` seconds after it, at the earliest).

:class:`Published` is what a source's ``wlc.config`` says it has published (tick,
watermark, last commit) and capture's liveness (:func:`wlcore.state.capture_liveness`),
worded for these messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from enum import StrEnum
from typing import TypeGuard

from .errors import ReplicationTimeout, TargetError
from .state import MasterState, capture_liveness
from .utc import as_utc


class TargetKind(StrEnum):
    """What a target bounds: everything published, a transaction id, or a commit instant."""

    ALL = "all"
    TXN = "txn"
    TIME = "time"


ALL, TXN, TIME = TargetKind.ALL, TargetKind.TXN, TargetKind.TIME


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

    kind: TargetKind
    txn: int | None = None
    time: datetime | None = None
    given: int | str | datetime | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Raises TargetError when the kind lacks its bound (a ``"txn"`` target without
        ``txn``, a ``"time"`` one without ``time``, or another kind)."""
        try:
            object.__setattr__(self, "kind", TargetKind(self.kind))  # also from its text
        except ValueError:
            raise TargetError(f"a target's kind is one of {', '.join(TargetKind)}, not {self.kind!r}") from None
        if (self.kind == TXN and self.txn is None) or (self.kind == TIME and self.time is None):
            raise TargetError(f"a {self.kind.value!r} target needs its {self.kind}; build targets with parse_until")

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
            raise TargetError(f"a {self.kind.value!r} target has no transaction id; check target.kind first")
        return self.txn

    @property
    def upto_time(self) -> datetime:
        """The bound of a ``"time"`` target: the last UTC commit instant it includes.

        Raises:
            TargetError: the target is not a ``"time"`` one.
        """
        if self.kind != TIME or self.time is None:
            raise TargetError(f"a {self.kind.value!r} target has no instant; check target.kind first")
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
            ``"2026-11-22"``, is the start of that day, UTC: see :func:`wlcore.target.date_note`).

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


def instant(ts: datetime | None) -> str:
    """``ts`` as ISO-8601 UTC with ``Z`` (microseconds only when there are any); ``none`` for None."""
    if ts is None:
        return "none"
    return ts.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def date_only(until) -> TypeGuard[str]:
    """True when ``until`` is a string holding an ISO-8601 date without a time
    (``"2026-11-24"``, ``"20261124"``, ``"2026-W47-2"``), which is taken as midnight UTC."""
    if not isinstance(until, str):
        return False
    try:
        date.fromisoformat(until.strip())
    except ValueError:
        return False
    return True


def spelled(until, cli: bool = False) -> str:
    """``until`` as the caller wrote it: ``--until 2026-11-24`` (``cli``) or ``until='2026-11-24'``."""
    if cli:
        return f"--until {until}"
    return f"until={instant(until) if isinstance(until, datetime) else repr(until)}"


def meaning(target: Target) -> str:
    """The target as messages name it: ``transaction 42``, ``2030-01-01T00:00:00Z``, or for a
    date-only string ``2026-11-24 (taken as 2026-11-24T00:00:00Z, the start of that day, UTC)``."""
    until = target.until
    if target.kind == "txn":
        return (
            "before the first transaction (transaction -1)"
            if target.upto_txn == -1
            else f"transaction {target.upto_txn}"
        )
    if target.kind == "time":
        if date_only(until):
            return f"{until.strip()} ({_taken(target)})"
        return instant(target.upto_time)
    return "everything published"


def asked(target: Target, cli: bool = False) -> str:
    """``until`` as the caller wrote it (:attr:`Target.until`), with what it was taken to mean where that is not
    plain: ``--until 2026-11-24 (taken as 2026-11-24T00:00:00Z, the start of that day, UTC)``."""
    until = target.until
    text = spelled(until.strip() if isinstance(until, str) else until, cli)
    return f"{text} ({_taken(target)})" if target.kind == "time" and date_only(until) else text


def _taken(target: Target) -> str:
    return f"taken as {instant(target.upto_time)}, the start of that day, UTC"


def date_note(target: Target, cli: bool = False) -> str | None:
    """What a date-only ``until`` (:attr:`Target.until`) was taken to mean (None for any other ``until``), e.g.
    ``--until 2026-11-24 taken as 2026-11-24T00:00:00Z (the start of that day, UTC); write
    the full instant to mean another time``."""
    until = target.until
    if target.kind != "time" or not date_only(until):
        return None
    example = f"{until.strip()}T17:30:00Z"
    return (
        f"{spelled(until.strip(), cli)} taken as {instant(target.upto_time)} (the start of that day, UTC); write the "
        f"full instant to mean another time, e.g. {spelled(example, cli)}"
    )


@dataclass(frozen=True)
class Published:
    """What a source's ``wlc.config`` says: ``tick`` (last published transaction, -1: none),
    ``watermark`` (every commit at or before it is published; None: none yet or stopped),
    ``last_commit`` (commit time of ``tick``), ``stopped`` (the master stopped logging),
    ``capture`` (``alive``, ``stale``, ``stopped`` or ``not started`` as read from the master's
    wlc.config, :func:`wlcore.state.capture_liveness`; ``""`` for a shipped copy or a relay, where capture's liveness is not known)
    with its last ``heartbeat``, and ``source`` (who published, for messages)."""

    tick: int
    watermark: datetime | None
    last_commit: datetime | None
    stopped: bool
    capture: str
    heartbeat: datetime | None
    source: str = "the master"

    @classmethod
    def of(cls, mcfg: MasterState, now: datetime, source: str = "the master", is_master: bool = True) -> "Published":
        """Read ``mcfg`` (a source's wlc.config) at UTC instant ``now``; ``is_master`` False
        for a shipped copy or a relay (their heartbeat is not capture's)."""
        capture, beat = capture_liveness(mcfg, now) if is_master else ("", None)
        return cls(mcfg.tick, mcfg.watermark_time, mcfg.write, mcfg.stopped, capture, beat, source)

    def capture_text(self) -> str:
        """``capture alive``, ``capture stale since <instant>``, ``capture stopped (...)``,
        ``capture unknown (...)``; ``""`` where capture's liveness is not known."""
        if self.capture == "stale":
            return f"capture stale since {instant(self.heartbeat)}"
        if self.capture == "stopped" and self.stopped:
            return "capture stopped (the master stopped logging)"
        if self.capture == "stopped":
            return f"capture stopped at {instant(self.heartbeat)}" if self.heartbeat else "capture stopped"
        if self.capture == "not started":
            return "capture not started"
        if self.capture == "unknown":
            return "capture unknown (no heartbeat in wlc.config)"
        return f"capture {self.capture}" if self.capture else ""

    def describe(self) -> str:
        """``the master has published up to transaction 36 (watermark ..., last commit ...,
        capture alive)``."""
        parts = [
            f"watermark {'stopped' if self.stopped else instant(self.watermark)}",
            f"last commit {instant(self.last_commit)}",
            self.capture_text(),
        ]
        upto = f"up to transaction {self.tick}" if self.tick >= 0 else "no transaction yet"
        return f"{self.source} has published {upto} ({', '.join(p for p in parts if p)})"


def ahead(target: Target, pub: Published) -> bool:
    """True when ``target`` is not published yet (:meth:`wlcore.target.Target.published_by`): a
    transaction id above ``pub.tick``, or an instant after the watermark of a master still logging."""
    return not target.published_by(pub.tick, pub.watermark, pub.stopped)


def check_capture(target: Target, pub: Published, capture_command: str) -> None:
    """Raise when ``target`` is not published and never will be while things stay as they are.

    Args:
        target: the target (its ``until`` as given is named in the message).
        pub: what the source has published.
        capture_command: the command that starts capture on the master (``wlc capture <dbfarm> <master>``).

    Raises:
        ReplicationTimeout: the master stopped logging (``wlc.stop()``) before a transaction
            id asked for; capture is not running (its heartbeat is stale, it was stopped, or
            it never started).
    """
    if not ahead(target, pub):
        return
    named = meaning(target)
    if pub.stopped:  # an instant is never ahead of a stopped master
        raise ReplicationTimeout(
            f"{pub.source} stopped logging at transaction {pub.tick}: {named} will never be "
            f"published. Choose a target at or before transaction {pub.tick}"
        )
    if pub.capture in ("stale", "stopped", "not started"):  # killed, stopped cleanly, never started
        msg = f"{named} is not published yet and capture is not running: {pub.describe()}. "
        raise ReplicationTimeout(
            msg + f"Start capture on the master ({capture_command}, or wlc.master() in a "
            "program), then replicate again",
            cli=msg + f"Start capture on the master: {capture_command}; then run wlr replicate again",
        )


def check_in_time(target: Target, pub: Published, now: datetime, timeout: float, settle: float) -> None:
    """Refuse an instant the wait cannot cover: capture publishes an instant (its watermark
    passes it) ``settle`` seconds after it at the earliest, so one later than ``now +
    timeout - settle`` cannot be reached within ``timeout`` seconds.

    Raises:
        TargetError: naming the fixes (follow instead, a larger timeout, an earlier target).
    """
    if target.kind != "time" or not ahead(target, pub):
        return
    wait = (target.upto_time - now).total_seconds() + settle
    if wait <= timeout:
        return
    why = (
        f" is {_span(wait - settle)} from now; capture publishes an instant {settle:g} s after it at the "
        f"earliest, after the {timeout:g} s replicate waits for its target (replica.timeout); "
        f"{pub.describe()}. "
    )
    raise TargetError(
        f"{asked(target)}{why}Follow the master instead (replicate(until=None) applies what is published "
        "and keeps following), give a larger timeout= (replica.timeout), or an earlier until",
        cli=f"{asked(target, True)}{why}Follow the master instead: wlr replicate <dbfarm> <master> "
        "<replica> --follow; or set a larger replica.timeout (in a --config FILE); or give an earlier --until",
    )


def check_not_empty(
    target: Target,
    first: tuple[int, datetime] | None,
    pub: Published,
    initial_snapshot: bool,
    empty: bool,
    master: str,
) -> None:
    """Refuse a new replica whose target is before the master's first transaction.

    Args:
        target: the target (its ``until`` as given is named in the message).
        first: ``(txn, commit time)`` of the first transaction after the replica's start (a
            start at transaction -1), or None when none is published yet.
        pub: what the source has published.
        initial_snapshot: the start is the master's first snapshot (tables it had when master
            mode began) rather than an empty database.
        empty: the caller asked for such a replica (``empty=True``, ``--empty``).
        master: the master's name.

    Raises:
        TargetError: naming the first transaction and its time, and how to ask anyway.
    """
    if empty or target.kind == "all":
        return
    if target.kind == "txn":
        before = not target.admits(0, None)  # the first transaction of a start at -1 is 0
    elif first is not None:
        before = not target.admits(*first)
    else:
        before = not ahead(target, pub)  # nothing published, and the watermark is past the target
    if not before:
        return
    what = (
        "the master's tables as they were when master mode began (its first snapshot) and none of its transactions"
        if initial_snapshot
        else "no table and no row"
    )
    where = (
        f"before the first transaction of master {master!r} (transaction {first[0]}, committed {instant(first[1])})"
        if first is not None
        else f"before any transaction of master {master!r} ({pub.describe()})"
    )
    rest = f" is {where}: a new replica would hold {what}. "
    raise TargetError(
        asked(target) + rest + "Give a later until (wlr.transactions() lists the transactions), "
        "or pass empty=True to make such a replica anyway",
        cli=asked(target, True) + rest + f"Give a later --until (wlr log <dbfarm> {master} lists "
        "the transactions), or add --empty to make such a replica anyway",
    )


def _span(seconds: float) -> str:
    """A duration for people: ``45 s``, ``12 min``, ``5 h``, ``1263 days``."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"
