"""The thread that captures a master: a scan at each wake-up, woken by filesystem events (or polling).

A wake-up without any event in the database folder since the last scan (a beat's timeout on an
idle master) reads no table's log: the folder's watcher vouches that nothing changed, so the
scan only publishes what is due and moves the watermark, as Litestream's watcher of a database
file does. Logs are read again at every event and at least every :data:`FULL_SCAN` seconds.

Each scan stages what capture finds and publishes the open batch when its beat is over
(:class:`wlc.publisher.Publisher`), writes the heartbeat, and warns about schemas made
outside the master (:class:`wlc.master_catalog.MasterCatalog`). A failed scan is logged (a line,
its traceback in the log file) and retried from the same cursors with backoff (:func:`retry_wait`),
as PostgreSQL's apply worker retries; ``wlc.config`` names the failure while it lasts. :class:`Background`
holds it, and the background life cycle beside it, while a master captures.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from wlcore.discovery import RESERVED
from wlcore.master_state import CONFIG_FILE, LOCK_FILE, LOG_FILE, STARTED
from wlcore.utc import utcnow
from wlcore.watch import FolderWatch

from .lifecycle import AutoLifecycle
from .master_catalog import MasterCatalog
from .master_record import MasterRecord
from .metrics import CaptureMetrics
from .publisher import CaptureTiming, Publisher

log = logging.getLogger("wlc.master")
# seconds between two scans that read every table's log although the database folder's watcher
# saw no change (the operating system may drop events when its queue overflows)
FULL_SCAN = 30.0


def retry_wait(attempt: int, interval: float, most: float) -> float:
    """Seconds capture waits after its ``attempt``-th failed scan in a row: the poll interval
    doubled at every attempt, at most ``most`` (``capture.retry_max``; by default 1, 2, 4 ... 60 s),
    as a held table's reads and a follower's retries back off.

    Args:
        attempt (int): failed scans in a row (1: the first).
        interval (float): ``capture.poll_interval``.
        most (float): ``capture.retry_max``.
    """
    first = max(0.01, float(interval))
    return min(max(first, float(most)), first * 2.0 ** max(0, attempt - 1))


class CaptureThread:
    """The capture thread of one master (a daemon), from :meth:`start` until :meth:`stop`.

    Args:
        publisher: the master's open batch (stages and publishes).
        catalog: the master's catalog calls (warns about schemas made outside the master).
        record: the master's ``wlc.config`` (the thread ends once its ``state`` is not started).
        timing: capture's timing (settle, polling, poll interval; seconds).
        lock: the master's lock, held during each scan.
    """

    def __init__(
        self,
        publisher: Publisher,
        catalog: MasterCatalog,
        record: MasterRecord,
        timing: CaptureTiming,
        lock: threading.RLock,
    ):
        self.publisher = publisher
        self.catalog = catalog
        self.record = record
        self.timing = timing
        self.lock = lock
        self.path = record.path
        self._stop = threading.Event()
        self._watch: FolderWatch | None = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None  # what the last scan raised (None: it went well)
        self.metrics = CaptureMetrics(publisher, record, lambda: self.alive)  # Prometheus, while capturing

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Watch the database folder where the storage can (:meth:`Storage.watcher`; else
        scans are polled) and start the thread."""
        self._watch = self.record.storage.watcher(
            self.path,
            recursive=True,
            polling=self.timing.polling,
            interval=self.timing.poll_interval,
            accept=self.relevant_event,
            skip=tuple(RESERVED),  # batches and snapshots: capture's own, thousands of folders
        )
        # local folders watched by events: a log folder's modification time tells whether it changed
        self.publisher.capture.quiet.on = self._watch is not None and not self.timing.polling
        for key in ("capture_error", "capture_error_since"):  # an earlier session's: this one says its own
            self.record.config.drop(key)
        self._thread = threading.Thread(target=self._run, name=f"wlc-capture-{self.record.dbname}", daemon=True)
        self.metrics.start()
        self._thread.start()

    def wake(self) -> None:
        """Scan now rather than at the end of the current wait."""
        if self._watch is not None:
            self._watch.wake()

    def stop(self) -> None:
        """End the thread (its current scan ends first) and stop watching."""
        self._stop.set()
        self.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()  # its current scan ends first: the capture lock must outlive it
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self.metrics.stop()

    def relevant_event(self, path: str) -> bool:
        """True for a commit, or a schema or table folder made or removed; never capture's own files.

        Args:
            path (str): the path a folder event names.
        """
        if "_delta_log" in path:
            return True
        if path.rstrip(os.sep) == self.path.rstrip(os.sep):
            return False  # the folder itself "modified": a file in it was, and that file's own event decides
        if path.count(os.sep) > self.path.count(os.sep) + 2:
            return False  # data files: their commit wakes us
        name = os.path.basename(path)
        return not (
            os.path.dirname(path) == self.path.rstrip(os.sep)
            and (name in (CONFIG_FILE, LOCK_FILE, LOG_FILE) or name.startswith(f".{CONFIG_FILE}."))
        )

    def _failed(self, exc: BaseException) -> None:
        """Say in ``wlc.config`` why capture fails (``capture_error``, ``capture_error_since``),
        with a heartbeat: capture is alive, and ``wlc status`` shows the failure. A
        ``wlc.config`` that cannot be written either is left as it is (the log has the line)."""
        cfg = self.record.config
        try:
            with self.lock:
                cfg.capture_error = " ".join(f"{type(exc).__name__}: {exc}".split())
                if cfg.capture_error_since is None:
                    cfg.capture_error_since = utcnow()
                cfg.heartbeat = utcnow()
                cfg.drop("capture_stopped")
                self.record.save()
        except Exception:
            log.debug("wlc.config of %s could not say why capture fails", self.record.dbname, exc_info=True)

    def _recovered(self, failures: int) -> None:
        """A scan went well after ``failures`` failed ones: ``wlc.log`` says so and
        ``wlc.config`` no longer names the failure."""
        with self.lock:
            self.record.note(f"capture works again after {failures} failed attempts")
            self.record.config.drop("capture_error")
            self.record.config.drop("capture_error_since")
            self.record.save()

    def _run(self) -> None:
        look, looked = True, time.monotonic()
        failures = 0  # scans failed in a row
        while not self._stop.is_set():
            timeout = self.timing.poll_interval
            deferred = False
            try:
                with self.lock:
                    if self.record.config.state != STARTED:
                        return
                    deferred = self.publisher.step(take_all=False, look=look)
                    looked = time.monotonic() if look else looked
                    due = self.publisher.due_in()
                    self.publisher.heartbeat()
                self.catalog.check_schemas()
                if deferred:
                    timeout = min(timeout, self.timing.settle)
                if due is not None:
                    timeout = min(timeout, max(due, 0.0))
                self.error = None
                if failures:
                    self._recovered(failures)
                    failures = 0
            except Exception as exc:  # keep capturing; the next scan retries from the same cursors
                self.error = exc
                self.metrics.error(type(exc).__name__)
                failures += 1
                timeout = retry_wait(failures, self.timing.poll_interval, self.timing.retry_max)
                log.error(
                    "capture of %s failed (attempt %d; tried again in %g s)",
                    self.record.dbname,
                    failures,
                    timeout,
                    exc_info=True,
                )
                self._failed(exc)
            if self.error is not None or self._watch is None:
                changed = self._stop.wait(timeout)  # a failure's backoff holds whatever the folder does
            else:
                changed = self._watch.wait(timeout)
            # the logs are read again after an event, a scan that left commits for later, a failed
            # or held read, and at least every FULL_SCAN seconds (an event the OS dropped)
            look = (
                changed
                or deferred
                or self.error is not None
                or bool(self.publisher.capture.holds.held)
                or self._watch is None
                or not self._watch.live
                or time.monotonic() - looked >= FULL_SCAN
            )


