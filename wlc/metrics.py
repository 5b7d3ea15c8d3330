"""Capture's Prometheus metrics (:mod:`wlcore.metrics`): what a capturing master publishes,
how long publishing takes, what it holds back and how big its logs are.

Counted as they happen (label ``database``):

* ``wlc_transactions_published_total``, ``wlc_batches_published_total``;
* ``wlc_publish_seconds`` (histogram): writing the open batch's change rows, its manifest and
  publishing its folder, then ``wlc.config``;
* ``wlc_errors_total{kind}``: scans that failed (``kind``: the exception's class, e.g.
  ``OSError``, ``BatchError``), each retried from the same cursors.

Read when Prometheus scrapes, from the master's ``wlc.config`` and log folder (what
``wlc status`` prints):

* ``wlc_tick``: the last published transaction (MonetDB's ``wlc.tick()``; -1: none);
* ``wlc_staged_transactions``: captured into the open batch, not published yet;
* ``wlc_heartbeat_age_seconds``: seconds since capture's last heartbeat in ``wlc.config``;
* ``wlc_watermark_timestamp_seconds``: the watermark (every commit before it is published), Unix seconds;
* ``wlc_tables_not_replicated``: Delta tables capture cannot carry (``wlc status`` names them);
* ``wlc_tables_held``: tables whose reads failed, read again with backoff (the others go on);
* ``wlc_log_batches{level}``, ``wlc_log_bytes{level}``: published batches by level (0, 1, 2);
* ``wlc_snapshots``: complete snapshots replicas may start from;
* ``wlc_capture_up``: 1 while the capture thread runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import Counter, Histogram

from wlcore.metrics import Family, Live, LogUsage, Sample, once
from wlcore.snapshots import list_snapshots
from wlcore.utc import utcnow

if TYPE_CHECKING:
    from .master_record import MasterRecord

PUBLISH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

EVENTS = once(
    lambda: SimpleNamespace(
        transactions=Counter("wlc_transactions_published", "Transactions capture published", ["database"]),
        batches=Counter("wlc_batches_published", "Level-0 batches capture published", ["database"]),
        publish=Histogram(
            "wlc_publish_seconds",
            "Seconds to publish a batch (its change rows, manifest and folder, then wlc.config)",
            ["database"],
            buckets=PUBLISH_BUCKETS,
        ),
        errors=Counter(
            "wlc_errors", "Capture scans that failed, by the exception's class (each retried)", ["database", "kind"]
        ),
    )
)

DB = ("database",)
LIVE = Live(
    [
        Family("wlc_tick", "Id of the last published transaction (MonetDB's wlc.tick(); -1: none)", DB),
        Family("wlc_staged_transactions", "Transactions captured into the open batch, not published yet", DB),
        Family("wlc_heartbeat_age_seconds", "Seconds since capture's last heartbeat in wlc.config", DB),
        Family("wlc_watermark_timestamp_seconds", "Capture's watermark: every commit before it is published", DB),
        Family("wlc_tables_not_replicated", "Delta tables capture cannot carry (wlc status names them)", DB),
        Family("wlc_tables_held", "Tables whose reads failed, read again with backoff", DB),
        Family("wlc_log_batches", "Published batches in the log folder, by level", ("database", "level")),
        Family("wlc_log_bytes", "Bytes of the published batches in the log folder, by level", ("database", "level")),
        Family("wlc_snapshots", "Complete snapshots replicas may start from", DB),
        Family("wlc_capture_up", "1 while the capture thread runs", DB),
    ]
)


class PublishCounts:
    """What one master's publisher publishes (``wlc_transactions_published_total``,
    ``wlc_batches_published_total``, ``wlc_publish_seconds``), counted once its capture is
    reported (:meth:`CaptureMetrics.start`: a master that does not capture here counts nothing).

    Args:
        database: the master database's name (the ``database`` label).

    Attributes:
        on: True once counting (set by :meth:`CaptureMetrics.start`).
    """

    def __init__(self, database: str) -> None:
        self.database = database
        self.on = False

    def published(self, transactions: int, seconds: float) -> None:
        """Count a published batch (nothing until :attr:`on`).

        Args:
            transactions (int): the transactions in it.
            seconds (float): how long publishing it took.
        """
        if not self.on:
            return
        events = EVENTS()
        events.transactions.labels(self.database).inc(transactions)
        events.batches.labels(self.database).inc()
        events.publish.labels(self.database).observe(seconds)


class Publishing(Protocol):
    """What the metrics read of a master's open batch (:class:`wlc.publisher.Publisher`)."""

    counts: PublishCounts
    capture: Any  # its capture (the tables held)

    @property
    def staged(self) -> int:
        """Transactions captured into the open batch and not published yet."""
        ...


class CaptureMetrics:
    """The metrics of one capturing master, owned by its capture thread
    (:class:`wlc.master.CaptureThread`).

    Args:
        publisher: the master's open batch (staged transactions, held tables, what it publishes).
        record: the master's ``wlc.config`` and folders.
    """

    def __init__(self, publisher: Publishing, record: MasterRecord) -> None:
        self.publisher, self.record = publisher, record
        self.database = record.dbname
        self.usage = LogUsage(record.storage, record.logs, record.dbname)
        self.thread: threading.Thread | None = None  # the capture thread, once started

    def start(self, thread: threading.Thread) -> None:
        """Report this master from now on, and count what its publisher publishes.

        Args:
            thread (threading.Thread): the capture thread (``wlc_capture_up`` is 1 while it runs).
        """
        self.thread = thread
        self.publisher.counts.on = True
        LIVE.add(self)

    def stop(self) -> None:
        """Stop reporting this master's state (its counters stay, as counters do)."""
        LIVE.remove(self)

    def error(self, kind: str) -> None:
        """Count a failed scan (``kind``: the exception's class name)."""
        EVENTS().errors.labels(self.database, kind).inc()

    def samples(self) -> Iterable[Sample]:
        """The master's state now (see the module)."""
        cfg = self.record.config
        db = {"database": self.database}
        now = utcnow()
        yield "wlc_tick", db, cfg.tick
        yield "wlc_staged_transactions", db, self.publisher.staged
        if cfg.heartbeat is not None:
            yield "wlc_heartbeat_age_seconds", db, max(0.0, (now - cfg.heartbeat).total_seconds())
        watermark = cfg.watermark_time
        if watermark is not None:
            yield "wlc_watermark_timestamp_seconds", db, watermark.timestamp()
        yield "wlc_tables_not_replicated", db, len(cfg.not_replicated)
        yield "wlc_tables_held", db, len(self.publisher.capture.holds.held)
        for level, (batches, size) in self.usage.by_level().items():
            yield "wlc_log_batches", {**db, "level": str(level)}, batches
            yield "wlc_log_bytes", {**db, "level": str(level)}, size
        snaps = list_snapshots(self.record.storage, self.record.path, cfg.snapshot, self.record.store)
        yield "wlc_snapshots", db, len([s for s in snaps if s.path])
        yield "wlc_capture_up", db, 1 if self.thread is not None and self.thread.is_alive() else 0

    def __repr__(self) -> str:
        return f"<capture metrics of {self.database!r}>"
