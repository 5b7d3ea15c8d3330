"""A replica database: its state (``wlr.config``) and replay of published batches (follow mode: :mod:`wlr.follow`).

``<dbfarm>/<replica>/wlr.config`` holds ``key=value`` lines, typed by
:class:`wlcore.replica_state.ReplicaState`: the master followed, the next batch to read, ``tick``
(last transaction handled), the failure, and each table's Delta version after replay's last
commit (to detect writes made by anyone else). ``wlr.log`` beside it keeps a line per event.
"""

from __future__ import annotations

import threading
import warnings
from datetime import datetime
from typing import Any

from wlcore.fields import FieldOf
from wlcore.master_state import MasterState
from wlcore.replica_state import ReplicaState
from wlcore.session import LateSession
from wlcore.settings import number, settings
from wlcore.storage import Storage

from . import failure, monitor
from .book import ReplicaApplier, ReplicaLock, StateBook
from .catalog import ConsistentView, ReplicaCatalog
from .errors import ReplicaStateError, ReplicationError, TargetWarning
from .follow import Follower
from .monitor import ReplicaMetrics
from .planner import Route
from .relay import Relay
from .replay import Replay, ReplayOptions, ReplicaSetup, ReplicateCall
from .select import Selection
from .source import (
    CurrentSource,
    MasterLike,
    Names,
    Source,
    held_by,
    master_source,
    recorded_source,
    resolve,
    shipped_source,
)
from .target import Published, date_note


