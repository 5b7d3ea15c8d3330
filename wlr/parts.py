"""The parts a :class:`wlr.Replica` owns, each built with what it uses.

* the state book (``wlr.config`` and ``wlr.log``, :mod:`wlr.book`) and the replica's lock
  (:mod:`wlr.book`), shared by every part;
* the set-up (:mod:`wlr.replay`): checks before anything is written, a new replica's start;
* the consistent view (:mod:`wlr.view`): reads at the last consistent tick, and its SQL
  names (:mod:`wlr.catalog`), moved after every round;
* the relay (:mod:`wlr.relay`), the rounds of replay (:mod:`wlr.replay`) and the follower
  (:mod:`wlr.follow`), which retries a failure by itself;
* the metrics (:mod:`wlr.monitor`), served for Prometheus when asked;
* the applier (:mod:`wlr.apply`) on the replay session, made at the first Spark use.

The source (where batches are read) may change between calls (``replicate(source=...)``):
the parts read it through ``source()`` each time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wlcore.session import active_session
from wlcore.settings import settings

from .book import ReplicaLock, StateBook
from .catalog import ReplicaCatalog
from .follow import Follower
from .monitor import ReplicaMetrics
from .planner import Target
from .relay import Relay
from .replay import Replay, ReplayOptions, ReplicaSetup, RoundResult
from .source import Names, Source
from .view import ConsistentView

if TYPE_CHECKING:  # wlr.apply imports pyspark: `wlr status` and `wlr log` start without it
    from .apply import Applier


class ReplicaParts:
    """The collaborators of one replica.

    Args:
        names: the replica's resolved names (dbfarm, master's dbfarm, master, replica).
        book: the replica's state book.
        options: the replay options of the last ``replicate()`` call.
        source: returns where the replica reads now.
        spark: the SparkSession given to the replica (None: the active one, at first use).
        beat_seconds: seconds between the follower's rounds (``replica.beat``).
        timeout: seconds a call waits for its target by default (``replica.timeout``).
    """

    def __init__(
        self,
        names: Names,
        book: StateBook,
        options: ReplayOptions,
        source: Callable[[], Source],
        spark: Any,
        beat_seconds: float,
        timeout: float,
    ) -> None:
        self.given_spark = spark
        self._session: Any = None
        self._applier: Applier | None = None
        self._source = source
        self.book = book
        self.mutex = threading.RLock()  # held while a round runs (follow thread and calls)
        self.stop = threading.Event()
        self.lock = ReplicaLock(book.storage, book.path)
        self.view = ConsistentView(book, lambda: self.given_spark, self.applier)
        self.catalog = ReplicaCatalog(book, self.view, lambda: self.given_spark)
        self.setup = ReplicaSetup(
            book, self.lock, source, names, options, timeout, lambda: self.spark, self.applier, self.view
        )
        self.relay = Relay(book, source, names.master)
        self.metrics = ReplicaMetrics(names.master, names.replica, lambda: self.follower.following())
        self.replay = Replay(
            book,
            self.setup,
            self.view,
            self.relay,
            options,
            source,
            self.applier,
            lambda: self.setup.selection,
            self.stop,
            self.metrics,
        )
        capture = f"wlc capture {names.master_dbfarm} {names.master}"
        self.follower = Follower(
            book,
            self.lock,
            self.mutex,
            self.stop,
            self.steps,
            self.setup.published,
            source,
            beat_seconds,
            capture,
            settings().replica.retry_max,
            self.metrics,
        )

    def steps(self, target: Target, progress: bool) -> RoundResult:
        """Rounds of replay toward ``target`` (:meth:`wlr.replay.Replay.steps`), then the SQL
        names moved to the last consistent tick (also after a failed round: what it applied stays)."""
        try:
            return self.replay.steps(target, progress)
        finally:
            self.catalog.refresh()

    @property
    def base_spark(self) -> Any:
        """The SparkSession given to the replica, else the active one (made from config when none is)."""
        return self.given_spark or active_session()

    @property
    def spark(self) -> Any:
        """The replay session: a child of :attr:`base_spark` with its own SQL settings (made once)."""
        if self._session is None:
            from . import apply

            self._session = apply.replay_session(self.base_spark)
        return self._session

    def applier(self) -> Applier:
        """The applier of the replica's master (made again when the replica's master database id
        changes), reading change rows from the current source, with the replica's selection."""
        from .apply import Applier

        dbid = self.book.state.dbid
        if self._applier is None or self._applier.dbid != dbid:
            self._applier = Applier(lambda: self.spark, self.book.storage, self.book.path, dbid, self._source().storage)
        self._applier.logs_storage = self._source().storage
        self._applier.selection = self.setup.selection
        return self._applier
