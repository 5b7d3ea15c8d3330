"""The folder watch: watchdog's harmless stop race is not shown as an error, others are."""

import logging

from wlcore import watch  # importing it installs the filter


def test_inotify_stop_race_is_not_logged_but_other_errors_are(caplog):
    logger = logging.getLogger("watchdog.observers.inotify")
    assert any(isinstance(f, watch._StopRace) for f in logger.filters)
    with caplog.at_level(logging.ERROR, logger="watchdog.observers.inotify"):
        logger.error("InotifyEmitter.queue_events() called when the thread is inactive")
        logger.error("inotify watch limit reached")
    assert [r.getMessage() for r in caplog.records] == ["inotify watch limit reached"]