class Replica:
    """A replica of master ``master``, kept in ``<dbfarm>/<replica>``.

    Args:
        master (str | MasterLike | None): master database name (or a ``wlc.Master``); may be left out when ``source``
            or ``logs`` names it.
        replica: replica database name; default ``<master>_replica``.
        dbfarm: folder holding the replica; default from config. The master (and a named
            ``source``) is looked up in the same dbfarm unless ``master_dbfarm`` says otherwise.
        logs: read a shipped copy of the master's logs at this folder or URL
            (``s3://bucket/path``, made by ``wlc ship``) instead of the master's folder.
        source: read from this master or relaying replica (a name in the dbfarm, a
            ``wlc.Master`` or a ``wlr.Replica``): the master's batches with their original
            GTIDs, so a replica may switch between the master and its relays. Without ``logs``
            and ``source``, a replica reads where it read last (``source`` in wlr.config), else
            ``replica.logs`` in config, else the master's folder.

    Raises:
        ConfigError: a name is malformed; both ``logs`` and ``source``; no master named.
        ReplicaStateError: the source is neither a master nor a replica, or is this replica.
    """

    def __init__(
        self,
        master=None,
        replica: str | None = None,
        dbfarm: str | None = None,
        master_dbfarm: str | None = None,
        spark=None,
        logs: str | None = None,
        source: str | MasterLike | Replica | None = None,
    ):
        names = resolve(master, replica, dbfarm, master_dbfarm, logs, source)
        self.dbfarm: str = names.dbfarm
        self.master_dbfarm: str = names.master_dbfarm
        self.master: str = names.master
        self.name: str = names.replica
        chosen = names.source
        self.storage: Storage = Storage.of(self.dbfarm)
        self.path: str = Storage.join(self.dbfarm, self.name)
        self.master_path: str = Storage.join(self.master_dbfarm, self.master)
        cfg = settings().replica
        self.beat_seconds: float = cfg.beat
        self.default_timeout: float = cfg.timeout
        self.default_follow: bool = cfg.follow
        self.default_collapse: bool = cfg.collapse
        self._options = ReplayOptions.of(cfg)
        self._book = StateBook(self.storage, self.path, self.name)
        if chosen is not None and chosen.kind == "relay" and chosen.root.startswith(self.path.rstrip("/") + "/"):
            raise ReplicaStateError(f"a replica cannot read its own relay ({self.name!r}); name another source")
        default_logs = cfg.logs
        recorded = recorded_source(self.state)
        gone = recorded is None or (recorded.is_master and recorded.root.rstrip("/") == self.master_path.rstrip("/"))
        reads: Source = (
            chosen
            or (held_by(self.master_dbfarm, self.master) if gone else None)  # promoted elsewhere
            or recorded
            or (shipped_source(default_logs) if default_logs and self.state.empty else None)
            or master_source(self.master_dbfarm, self.master)
        )
        self._parts = ReplicaParts(
            names, self._book, self._options, CurrentSource(reads), spark, self.beat_seconds, self.default_timeout
        )

    # ------------------------------------------------------------------ options and state
    @property
    def source(self) -> Source:
        """Where the replica reads (:mod:`wlr.source`): a master's folder, a shipped copy or a relay."""
        return self._parts.source.source

    @source.setter
    def source(self, value: Source) -> None:
        """Read from ``value`` from the next round on (the same master's batches)."""
        self._parts.source.switch(value)

    @property
    def state(self) -> ReplicaState:
        """The replica's ``wlr.config`` as replay last read or set it, typed
        (:class:`wlcore.replica_state.ReplicaState`: ``state.tick``, ``state.versions``...; empty before it is made)."""
        return self._book.state

    @property
    def last_error(self) -> ReplicationError | None:
        """The failure replay raised last in this process (None: none, or resolved since)."""
        return self._book.last_error

    collapse = FieldOf("_options", "Each table's run of DML lands as one commit a segment (replicate(collapse=)).")
    compacted = FieldOf("_options", "Replay through compacted batches where they fit (replicate(compacted=)).")
    start_snapshot = FieldOf("_options", "Snapshot a new replica starts from (replicate(snapshot=)); None: newest fit.")
    catalog = FieldOf("_parts", "The tables' Spark SQL names: views at the last consistent tick (wlr.catalog).")

    @property
    def parallelism(self) -> int:
        """Tables applied at once (``replica.parallelism``)."""
        return self._options.parallelism

    @property
    def selection(self) -> Selection | None:
        """The tables (and rows) this replica carries; None until set up."""
        return self._parts.setup.selection

    def load_state(self) -> ReplicaState | None:
        """The replica's ``wlr.config`` read now (None: the folder is no replica yet)."""
        return self._book.load()

    @property
    def spark(self):
        """The replay session: a child of the SparkSession given (else the active one) with its own SQL settings."""
        return self._parts.session()

    @property
    def base_spark(self):
        """The SparkSession given to the replica, else the active one (made from config when none is)."""
        return self._parts.session.base()

    # ------------------------------------------------------------------ public queries
    def tick(self) -> int:
        """Id of the last transaction handled (applied, or skipped by accept()); -1 when none."""
        return self._book.current().tick

    def clock(self) -> datetime | None:
        """Commit time (UTC) on the master of the last transaction handled; None when none."""
        return self._book.current().clock

    def beat(self) -> int:
        """Refresh rate of follow mode, in seconds (MonetDB's ``wlr.beat()``)."""
        return int(round(self.beat_seconds))

    def status(self) -> dict:
        """State for people (``wlr status``) and metrics: master, tick, clock, lag, liveness, error and
        retries, exit code; the keys are listed at :func:`wlr.monitor.replica_status`."""
        return monitor.replica_status(self, self._book.current(), self._parts.setup.check_history)

    # ------------------------------------------------------------------ set-up (wlr.replay)
    def ask_selection(self, tables=None, where=None) -> None:
        """What ``replicate(tables=, where=)`` asks for (None: the recorded selection, or
        for a new replica ``replica.tables``/``replica.where`` in config)."""
        self._parts.setup.ask_selection(tables, where)

    def validate(self, until=None, timeout: float | None = None, empty: bool = False) -> MasterState:
        """Check, without writing anything, that ``replicate(until)`` may start; returns the
        master's wlc.config. See :meth:`wlr.replay.ReplicaSetup.validate` for the checks and errors.

        Raises:
            TargetError, ReplicationTimeout, ReplicationError, ReplicaStateError, ConfigError:
                as :meth:`wlr.replay.ReplicaSetup.validate` says.
        """
        return self.check(ReplicateCall.of(until, timeout=timeout, empty=empty))

    def check(self, call: ReplicateCall) -> MasterState:
        """:meth:`validate` for a call whose ``until`` is parsed already; returns the master's wlc.config.

        Raises:
            as :meth:`validate`.
        """
        return self._parts.setup.validate(call.target, call.until, timeout=call.timeout, empty=call.empty)

    def published(self, mcfg: MasterState) -> Published:
        """What the source's wlc.config ``mcfg`` says it has published, and capture's liveness."""
        return self._parts.setup.published(mcfg)

    def route(self, mcfg: MasterState) -> Route:
        """The master's snapshots and compacted batches as this replica reads them."""
        return self._parts.setup.route(mcfg)

    # ------------------------------------------------------------------ reads (wlr.catalog)
    def path_of(self, table: str) -> str:
        """Folder (URI) of replica table ``"schema.table"``."""
        return self._parts.view.path_of(table)

    def table(self, table: str):
        """The replica table ``"schema.table"`` as a DataFrame as of the last consistent tick
        (:meth:`wlr.catalog.ConsistentView.table`).

        Raises:
            ReplicaStateError: the table is not on the replica at that tick.
        """
        return self._parts.view.table(table)

    def tables(self) -> dict:
        """Every replica table as of the last consistent tick: ``{"schema.table": DataFrame}``."""
        return self._parts.view.tables()

    def versions(self) -> dict[str, int]:
        """``{"schema.table": Delta version}`` of every replica table at the last consistent tick."""
        return self._parts.view.versions()

    def view_tick(self) -> int:
        """The transaction the reads of :meth:`table` stand at (the last consistent tick)."""
        return self._parts.view.view_tick()

    @property
    def metrics_port(self) -> int | None:
        """The port this process serves the replica's ``/metrics`` on (None: none)."""
        return self._parts.metrics.port

    @property
    def relay_path(self) -> str:
        """The relay folder, ``<replica>/wlr_relay``."""
        return self._parts.relay.relay_path

    @property
    def relaying(self) -> bool:
        """True when this replica relays what it applied."""
        return self._parts.relay.relaying

    def following(self) -> bool:
        """True while the follow thread runs (it ends at stop(), close() or a divergence, not at a failure)."""
        return self._parts.follower.following()

    def stop(self) -> None:
        """Stop following (MonetDB's wlr.stop()); each table first finishes the segment it is applying."""
        self._parts.follower.stop()

    def interrupt(self) -> None:
        """Have the replay under way (:meth:`run`, in another thread) stop at its next safe point:
        each table ends the segment it is applying, what landed is recorded. Takes no lock (a
        signal handler may call it); the call then returns as a :meth:`stop` makes it."""
        self._parts.follower.stop_event.set()

    def close(self) -> None:
        """Stop following and release the replica's lock and watcher."""
        self._parts.follower.close()

    # ------------------------------------------------------------------ replay
    def raise_if_failed(self) -> None:
        """Raise the stored ReplicationError when replay stopped at a failure not yet resolved."""
        err = failure.stored(self._book.current())
        if err is not None:
            raise err

    def replicate(
        self,
        until: int | str | datetime | None = None,
        follow: bool | None = None,
        timeout: float | None = None,
        collapse: bool | None = None,
        snapshot: int | None = None,
        compacted: bool = True,
        relay: bool | None = None,
        tables: str | list[str] | None = None,
        where: dict[str, str] | None = None,
        empty: bool = False,
        metrics_port: int | str | None = None,
    ) -> "Replica":
        """Apply published batches up to ``until`` (see :mod:`wlr.planner` for the semantics).

        Args:
            until: None (all published), int txn id (inclusive; -1: before the first), or a
                UTC instant (datetime or ISO-8601 string, inclusive, a consistent cut across
                tables; a date alone is that day's start, said by a :class:`wlr.TargetWarning`).
                A target not published yet is said at once and its wait shown (:mod:`wlr.follow`).
            follow: with ``until=None``, keep following in a background thread until
                :meth:`stop` (default: ``replica.follow`` in config, true).
            timeout: seconds to wait for ``until`` to be published (default ``replica.timeout``);
                an instant further ahead than that (plus ``capture.settle``) is refused at once.
            collapse: True (default ``replica.collapse``): each table's run of DML lands as
                one collapsed commit a segment; False: one replica commit per master
                transaction, for jobs that read the replica's history or change feed
                (and no compacted batches). Kept for follow mode.
            snapshot: a new replica starts from the master's snapshot at this transaction
                (``wlr log --snapshots`` lists them); default the newest at or before ``until``.
            compacted: True: replay through level-1/2 compacted batches where they fit
                (the coarsest first, as Litestream restores); False: level 0 only.
            relay: True: after every round, ship what this replica has applied to
                ``<replica>/wlr_relay`` for replicas made with ``source=<this replica>``
                (:mod:`wlr.relay`); False: stop relaying; None: as before (kept in wlr.config).
            tables: a new replica carries only these tables: names or patterns on
                ``schema.table`` (``["sales.*", "hr.employees"]``); default ``replica.tables``
                in config (empty: all). Recorded; another selection needs a new replica.
            where: ``{"schema.table": "<Spark SQL predicate>"}``: of these tables a new replica
                carries only the rows matching (after each change: rows an update moves in
                are inserted, rows moved out deleted), as a PostgreSQL row filter.
            empty: a new replica whose target is before the master's first transaction (it
                would hold none of its transactions) is made anyway; refused otherwise.
            metrics_port: serve Prometheus metrics (:mod:`wlr.monitor`) at ``http://127.0.0.1:<port>/metrics``
                (0: any free port, kept in ``metrics_port``; default the ``metrics.port`` setting, off).

        Returns:
            self, once the target is reached (or, following, once all published is applied).

        Everything is checked before anything is written: a refused call leaves the
        filesystem as it was. A failure stored by an earlier call is retried (its cause may
        have been fixed: a batch restored, a table put back), as PostgreSQL's apply worker
        retries; if it fails again it is stored and raised with the new cause, if it passes
        ``wlr.log`` records the recovery.

        Raises:
            TargetError: ``until`` is malformed or already passed; an instant later than
                ``timeout`` can wait for; a new replica's target before the master's first
                transaction without ``empty``.
            ReplicationError: a transaction or a batch failed and was not accepted.
            ReplicationTimeout: the target was not published within ``timeout`` (the message
                states capture's liveness as read), or cannot be: capture's heartbeat is
                stale, or the master stopped logging before it (raised at once).
            ReplicaStateError: the folder is not a replica of this master, or is busy, or
                the replica is further behind than the master's retention keeps (the message
                names the earliest reachable point); ``tables``/``where`` differ from the
                replica's recorded selection; DivergedError: the source's history is not
                the one this replica followed (a master restored from a copy).
            ConfigError: a ``tables`` pattern or ``where`` predicate is malformed; MetricsError:
                the metrics port is malformed or taken.
        """
        call = ReplicateCall.of(
            until,
            follow=follow,
            timeout=timeout,
            collapse=collapse,
            snapshot=snapshot,
            compacted=compacted,
            relay=relay,
            tables=tables,
            where=where,
            empty=empty,
            metrics_port=metrics_port,
        )
        return self.run(call)

    def run(self, call: ReplicateCall) -> Replica:
        """Carry out ``call`` (:meth:`replicate` with its ``until`` parsed once).

        Args:
            call: the call.

        Returns:
            self, as :meth:`replicate`.

        Raises:
            as :meth:`replicate`.
        """
        self.start_snapshot, self.compacted = call.snapshot, bool(call.compacted)
        self.ask_selection(call.tables, call.where)
        follow = self.default_follow if call.follow is None else bool(call.follow)
        self.collapse = self.default_collapse if call.collapse is None else bool(call.collapse)
        timeout = self.default_timeout if call.timeout is None else number(call.timeout, "timeout")
        mcfg = self._parts.setup.validate(call.target, call.until, timeout=timeout, empty=call.empty)
        note = date_note(call.until, call.target)
        if note:
            warnings.warn(note, TargetWarning, stacklevel=3)
        self._parts.metrics.serve(call.metrics_port, self)  # wlr_tick, lag...: the figures of status()
        self.stop()
        self._options.relay_wanted = call.relay
        self._parts.follower.run_to(call.target, call.until, timeout, mcfg, follow, call.service)
        return self

    def accept(self) -> int:
        """Skip exactly the failed transaction (as PostgreSQL's ALTER SUBSCRIPTION ... SKIP).

        Returns the id of the skipped transaction; ``tick()`` then reports it as handled.

        Raises:
            ReplicaStateError: there is no failed transaction to skip, or the failure is not
                tied to one transaction (e.g. a gap in the logs).
        """
        self.stop()
        with self._parts.mutex, self._parts.lock.holding():
            txn = failure.skip(
                self._book.reload(),
                self.name,
                self.source.storage,
                self.master,
                self._parts.applier.current().tables.current_version,
            )
            self._book.save()
            self._book.log(f"accepted: skipped transaction {txn}")
            return txn

    def restore_table(self, table: str, into, as_: str | None = None, replace: bool = False, dbfarm: str | None = None):
        """Make this replica's table ``table`` (``"schema.table"``) again in master ``into`` (a
        name or ``wlc.Master``) as read at the last consistent tick: definition (``wlc.key``,
        constraints, partitioning, clustering...) and rows, captured there like any table
        (:mod:`wlr.restore`). ``as_``: the master table's name (default ``table``); ``replace``:
        replace an existing master table (REPLACE TABLE); ``dbfarm``: the master's (default
        this replica's master's). Checks everything before writing anything.

        Returns: :class:`wlr.restore.RestoredTable` (table, path, version, commits, rows, carried).

        Raises: NoSuchTableError (names the nearest tables), NotFoundError (no such replica or
        master), MasterStateError (``into`` is not a started master), TableExistsError
        (``replace`` not given), ConfigError (a bad name), RestoreError (a write failed; what
        was undone).
        """
        from .restore import restore_table

        return restore_table(self, table, into, as_=as_, replace=replace, dbfarm=dbfarm)

    def __repr__(self) -> str:
        return f"<wlr.Replica {self.name!r} of {self.master!r} tick={self.tick()}>"


