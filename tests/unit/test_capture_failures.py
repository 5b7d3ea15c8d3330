"""Capture's failing scans (no Spark): a line each, tried again with backoff, and named by ``wlc status``.

A log folder on a read-only mount is what made the operator's scans fail; a test run as root
writes through ``chmod`` (``os.geteuid() == 0`` here), so the publisher below fails its scans
with the error such a folder gives instead."""

from __future__ import annotations

import logging
import re
import threading
from types import SimpleNamespace

from wlc.master import CaptureThread, retry_wait
from wlc.master_record import MasterRecord
from wlc.metrics import PublishCounts
from wlc.publisher import CaptureTiming
from wlcore.health import format_status, status
from wlcore.state import MasterState, read_master_state
from wlcore.storage import Storage

from ..waiting import wait_until


class _Publisher:
    """A publisher whose scans fail while ``broken`` is set (a read-only log folder's error)."""

    def __init__(self) -> None:
        self.broken = threading.Event()
        self.broken.set()
        self.failed = 0  # scans that failed
        self.counts = PublishCounts("db")
        self.capture = SimpleNamespace(quiet=SimpleNamespace(on=False), holds=SimpleNamespace(held={}))

    def step(self, take_all: bool, look: bool) -> bool:
        if self.broken.is_set():
            self.failed += 1
            raise PermissionError(13, "Permission denied", "/db/wlc_logs/.staging-db-000000000000")
        return False

    def due_in(self) -> None:
        return None

    def heartbeat(self) -> None:
        pass


def test_retry_wait_doubles_from_the_poll_interval_up_to_retry_max():
    assert [retry_wait(k, 1.0, 60.0) for k in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_a_failing_scan_is_one_error_line_each_with_backoff_and_status_says_why(tmp_path, caplog):
    st = Storage.of(str(tmp_path))
    (tmp_path / "db").mkdir()
    record = MasterRecord(st, str(tmp_path / "db"), "db", 1.0)
    record.config = MasterState(state=1, dbid="abc", tick=-1)
    record.save()
    publisher = _Publisher()
    catalog = SimpleNamespace(check_schemas=lambda: None)
    timing = CaptureTiming(settle=0.0, polling=True, poll_interval=0.02, stage_within=0.0, retry_max=0.16)
    thread = CaptureThread(publisher, catalog, record, timing, threading.RLock())  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="wlc")
    thread.start()
    try:
        failed = lambda: [r for r in caplog.records if r.levelno == logging.ERROR]  # noqa: E731
        wait_until(lambda: len(failed()) >= 5, 30, "five failed scans")
        text = format_status(status("db", str(tmp_path)))
        assert re.search(r"^capture +failing since ", text, re.M), text
        assert "PermissionError: [Errno 13] Permission denied: '/db/wlc_logs/" in text, text
        publisher.broken.clear()
        wait_until(lambda: not read_master_state(st, record.path).capture_error, 30, "the failure to clear")
    finally:
        thread.stop()
    errors = failed()
    assert all(r.exc_info and isinstance(r.exc_info[1], PermissionError) for r in errors)  # traces for the log file
    waits = [float(r.getMessage().split("tried again in ")[1].split(" s")[0]) for r in errors]
    assert waits[:5] == [0.02, 0.04, 0.08, 0.16, 0.16], waits  # backoff, not a line every poll interval
    assert len(errors) == publisher.failed  # every failed scan said once
    assert f"capture works again after {len(errors)} failed attempts" in (tmp_path / "db" / "wlc.log").read_text()
    assert re.search(r"^capture +alive", format_status(status("db", str(tmp_path))), re.M)
