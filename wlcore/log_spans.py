"""The published batches of a log folder as spans (:class:`wlcore.levels.Span`), each manifest
read once: a published batch never changes, so its span is remembered while the batch is there.
The master's life cycle (:mod:`wlc.lifecycle`) and the pruning of shipped copies and relays
(:mod:`wlcore.ship.prune`) both read their folders through it."""

from __future__ import annotations

import threading

from . import batch as batchfmt
from .levels import Span
from .storage import Storage


class SpanCache:
    """The spans of one log folder's batches, every level (thread-safe).

    Args:
        storage: the storage holding the folder.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._known: dict[str, Span] = {}
        self._lock = threading.Lock()

    def span(self, path: str) -> Span:
        """The span of the published batch at ``path`` (its manifest read the first time).

        Raises:
            BatchError: the manifest is missing or damaged.
        """
        with self._lock:
            known = self._known.get(path)
        if known is None:
            known = Span.of(batchfmt.read_manifest(self.storage, path), path)
            with self._lock:
                self._known[path] = known
        return known

    def spans(self, logs: str, dbname: str) -> list[Span]:
        """Every published batch of ``dbname`` in ``logs``: level 0 ascending, then compacted
        batches by first batch; batches no longer there are forgotten.

        Args:
            logs (str): the log folder.
            dbname (str): the master's name (its batches' prefix).

        Raises:
            BatchError: a manifest is missing or damaged.
        """
        found = [p for _n, p in batchfmt.list_batches(self.storage, logs, dbname)]
        found += [p for *_x, p in batchfmt.list_compacted(self.storage, logs, dbname)]
        with self._lock:
            for gone in set(self._known) - set(found):
                del self._known[gone]
        return [self.span(p) for p in found]

    def forget(self, path: str) -> None:
        """Forget the batch at ``path`` (deleted)."""
        with self._lock:
            self._known.pop(path, None)