# The parts a :class:`wlr.Replica` owns, each built with what it uses.
#
# * the state book (``wlr.config`` and ``wlr.log``, :mod:`wlr.book`) and the replica's lock
#   (:mod:`wlr.book`), shared by every part;
# * where the replica reads now (:class:`wlr.source.CurrentSource`: ``replicate(source=...)``
#   switches it between calls) and the replay session (:class:`wlcore.session.LateSession`, made
#   at the first Spark use);
# * the applier (:class:`wlr.apply.ReplicaApplier`: made again when the master's database id changes);
# * the set-up (:mod:`wlr.replay`): checks before anything is written, a new replica's start;
# * the consistent view (:mod:`wlr.catalog`): reads at the last consistent tick, and its SQL
#   names (:mod:`wlr.catalog`), moved after every round;
# * the relay (:mod:`wlr.relay`), the rounds of replay (:mod:`wlr.replay`) and the follower
#   (:mod:`wlr.follow`), which retries a failure by itself;
# * the metrics (:mod:`wlr.monitor`), served for Prometheus when asked.


class ReplicaParts:
    """The collaborators of one replica.

    Args:
        names: the replica's resolved names (dbfarm, master's dbfarm, master, replica).
        book: the replica's state book.
        options: the replay options of the last ``replicate()`` call.
        source: where the replica reads now.
        spark: the SparkSession given to the replica (None: the active one, at first use).
        beat_seconds: seconds between the follower's rounds (``replica.beat``).
        timeout: seconds a call waits for its target by default (``replica.timeout``).
    """

    def __init__(
        self,
        names: Names,
        book: StateBook,
        options: ReplayOptions,
        source: CurrentSource,
        spark: Any,
        beat_seconds: float,
        timeout: float,
    ) -> None:
        self.book = book
        self.source = source
        self.session = LateSession(spark, _replay_session)
        self.applier = ReplicaApplier(self.session, book, source)
        self.lock = ReplicaLock(book.storage, book.path)
        self.view = ConsistentView(book, self.session, self.applier)
        self.catalog = ReplicaCatalog(book, self.view, self.session)
        self.setup = ReplicaSetup(
            book, self.lock, source, names, options, timeout, self.session, self.applier, self.view
        )
        self.relay = Relay(book, source, names.master)
        self.metrics = ReplicaMetrics(names.master, names.replica)
        self.replay = Replay(
            book, self.setup, self.view, self.relay, options, source, self.applier, threading.Event(), self.metrics
        )
        self.follower = Follower(
            book, self.lock, self.replay, self.catalog, self.metrics, beat_seconds, settings().replica.retry_max
        )
        self.mutex = self.follower.mutex  # held while a round runs (follow thread and calls)


def _replay_session(base: Any) -> Any:
    """:func:`wlr.apply.replay_session` (imported at the first Spark use: ``wlr status`` imports no Spark)."""
    from .apply import replay_session

    return replay_session(base)
