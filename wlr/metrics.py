"""A replica's Prometheus metrics (:mod:`wlcore.metrics`): where it stands, how fast segments
land, what it reads and how it fails. Labels ``database`` (the master) and ``replica``.

Counted as they happen:

* ``wlr_segments_applied_total{engine}`` and ``wlr_segment_apply_seconds{engine}`` (histogram):
  each segment landed (a table's run of transactions as one commit, or one transaction with
  ``collapse=False``); ``engine`` ``spark`` or ``delta-rs``;
* ``wlr_transactions_applied_total``: master transactions those segments carried;
* ``wlr_change_rows_read_total``, ``wlr_change_rows_applied_total``: change rows read from the
  batches, and left after collapse (what was merged);
* ``wlr_failures_total{kind}``: failures stored (``transaction``: one failed to apply;
  ``logs``: a batch missing, damaged or out of place; ``diverged``: the source's history is
  not the replica's); ``wlr_retries_total{kind}``: a follower's tries of a stored failure.

Read when Prometheus scrapes (the figures ``wlr status`` prints, :meth:`wlr.Replica.status`):

* ``wlr_tick`` (MonetDB's ``wlr.tick()``), ``wlr_master_tick`` (last published; left out
  while the source cannot be read);
* ``wlr_lag_transactions`` (left out while unknown), ``wlr_lag_seconds`` (while the source
  cannot be read: the seconds since it was last read, growing by the clock);
* ``wlr_state{state}``: 1 for the replica's state, 0 for the others: ``following``,
  ``stopped``, ``failed`` (also while a follower retries), ``diverged``, ``unreachable`` (the
  source cannot be read or refuses the replica: ``wlr_failures_total{kind="source"}`` counts
  each time it became so);
* ``wlr_retry_attempts`` and ``wlr_next_retry_timestamp_seconds``: a follower's failed tries of
  the stored failure and when it tries again (Unix seconds; left out when none waits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from prometheus_client import Counter, Histogram

from wlcore import metrics
from wlcore.metrics import Family, Live, Sample, once

LABELS = ["database", "replica"]
SEGMENT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
STATES = ("following", "stopped", "failed", "diverged", "unreachable")

EVENTS = once(
    lambda: SimpleNamespace(
        segments=Counter("wlr_segments_applied", "Segments replay landed", [*LABELS, "engine"]),
        seconds=Histogram(
            "wlr_segment_apply_seconds",
            "Seconds to land a segment (read, collapse, commit)",
            [*LABELS, "engine"],
            buckets=SEGMENT_BUCKETS,
        ),
        transactions=Counter("wlr_transactions_applied", "Master transactions replay applied", LABELS),
        rows_read=Counter("wlr_change_rows_read", "Change rows replay read from batches", LABELS),
        rows_applied=Counter("wlr_change_rows_applied", "Change rows left after collapse, landed", LABELS),
        failures=Counter("wlr_failures", "Failures replay stored, by kind", [*LABELS, "kind"]),
        retries=Counter("wlr_retries", "A follower's tries of a stored failure, by kind", [*LABELS, "kind"]),
    )
)

_L = tuple(LABELS)
LIVE = Live(
    [
        Family("wlr_tick", "Id of the last transaction handled (MonetDB's wlr.tick(); -1: none)", _L),
        Family("wlr_master_tick", "Id of the last transaction the source published", _L),
        Family("wlr_lag_transactions", "Master commits not applied yet (as wlr status)", _L),
        Family("wlr_lag_seconds", "Age of the oldest master commit not applied yet (as wlr status)", _L),
        Family(
            "wlr_state",
            "1 for the replica's state (following, stopped, failed, diverged, unreachable), else 0",
            (*_L, "state"),
        ),
        Family("wlr_retry_attempts", "A follower's failed tries of the stored failure", _L),
        Family("wlr_next_retry_timestamp_seconds", "When a follower tries the stored failure again", _L),
    ]
)


class ReplicaMetrics:
    """The metrics of one replica, owned by its parts (:class:`wlr.parts.ReplicaParts`).

    Args:
        database: the master's name; replica: the replica's name.
        following: returns True while the replica's follow thread runs.
    """

    def __init__(self, database: str, replica: str, following: Callable[[], bool]) -> None:
        self.labels = {"database": database, "replica": replica}
        self._following = following
        self.status: Callable[[], dict[str, Any]] | None = None  # the replica's status(), set by its owner
        self.port: int | None = None  # the port this process serves /metrics on for it (None: none)

    def serve(self, port: int | str | None) -> int | None:
        """Report this replica and serve ``/metrics`` (:func:`wlcore.metrics.serve`).

        Args:
            port (int | str | None): the port (0: any free one; None: ``metrics.port``, off by default).

        Returns:
            int | None: the port served, also kept in :attr:`port`; None: metrics are off.

        Raises:
            MetricsError: the port is malformed or taken.
        """
        served = metrics.serve(port)
        if served is not None:
            self.port = served
            LIVE.add(self)
        return served

    def stop(self) -> None:
        """Stop reporting this replica's state (its counters stay, as counters do)."""
        LIVE.remove(self)

    def segment(self, engine: str, transactions: int, rows_in: int, rows_out: int, seconds: float) -> None:
        """Count a landed segment.

        Args:
            engine (str): ``spark`` or ``delta-rs``.
            transactions (int): the master transactions in it.
            rows_in (int): change rows read; rows_out (int): after collapse (-1: not known: ``rows_in``).
            seconds (float): how long it took to land.
        """
        e = EVENTS()
        v = self.labels.values()
        e.segments.labels(*v, engine).inc()
        e.seconds.labels(*v, engine).observe(seconds)
        e.transactions.labels(*v).inc(transactions)
        e.rows_read.labels(*v).inc(rows_in)
        e.rows_applied.labels(*v).inc(rows_out if rows_out >= 0 else rows_in)

    def failed(self, kind: str) -> None:
        """Count a stored failure (``transaction``, ``logs`` or ``diverged``)."""
        EVENTS().failures.labels(*self.labels.values(), kind).inc()

    def retried(self, kind: str) -> None:
        """Count a follower's try of a stored failure (its kind, as :meth:`failed`)."""
        EVENTS().retries.labels(*self.labels.values(), kind).inc()

    def samples(self) -> Iterable[Sample]:
        """The replica's state now (see the module)."""
        if self.status is None:
            return
        s = self.status()
        db = dict(self.labels)
        yield "wlr_tick", db, s["tick"]
        if s["master_tick"] is not None:
            yield "wlr_master_tick", db, s["master_tick"]
        if s["lag_transactions"] is not None:
            yield "wlr_lag_transactions", db, s["lag_transactions"]
        if s["lag_seconds"] is not None:
            yield "wlr_lag_seconds", db, s["lag_seconds"]
        state = state_of(s, self._following())
        for name in STATES:
            yield "wlr_state", {**db, "state": name}, 1 if name == state else 0
        yield "wlr_retry_attempts", db, s.get("retries") or 0
        if s.get("retry_at") is not None:
            yield "wlr_next_retry_timestamp_seconds", db, s["retry_at"].timestamp()

    def __repr__(self) -> str:
        return f"<replica metrics of {self.labels['replica']!r}>"


def state_of(status: dict[str, Any], following: bool) -> str:
    """The replica's state as ``wlr_state`` names it.

    Args:
        status (dict): :meth:`wlr.Replica.status`.
        following (bool): the follow thread of this process runs.

    Returns:
        str: ``diverged``, ``failed``, ``unreachable`` (the source cannot be read or refuses the
        replica), ``following`` or ``stopped``.
    """
    if status.get("diverged"):
        return "diverged"
    if status.get("error"):
        return "failed"
    if status.get("unreachable"):
        return "unreachable"
    return "following" if following else "stopped"
