"""Follow mode of a replica (MonetDB's ``wlr.replicate()`` without a target): a background
thread applies what capture publishes, woken by the log folder's watcher
(:class:`wlcore.watch.FolderWatch`: watchdog events, or polling with ``capture.polling``) or once a beat,
until :meth:`Follower.stop`; and the wait of ``replicate(until=...)`` for a target not yet
published (:class:`TargetWait`).

A part of :class:`wlr.replica.Replica`, built with what it uses: the replica's state, its
lock, the rounds of replay it runs (:class:`wlr.replay.Replay`, with the replica's set-up: what the
source has published) and the SQL names it moves after each round (:class:`wlr.catalog.ReplicaCatalog`).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable

from wlcore.settings import settings
from wlcore.state import MasterState
from wlcore.target import EVERYTHING, Published, ahead, check_capture, meaning
from wlcore.utc import utc_iso
from wlcore.watch import FolderWatch

from . import failure
from .book import ReplicaLock, StateBook
from .errors import DivergedError, ReplicationError, ReplicationTimeout, WlcError
from .monitor import ReplicaMetrics
from .planner import Target, check_not_passed
from .replay import Replay, ReplicateOptions, RoundResult

if TYPE_CHECKING:
    from wlcore.session import LateSession

    from .catalog import ReplicaCatalog

log = logging.getLogger("wlr.replica")


class Follower:
    """Follow mode and the wait between rounds of :class:`wlr.replica.Replica`.

    Args:
        book: the replica's state and log.
        lock: the replica's ``wlr.lock`` (released when following ends).
        replay: the replica's rounds of replay (:meth:`wlr.replay.Replay.steps`); its ``stop`` event,
            set by :meth:`stop`, ends a round after the segments being applied; its set-up says
            what the source has published and where it is.
        catalog: the replica's SQL names, moved to the last consistent tick after every round.
        metrics: the replica's metrics (retries, a divergence stored).
        beat_seconds: the refresh rate of follow mode, in seconds.
        retry_max: the longest wait between two tries of a stored failure, in seconds
            (``replica.retry_max``; the first is after ``beat_seconds``).
        session: the replica's Spark session, which a follow service ends once it started it and
            left it unused ``spark_idle`` seconds (:meth:`wlcore.session.LateSession.release`).
        spark_idle: seconds (``replica.spark_idle``; None: never ends it).

    Attributes:
        mutex: held while a round runs (re-entrant; the replica's calls hold it too).
    """

    def __init__(
        self,
        book: StateBook,
        lock: ReplicaLock,
        replay: Replay,
        catalog: ReplicaCatalog,
        metrics: ReplicaMetrics,
        beat_seconds: float,
        retry_max: float,
        session: LateSession,
        spark_idle: float | None,
    ) -> None:
        self.book = book
        self.lock = lock
        self.replay = replay
        self.setup = replay.setup
        self.catalog = catalog
        self.metrics = metrics
        self.beat_seconds = beat_seconds
        self.retry_max = retry_max
        self.session = session
        self.spark_idle = spark_idle
        self.service = False  # following as a service (wlr replicate --follow): the call says
        self.polling = settings().capture.polling  # watch the log folder by polling (capture.polling), read once
        self.mutex = threading.RLock()
        self.stop_event = replay.stop
        self.capture_command = f"wlc capture {self.setup.master_dbfarm} {self.setup.master}"  # in messages
        self.thread: threading.Thread | None = None
        self.watch: FolderWatch | None = None

    def _step(self, target: Target, progress: bool) -> RoundResult:
        """Rounds of replay toward ``target``, then the SQL names moved to the last consistent tick
        (also after a failed round: what it applied stays)."""
        try:
            return self.replay.steps(target, progress)
        finally:
            self.catalog.refresh()

    def _wait(self, seconds: float) -> None:
        logs = self.book.state.logs
        if self.watch is not None and self.watch.path != logs:  # the source changed
            self.watch.close()
            self.watch = None
        if self.watch is None and logs:
            # not recursive: a batch appears by one rename; None when the folder is missing or on a
            # storage that cannot be watched (an object store): then the wait is by timeout only
            self.watch = self.setup.source.storage.watcher(
                logs, recursive=False, polling=self.polling, interval=self.beat_seconds, create=False
            )
        if self.watch is not None:
            self.watch.wait(seconds)
        else:
            self.stop_event.wait(seconds)

    def run_to(self, options: ReplicateOptions, mcfg: MasterState) -> None:
        """Replay up to the call's target under the replica's lock (:meth:`wait_for`), record the
        outcome (``until``, ``state``), then follow in the background when the call follows and
        the target is everything published.

        Args:
            options (ReplicateOptions): the call: ``target``, ``timeout``
                (seconds to wait for the target to be published), ``follow`` (keep following
                afterwards), ``service`` (following as a service, ``wlr replicate --follow``: a
                ReplicationError of the catch-up is not raised; it stays stored and the follower
                retries it).
            mcfg (MasterState): the source's wlc.config as validated.

        Raises:
            TargetError: the target is passed already; as :meth:`wait_for` otherwise.
        """
        target, timeout, follow = options.target, options.timeout, options.follow
        self.service = options.service
        self.stop_event.clear()  # a stop() from now on ends this call after the segments being applied
        book = self.book
        with self.mutex:
            self.lock.acquire()
            try:
                state = book.reload()
                if not state.empty:
                    check_not_passed(target, state.tick, state.clock, named=meaning(target))
                try:
                    self.wait_for(target, timeout, mcfg)
                except ReplicationError:
                    if not (options.service and follow and target.kind == "all"):
                        raise  # stored in wlr.config; as a service, the follower below retries it
                book.state.until = "" if target.until is None else str(target.until)
                failed = bool(book.state.error_cause)
                follow = follow and target.kind == "all" and not self.stop_event.is_set()
                book.state.state = "failed" if failed else ("following" if follow else "idle")
                book.save()
            finally:
                if not follow:
                    self.lock.release()
        if follow:
            self.start()

    def wait_for(self, target: Target, timeout: float, mcfg: MasterState) -> None:
        """Apply rounds until ``target`` is reached, waiting up to ``timeout`` seconds for it
        to be published; the wait is said at once and shown (:mod:`wlr.follow`).

        Args:
            target: the target (carrying ``until`` as the caller gave it, for messages).
            timeout: seconds to wait for the target to be published.
            mcfg: the source's wlc.config as read before the first round.

        Raises:
            ReplicationTimeout: the target was not published in time, or cannot be (capture
                stopped or went stale); ReplicationError, DivergedError: from the rounds.
        """
        wait = TargetWait(target, timeout, lambda line: self.book.log(line, logging.WARNING))
        try:
            pub = self.setup.published(mcfg)
            if ahead(target, pub):
                wait.update(pub)  # said at once, before the published part is applied
            deadline = time.monotonic() + timeout
            while True:
                result = self._step(target, True)
                if result.reached or self.stop_event.is_set():
                    return
                pub = self.setup.published(result.master)  # as the round read it
                check_capture(target, pub, self.capture_command)  # capture went away: it will not come
                wait.update(pub)
                if time.monotonic() >= deadline:
                    tick = self.book.current().tick
                    raise ReplicationTimeout(wait.timed_out(pub, tick), cli=wait.timed_out(pub, tick, cli=True))
                self._wait(min(self.beat_seconds, 0.5, max(0.0, deadline - time.monotonic())))
        finally:
            wait.close()

    def start(self) -> None:
        """Follow in a background thread until :meth:`stop`."""
        self.thread = threading.Thread(target=self._follow, name=f"wlr-follow-{self.book.name}", daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        book = self.book
        attempt = 0  # tries of a stored failure since the last round that went through
        trouble, said = 0, ""  # rounds refused otherwise since (the source out of reach...), the last said
        while not self.stop_event.is_set():
            wait = self.beat_seconds
            try:
                with self.mutex:
                    if self.stop_event.is_set():
                        break
                    self._step(EVERYTHING, False)  # no bar from a background thread
                    book.state.heartbeat = datetime.now(timezone.utc)  # alive: wlr status
                    if not book.state.error_cause:
                        book.state.state = "following"  # again, after a failure it got past
                    book.save()
                attempt, trouble, said = 0, 0, ""
            except ReplicationError:  # kept in wlr.config; tried again after a backoff, never skipped
                attempt += 1
                wait = self._retry_later(attempt)
            except DivergedError as exc:  # kept too, not retried: the next replicate() checks again and raises it
                with self.mutex:
                    book.last_error = failure.record(book.state, None, None, None, str(exc))
                    book.save()
                    book.log(f"FAILED {exc}")
                self.metrics.failed("diverged")
                return
            except Exception as exc:  # the source out of reach, refused (fenced), a bug: tried again with backoff
                trouble += 1
                wait = failure.retry_delay(trouble, self.beat_seconds, self.retry_max)
                if isinstance(exc, WlcError):  # says what is wrong and the fix: once, not every try
                    if str(exc) != said:
                        book.log(f"cannot follow: {exc}; tried again with backoff (replica.retry_max)", logging.WARNING)
                    said = str(exc)
                else:
                    log.exception("follow mode of %s failed; retrying in %g s", book.name, wait)
                if isinstance(exc, (WlcError, OSError)):  # the source refused or out of reach; not a bug of ours
                    self._source_trouble(exc)
            # a shared catalog's names are kept current from this process's Spark: it stays
            if self.service and self.spark_idle is not None and not (self.catalog.serve and self.catalog.shared):
                self._release_spark(self.spark_idle)
            if attempt or trouble:
                self.stop_event.wait(wait)  # the backoff holds whatever the log folder does
            else:
                self._wait(wait)

    def _release_spark(self, idle: float) -> None:
        """End the Spark this follow service started once it was unused ``idle`` seconds
        (``replica.spark_idle``): a follower whose segments land through delta-rs needs no JVM;
        the next segment or DDL that needs Spark starts it again. Said in ``wlr.log``."""
        with self.mutex:
            if self.session.release(idle):
                self.book.log(
                    f"Spark ended: unused for {idle:g} s (replica.spark_idle); the next segment that needs it "
                    "starts it again"
                )

    def _source_trouble(self, exc: Exception) -> None:
        """Keep in wlr.config why this round could not read the source (``source_error``) and since
        when, for status and metrics (the state ``unreachable``); counted once per episode."""
        book = self.book
        with self.mutex:
            state = book.state
            now = datetime.now(timezone.utc)
            first = not state.source_error
            state.source_error = str(exc) if isinstance(exc, WlcError) else f"{type(exc).__name__}: {exc}"
            state.source_error_since = state.source_error_since or now
            state.heartbeat = now  # alive, trying: wlr status
            try:
                book.save()
            except Exception:  # the replica's own folder out of reach too: tried again at the next round
                log.exception("replica %s: wlr.config not written", book.name)
        if first:
            self.metrics.failed("source")

    def _retry_later(self, attempt: int) -> float:
        """Record that the stored failure is tried again (``retries``, ``retry_at``), say when in
        ``wlr.log``, and return the seconds to wait (:func:`wlr.failure.retry_delay`)."""
        book = self.book
        delay = failure.retry_delay(attempt, self.beat_seconds, self.retry_max)
        with self.mutex:
            state = book.state
            kind = failure.kind(state)
            state.retries = attempt
            state.retry_at = datetime.now(timezone.utc) + timedelta(seconds=delay)
            state.heartbeat = datetime.now(timezone.utc)  # alive, retrying: wlr status
            where = failure.place(state.error_txn, state.error_batch)
            # said in wlr.log before wlr.config shows it: a reader of the status finds the line there
            book.log(
                f"retry {attempt} of {where} at {utc_iso(state.retry_at)} (in {delay:g} s; replica.retry_max "
                f"{self.retry_max:g} s); {'wlr accept skips it' if kind == 'transaction' else 'restore the batch'}",
                logging.WARNING,
            )
            book.save()
        self.metrics.retried(kind or "transaction")
        return delay

    def following(self) -> bool:
        """True while the follow thread runs (it ends at stop(), close() or a divergence; a failed
        transaction is retried by it)."""
        return self.thread is not None and self.thread.is_alive()

    def stop(self) -> None:
        """Stop following (MonetDB's wlr.stop()); each table first finishes the segment it is applying."""
        self.stop_event.set()
        if self.watch is not None:
            self.watch.wake()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=120)
        self.thread = None
        with self.mutex:
            if self.book.state.state == "following":
                self.book.state.state = "idle"
                self.book.save()
            self.lock.release()

    def close(self) -> None:
        """Stop following and release the replica's lock and watcher; its metrics are no longer served."""
        self.stop()
        self.metrics.stop()
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        self.lock.release()


# The wait of ``replicate(until=...)`` for a target the master has not published yet.
#
# Said at once (``say``: a warning on the ``wlr.replica`` logger and a line in ``wlr.log``,
# which the command line prints), with what the master has published and whether capture is
# alive; then shown as a progress bar over the timeout on a terminal or in a notebook (tqdm),
# or, where no bar is shown (a log file, a pipe), as a line every ``every`` seconds. When
# the timeout ends, :meth:`TargetWait.timed_out` states capture's liveness as read.


class TargetWait:
    """One ``replicate(until=...)`` call's wait for its target.

    Args:
        target (Target): the target (carrying ``until`` as the caller gave it, for the messages).
        timeout (float): seconds the call waits (``replica.timeout``).
        say (Callable[[str], None]): writes one line for people (the replica's log at WARNING level).
        every (float): seconds between lines where no progress bar is shown.
        clock (Callable[[], float]): monotonic seconds (tests give their own).
    """

    def __init__(
        self,
        target: Target,
        timeout: float,
        say: Callable[[str], None],
        every: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.target, self.timeout, self.say = target, timeout, say
        self.every, self.clock = every, clock
        self.started: float | None = None
        self._last_line = 0.0
        self.bar = None

    @property
    def waiting(self) -> bool:
        """True once the wait has been said (the target was found not published)."""
        return self.started is not None

    def update(self, pub: Published) -> None:
        """The target is not published yet: the first call says so; later calls move the bar or,
        without one, write a line every ``every`` seconds.

        Args:
            pub (Published): what the source has published now.
        """
        now = self.clock()
        named = meaning(self.target)
        if self.started is None:
            self.started = self._last_line = now
            self.say(f"waiting for {named}: {pub.describe()}; waiting up to {self.timeout:g} s (replica.timeout)")
            from tqdm.auto import tqdm

            # a bar on a terminal or in a notebook only (disable=None); lines elsewhere
            self.bar = tqdm(
                total=round(self.timeout),
                desc=f"waiting for {self._short()}",
                unit="s",
                disable=None,
                leave=False,
                bar_format="{desc}: {bar} {n:.0f}/{total:.0f} s{postfix}",
            )
        elapsed = now - self.started
        if self.bar is not None and not self.bar.disable:
            self.bar.n = min(round(elapsed), self.bar.total)
            self.bar.set_postfix_str(self._status(pub), refresh=True)
        elif now - self._last_line >= self.every:
            self._last_line = now
            self.say(f"still waiting for {named} ({elapsed:.0f} of {self.timeout:g} s): {pub.describe()}")

    def timed_out(self, pub: Published, replica_tick: int, cli: bool = False) -> str:
        """The message when the timeout ended: what was waited for, where the replica and
        the master stand, capture's liveness as read, and how to wait longer.

        Args:
            pub (Published): what the source has published, read at the end of the wait.
            replica_tick (int): the replica's last applied transaction (-1: none).
            cli (bool): word the fix for the command line (``wlr replicate``, ``--config``)
                instead of the Python API (``replicate()``, ``timeout=``).

        Returns:
            str: the message (a :class:`wlr.ReplicationTimeout` carries it).
        """
        text = (
            f"waited {self.timeout:g} s for {meaning(self.target)}; the replica is at transaction "
            f"{replica_tick} and {pub.describe()}. "
        )
        if cli:
            return text + (
                "Run wlr replicate again or set a larger replica.timeout (in a --config FILE) to wait "
                "longer, or choose a published target (wlr log <dbfarm> <master> lists them)"
            )
        return text + (
            "Call replicate() again or give a larger timeout= (replica.timeout) to wait longer, or "
            "choose a published target (wlr.transactions() lists them)"
        )

    def close(self) -> None:
        """Take the progress bar away."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _short(self) -> str:
        return f"transaction {self.target.upto_txn}" if self.target.kind == "txn" else meaning(self.target)

    @staticmethod
    def _status(pub: Published) -> str:
        wm = "stopped" if pub.stopped else (pub.watermark.strftime("%H:%M:%S") if pub.watermark else "none")
        return ", ".join(p for p in (f"published {pub.tick}", f"watermark {wm}", pub.capture_text()) if p)
