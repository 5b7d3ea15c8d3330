"""Shipping again whenever the source publishes (:class:`Shipper`, ``wlc ship --follow``);
each pass is :func:`wlcore.ship.once.ship`."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from ..master_state import logs_of
from ..storage import Storage
from .destination import ShipError, ShipReport, ShipVerifyError, dest_root, read_config
from .once import ship

if TYPE_CHECKING:
    from ..watch import FolderWatch

log = logging.getLogger("wlc.ship")


class Shipper:
    """Ships a source to one destination now and, following, again whenever the source
    publishes (folder events on local logs, else every ``storage.ship_poll`` seconds),
    until :meth:`stop`. ``report`` adds up every pass; ``error`` is the exception that
    ended following, if any."""

    def __init__(self, storage: Storage, root: str, dbname: str, to: str, poll: float | None = None, **kwargs: Any):
        """``storage``/``root``/``dbname``/``to`` as :func:`ship`'s; ``poll``: seconds between
        passes when no folder event wakes the shipper (default ``storage.ship_poll``);
        ``kwargs``: passed to :func:`ship` (``up_to_batch``, ``up_to_txn``, ``edit_config``).

        Raises:
            ShipError: ``to`` is empty.
        """
        from ..settings import settings

        self.storage, self.root, self.dbname, self.to = storage, root, dbname, dest_root(to)
        self.kwargs = kwargs
        self.poll = poll if poll is not None else settings().storage.ship_poll
        self.report = ShipReport()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: FolderWatch | None = None

    def once(self, progress: bool = True) -> ShipReport:
        """One pass; returns what it shipped (also added to ``report``). Raises as :func:`ship`."""
        out = ship(self.storage, self.root, self.dbname, self.to, progress=progress, **self.kwargs)
        self.report.add(out)
        return out

    def follow(self, background: bool = True) -> "Shipper":
        """Keep shipping until :meth:`stop`; in a daemon thread, or in this one (the CLI).
        Returns this shipper."""
        if background:
            self._thread = threading.Thread(target=self._loop, name=f"wlc-ship-{self.dbname}", daemon=True)
            self._thread.start()
        else:
            self._loop()
        return self

    def _loop(self) -> None:
        from ..settings import settings

        logs = logs_of(read_config(self.storage, self.root), self.root)
        polling = settings().capture.polling
        watch = self.storage.watcher(logs, recursive=False, polling=polling, interval=self.poll)  # None: polled
        self._watch = watch
        try:
            while not self._stop.is_set():
                try:
                    self.once(progress=False)
                except ShipVerifyError as exc:  # copied again by the next pass
                    log.warning("shipping %s to %s: %s; retrying", self.dbname, self.to, exc)
                except ShipError as exc:
                    self.error = exc
                    log.error("shipping %s to %s stopped: %s", self.dbname, self.to, exc)
                    return
                except Exception as exc:  # a lost connection: the next pass resumes
                    log.warning("shipping %s to %s: %s; retrying", self.dbname, self.to, exc)
                if watch is not None:
                    watch.wait(self.poll)
                else:
                    self._stop.wait(self.poll)
        finally:
            if watch is not None:
                watch.close()

    @property
    def running(self) -> bool:
        """True while the following thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 60.0) -> ShipReport:
        """Stop following after the pass under way, waiting up to ``timeout`` seconds for
        the thread; returns ``report``."""
        self._stop.set()
        if self._watch is not None:
            self._watch.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.report
