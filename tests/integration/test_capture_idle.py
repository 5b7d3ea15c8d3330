"""An idle master costs (almost) nothing: capture does not wake itself with its own writes."""

import os
import threading
import time

import pytest
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

pytestmark = pytest.mark.spark


class _Count(FileSystemEventHandler):
    def __init__(self, name: str):
        self.name, self.hits, self.lock = name, 0, threading.Lock()

    def on_any_event(self, event):
        paths = (event.src_path, getattr(event, "dest_path", "") or "")
        if any(os.path.basename(p) == self.name for p in paths):
            with self.lock:
                self.hits += 1


def test_idle_master_rewrites_its_config_at_most_once_per_poll_interval(spark, master):
    spark.sql(f"CREATE TABLE delta.`{master.table_path('s.t')}` (id INT) USING delta")
    master.flush()
    counter, observer = _Count("wlc.config"), Observer()
    observer.schedule(counter, master.path, recursive=False)
    observer.start()
    before = master.config.watermark_time
    try:
        window = 3.0
        time.sleep(window)  # the measured idle window (nothing to wait for: we count what happens in it)
    finally:
        observer.stop()
        observer.join(timeout=5)
    # poll_interval is 0.2 s in tests: the watermark may move ~15 times; a write that woke
    # capture again made hundreds of events (a replace is one moved event each)
    assert counter.hits <= window / master.poll_interval + 3, counter.hits
    assert master.config.watermark_time > before  # the watermark still moves while idle


def test_an_idle_master_does_not_list_logs_that_did_not_change(spark, master, monkeypatch):
    import wlc.capture as capture_module
    from tests.waiting import wait_until

    paths = [master.table_path(f"s.t{i}") for i in range(3)]
    for path in paths:
        spark.sql(f"CREATE TABLE delta.`{path}` (id INT) USING delta")
    master.flush()
    made = time.time()  # the logs' last change
    listed: list[str] = []
    real = capture_module.list_versions
    monkeypatch.setattr(capture_module, "list_versions", lambda st, path: listed.append(path) or real(st, path))
    since = capture_module.versions_after  # a log read from its cursor on is listed too
    monkeypatch.setattr(capture_module, "versions_after", lambda st, path, v: listed.append(path) or since(st, path, v))
    discovered: list[str] = []
    real_discover = capture_module.discover_tables
    monkeypatch.setattr(
        capture_module, "discover_tables", lambda st, path, *a: discovered.append(path) or real_discover(st, path, *a)
    )

    def quiet_for_a_second() -> bool:  # five wake-ups at the tests' poll interval of 0.2 s
        before = len(listed), len(discovered)
        time.sleep(1.0)  # the window in which we count listings (nothing to wait for)
        return (len(listed), len(discovered)) == before

    # without events in the database folder a wake-up reads nothing; once the logs are older
    # than the racy window (2 s), even a scan woken by an event elsewhere lists only changed logs
    wait_until(quiet_for_a_second, timeout=30, what="idle wake-ups stop reading the tables' logs")
    watermark = master.config.watermark_time
    wait_until(lambda: master.config.watermark_time > watermark, timeout=10, what="the watermark to move while idle")
    from wlc.capture import RACY_MS

    # the other logs are past the racy window when the insert's scan reads them (the clock is
    # what the rule waits for)
    wait_until(lambda: time.time() > made + RACY_MS / 1000 + 0.5, timeout=10, what="the racy window to pass")
    tick = master.tick()
    spark.sql(f"INSERT INTO delta.`{paths[1]}` VALUES (1)")  # a commit is still seen at once
    wait_until(lambda: master.tick() > tick, timeout=30, what="the insert published")
    # that scan read the other logs (quiet for over 2 s) and recorded them: the next commit's
    # scan lists only the log that changed
    before, tick = len(listed), master.tick()
    spark.sql(f"INSERT INTO delta.`{paths[1]}` VALUES (2)")
    wait_until(lambda: master.tick() > tick, timeout=30, what="the second insert published")
    assert {os.path.basename(p) for p in listed[before:]} == {"t1"}
