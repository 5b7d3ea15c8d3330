"""A shipper's Prometheus metrics (:mod:`wlcore.metrics`), labels ``database`` and
``destination`` (the copy's folder or URL; one a shipper):

* ``wlc_ship_batches_total``, ``wlc_ship_snapshots_total``, ``wlc_ship_bytes_total``: batch and
  snapshot folders published at the destination and the bytes copied (counted after each pass);
* ``wlc_ship_errors_total{kind}``: passes that failed (``kind``: the exception's class), each
  retried by the next pass;
* read at scrape time: ``wlc_ship_behind_batches`` (level-0 batches the source published that
  the copy does not hold yet) and ``wlc_ship_behind_seconds`` (how long ago the oldest of them
  was published; 0 when the copy holds everything).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from types import SimpleNamespace

from prometheus_client import Counter

from ..batch import MANIFEST, batch_name
from ..master_state import logs_of
from ..metrics import Family, Live, Sample, once
from ..storage import Storage
from .destination import ShipReport, read_config

LABELS = ["database", "destination"]
EVENTS = once(
    lambda: SimpleNamespace(
        batches=Counter("wlc_ship_batches", "Batch folders published at the destination", LABELS),
        snapshots=Counter("wlc_ship_snapshots", "Snapshot folders published at the destination", LABELS),
        bytes=Counter("wlc_ship_bytes", "Bytes copied to the destination", LABELS),
        errors=Counter("wlc_ship_errors", "Shipping passes that failed, by the exception's class", [*LABELS, "kind"]),
    )
)
_L = tuple(LABELS)
LIVE = Live(
    [
        Family("wlc_ship_behind_batches", "Level-0 batches published at the source, not yet at the copy", _L),
        Family("wlc_ship_behind_seconds", "Seconds since the oldest batch the copy lacks was published", _L),
    ]
)


class ShipMetrics:
    """The metrics of one shipper (:class:`wlcore.ship.Shipper`).

    Args:
        storage: the source's storage; root: the source folder (holding a ``wlc.config``).
        dbname: the master's database name; to: the destination folder or URL.
    """

    def __init__(self, storage: Storage, root: str, dbname: str, to: str) -> None:
        self.storage, self.root, self.dbname, self.to = storage, root, dbname, to
        self.labels = (dbname, to)

    def start(self) -> None:
        """Report how far behind the copy is, from now on."""
        LIVE.add(self)

    def stop(self) -> None:
        """Stop reporting it (the counters stay)."""
        LIVE.remove(self)

    def shipped(self, report: ShipReport) -> None:
        """Count what one pass published.

        Args:
            report (ShipReport): the pass's report.
        """
        e = EVENTS()
        e.batches.labels(*self.labels).inc(len(report.batches))
        e.snapshots.labels(*self.labels).inc(len(report.snapshots))
        e.bytes.labels(*self.labels).inc(report.bytes)

    def error(self, kind: str) -> None:
        """Count a failed pass (``kind``: the exception's class name)."""
        EVENTS().errors.labels(*self.labels, kind).inc()

    def samples(self) -> Iterable[Sample]:
        """How far behind the copy is now: two small files read, one ``stat`` when it lacks a batch."""
        labels = dict(zip(LABELS, self.labels, strict=True))
        source = read_config(self.storage, self.root)
        if source is None:
            return
        copy = read_config(Storage.of(self.to), self.to)
        held = copy.batches if copy is not None else 0
        behind = max(0, source.batches - held)
        yield "wlc_ship_behind_batches", labels, behind
        seconds = 0.0
        if behind:
            manifest = Storage.join(logs_of(source, self.root), batch_name(self.dbname, held), MANIFEST)
            try:
                published = self.storage.mtime_ms(manifest)
            except FileNotFoundError:  # pruned at the source, or not there: age unknown
                published = None
            if published is not None:
                seconds = max(0.0, time.time() - published / 1000.0)
        yield "wlc_ship_behind_seconds", labels, seconds

    def __repr__(self) -> str:
        return f"<ship metrics of {self.dbname!r} to {self.to!r}>"
