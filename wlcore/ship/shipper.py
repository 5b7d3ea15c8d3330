"""Shipping again whenever the source publishes (:class:`Shipper`, ``wlc ship --follow``);
each pass is :func:`wlcore.ship.once.ship`."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from ..master_state import logs_of
from ..storage import Storage
from .destination import ShipError, ShipReport, ShipVerifyError, dest_root, read_config
from .metrics import ShipMetrics
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
        """A shipper, not started (:meth:`once`, :meth:`follow`).

        Args:
            storage (Storage): the source's storage.
            root (str): the source folder (a master's, or a shipped copy or relay holding a ``wlc.config``).
            dbname (str): the master's database name.
            to (str): the destination folder or URL (``s3://bucket/path``).
            poll (float | None): seconds between passes when no folder event wakes the shipper
                (None: ``storage.ship_poll``).
            **kwargs (Any): passed to :func:`wlcore.ship.ship` (``up_to_batch``, ``up_to_txn``,
                ``edit_config``).

        Raises:
            ShipError: ``to`` is empty.
        """
        from ..settings import settings

        self.storage, self.root, self.dbname, self.to = storage, root, dbname, dest_root(to)
        self.kwargs = kwargs
        self.poll = poll if poll is not None else settings().storage.ship_poll
        self.report = ShipReport()
        self.metrics = ShipMetrics(storage, root, dbname, self.to)  # Prometheus (wlcore.ship.metrics)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: FolderWatch | None = None

    def once(self, progress: bool = True) -> ShipReport:
        """One pass (:func:`wlcore.ship.ship`); what it shipped is also added to ``report``.

        Args:
            progress (bool): a bar for a long pass, on a terminal or in a notebook.

        Returns:
            ShipReport: what this pass shipped.

        Raises:
            ShipError, ShipVerifyError, OSError: as :func:`wlcore.ship.ship`.
        """
        try:
            out = ship(self.storage, self.root, self.dbname, self.to, progress=progress, **self.kwargs)
        except Exception as exc:
            self.metrics.error(type(exc).__name__)
            raise
        self.report.add(out)
        self.metrics.shipped(out)
        return out

    def follow(self, background: bool = True) -> "Shipper":
        """Keep shipping until :meth:`stop`: a pass, then another whenever the source publishes.
        Errors are logged and retried at the next pass, except a :class:`ShipError`, which ends
        following and is kept in ``error``.

        Args:
            background (bool): in a daemon thread (True), or in this one until :meth:`stop` (the CLI).

        Returns:
            Shipper: this shipper.
        """
        self.metrics.start()  # how far behind the copy is, on /metrics while following
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
            self.metrics.stop()

    @property
    def running(self) -> bool:
        """True while the following thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 60.0) -> ShipReport:
        """Stop following after the pass under way.

        Args:
            timeout (float): seconds to wait for the thread to end.

        Returns:
            ShipReport: ``report``, every pass added up.
        """
        self._stop.set()
        if self._watch is not None:
            self._watch.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.report
