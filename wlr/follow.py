"""Follow mode of a replica (MonetDB's ``wlr.replicate()`` without a target): a background
thread applies what capture publishes, woken by the log folder's watcher or once a beat,
until :meth:`Follower.stop`; and the wait of ``replicate(until=...)`` for a target not yet
published (:mod:`wlr.wait`).

A mixin of :class:`wlr.replica.Replica`: it uses the replica's lock, state, ``_step``,
``_log``, ``published`` and ``_release``.
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone

from wlcore.batch import utc_iso
from wlcore.master_state import MasterState
from wlcore.settings import settings

from . import failure
from .errors import DivergedError, ReplicationError, ReplicationTimeout
from .plan import Target
from .target import ahead, check_capture
from .wait import TargetWait
from .watch import batch_watch

log = logging.getLogger("wlr.replica")


class Follower:
    """Follow mode and the wait between rounds; mixed into :class:`wlr.replica.Replica`."""

    def _wait(self, seconds: float) -> None:
        logs = self.state.get("logs")
        if self._watch is not None and self._watch.path != logs:  # the source changed
            self._watch.close()
            self._watch = None
        if self._watch is None and logs and self.source.storage.local:
            self._watch = batch_watch(logs, settings().capture.polling, self.beat_seconds)
        if self._watch is not None:
            self._watch.wait(seconds)
        else:
            self._stop.wait(seconds)

    def _wait_for(self, target: Target, until, timeout: float, mcfg: MasterState) -> None:
        """Apply rounds until ``target`` is reached, waiting up to ``timeout`` seconds for it
        to be published; the wait is said at once and shown (:mod:`wlr.wait`)."""
        wait = TargetWait(target, until, timeout, lambda line: self._log(line, logging.WARNING))
        capture_command = f"wlc capture {self.master_dbfarm} {self.master}"
        try:
            pub = self.published(mcfg)
            if ahead(target, pub):
                wait.update(pub)  # said at once, before the published part is applied
            deadline = time.monotonic() + timeout
            while True:
                reached, _waiting = self._step(target)
                if reached or self._stop.is_set():
                    return
                pub = self.published(self._master_config())  # as it is now, after the round
                check_capture(target, until, pub, capture_command)  # capture went away: it will not come
                wait.update(pub)
                if time.monotonic() >= deadline:
                    tick = self.tick()
                    raise ReplicationTimeout(wait.timed_out(pub, tick), cli=wait.timed_out(pub, tick, cli=True))
                self._wait(min(self.beat_seconds, 0.5, max(0.0, deadline - time.monotonic())))
        finally:
            wait.close()

    def _start_follow(self) -> None:
        self._thread = threading.Thread(target=self._follow, name=f"wlr-follow-{self.name}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                with self._lock:
                    if self._stop.is_set():
                        break
                    self._step(Target("all"), progress=False)  # no bar from a background thread
                    self.state["heartbeat"] = utc_iso(datetime.now(timezone.utc))  # alive: wlr status
                    self._save()
            except ReplicationError:
                return  # kept in wlr.config; the next replicate() raises it
            except DivergedError as exc:  # kept too: the next replicate() checks again and raises it
                with self._lock:
                    self.last_error = failure.record(self.state, None, None, None, str(exc))
                    self._save()
                    self._log(f"FAILED {exc}")
                return
            except Exception:
                log.exception("follow mode of %s failed; retrying", self.name)
            self._wait(self.beat_seconds)

    def following(self) -> bool:
        """True while the follow thread runs (it ends at stop(), close() or a failed transaction)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop following (MonetDB's wlr.stop()); each table first finishes the segment it is applying."""
        self._stop.set()
        if self._watch is not None:
            self._watch.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=120)
        self._thread = None
        with self._lock:
            if self.state.get("state") == "following":
                self.state["state"] = "idle"
                self._save()
            self._release()

    def close(self) -> None:
        """Stop following and release the replica's lock and watcher."""
        self.stop()
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._release()