class Background:
    """The threads of a capturing master, from :meth:`start` (:meth:`wlc.Master.start`) until
    :meth:`stop` (:meth:`wlc.Master.close`): the capture thread and, when the settings ask for
    one, the background life cycle (:class:`wlc.lifecycle.AutoLifecycle`)."""

    def __init__(self) -> None:
        self.capture: CaptureThread | None = None  # from start() on
        self.auto: AutoLifecycle | None = None  # while running, when the settings ask for one

    @property
    def alive(self) -> bool:
        """True while the capture thread runs."""
        return self.capture is not None and self.capture.alive

    def start(self, capture: CaptureThread, auto: AutoLifecycle) -> None:
        """Start ``capture``, then ``auto`` when the settings ask for it (:attr:`AutoLifecycle.wanted`)."""
        self.capture = capture
        capture.start()
        if auto.wanted:
            self.auto = auto
            auto.start()

    def wake(self) -> None:
        """Have the capture thread scan now (nothing when none was started)."""
        if self.capture is not None:
            self.capture.wake()

    def stop(self) -> bool:
        """Stop the background life cycle, then the capture thread (its current scan ends first).

        Returns:
            bool: True when a capture thread was started (its stop is a clean stop to record).
        """
        if self.auto is not None:
            self.auto.stop()
            self.auto = None
        if self.capture is not None:
            self.capture.stop()
        return self.capture is not None
