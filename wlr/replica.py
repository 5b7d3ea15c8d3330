"""A replica database: its state (``wlr.config``) and replay of published batches (follow mode: :mod:`wlr.follow`).

``<dbfarm>/<replica>/wlr.config`` holds ``key=value`` lines, typed by
:class:`wlcore.state.ReplicaState`: the master followed, the next batch to read, ``tick``
(last transaction handled), the failure, and each table's Delta version after replay's last
commit (to detect writes made by anyone else). ``wlr.log`` beside it keeps a line per event.
"""

from __future__ import annotations

import threading
import warnings
from datetime import datetime
from typing import Any

from wlcore.logstore import LogStore
from wlcore.session import LateSession
from wlcore.settings import settings
from wlcore.state import MasterState, ReplicaState
from wlcore.storage import Storage
from wlcore.target import Published, date_note

from . import failure, monitor
from .book import ReplicaApplier, ReplicaLock, StateBook
from .catalog import ConsistentView, PinnedView, ReplicaCatalog
from .errors import ReplicaStateError, ReplicationError, TargetWarning
from .follow import Follower
from .monitor import ReplicaMetrics
from .planner import Route
from .relay import Relay
from .replay import Replay, ReplayOptions, ReplicaSetup, ReplicateOptions
from .select import Selection
from .source import (
    CurrentSource,
    MasterLike,
    Source,
    SourceKind,
    held_by,
    master_source,
    recorded_source,
    resolve,
    shipped_source,
)
from .verify import Verification, verify


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
        names (bool | None): keep the tables' Spark SQL names (:attr:`catalog`) at the last
            consistent tick after every round in this process (None: setting ``replica.names``).
            ``wlr replicate`` passes False: no one else reads its process's session.

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
        names: bool | None = None,
    ):
        resolved = resolve(master, replica, dbfarm, master_dbfarm, logs, source)
        self.dbfarm: str = resolved.dbfarm
        self.master_dbfarm: str = resolved.master_dbfarm
        self.master: str = resolved.master
        self.name: str = resolved.replica
        chosen = resolved.source
        self.storage: Storage = Storage.of(self.dbfarm)
        self.path: str = Storage.join(self.dbfarm, self.name)
        self.master_path: str = Storage.join(self.master_dbfarm, self.master)
        cfg = settings().replica
        self.beat_seconds: float = cfg.beat
        self._options = ReplayOptions.of(cfg)
        self._book = StateBook(self.storage, self.path, self.name)
        if (
            chosen is not None
            and chosen.kind is SourceKind.RELAY
            and chosen.root.startswith(self.path.rstrip("/") + "/")
        ):
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
        # the parts, each built with what it uses: where it reads now (``source=`` switches it
        # between calls), the replay session (made at the first Spark use), the applier (made
        # again when the master's database id changes), the set-up (checks, a new replica's
        # start), the consistent view and its SQL names (moved after every round), the relay,
        # the rounds of replay and the follower (which retries a failure by itself), the metrics
        self._source: CurrentSource = CurrentSource(reads)
        self._session: LateSession = LateSession(spark, _replay_session)
        self._applier: ReplicaApplier = ReplicaApplier(self._session, self._book, self._source)
        self._lock: ReplicaLock = ReplicaLock(self.storage, self.path)
        self._view: ConsistentView = ConsistentView(self._book, self._session, self._applier)
        self._catalog: ReplicaCatalog = ReplicaCatalog(
            self._book, self._view, self._session, cfg.names if names is None else names
        )
        self._setup: ReplicaSetup = ReplicaSetup(self._applier, self._view, self._lock, resolved, self._options)
        self._relay: Relay = Relay(self._book, self._source, self.master)
        self._metrics: ReplicaMetrics = ReplicaMetrics(self.master, self.name)
        self._replay: Replay = Replay(self._setup, self._relay, threading.Event(), self._metrics)
        self._follower: Follower = Follower(
            self._book,
            self._lock,
            self._replay,
            self._catalog,
            self._metrics,
            self.beat_seconds,
            cfg.retry_max,
            self._session,
            None if cfg.spark_idle is None else cfg.spark_idle.amount,
        )

    # ------------------------------------------------------------------ options and state
    @property
    def source(self) -> Source:
        """Where the replica reads (:mod:`wlr.source`): a master's folder, a shipped copy or a relay."""
        return self._source.source

    @source.setter
    def source(self, value: Source) -> None:
        """Read from ``value`` from the next round on (the same master's batches)."""
        self._source.switch(value)

    @property
    def state(self) -> ReplicaState:
        """The replica's ``wlr.config`` as replay last read or set it, typed
        (:class:`wlcore.state.ReplicaState`: ``state.tick``, ``state.versions``...; empty before it is made)."""
        return self._book.state

    @property
    def last_error(self) -> ReplicationError | None:
        """The failure replay raised last in this process (None: none, or resolved since)."""
        return self._book.last_error

    @property
    def collapse(self) -> bool:
        """Each table's run of DML lands as one commit a segment (``replicate(collapse=)``)."""
        return self._options.collapse

    @collapse.setter
    def collapse(self, value: bool) -> None:
        """Set it (takes effect at the next use)."""
        self._options.collapse = value

    @property
    def compacted(self) -> bool:
        """Replay through compacted batches where they fit (``replicate(compacted=)``)."""
        return self._options.compacted

    @compacted.setter
    def compacted(self, value: bool) -> None:
        """Set it (takes effect at the next use)."""
        self._options.compacted = value

    @property
    def start_snapshot(self) -> int | None:
        """The snapshot a new replica starts from (``replicate(snapshot=)``); None: the newest fit."""
        return self._options.start_snapshot

    @start_snapshot.setter
    def start_snapshot(self, value: int | None) -> None:
        """Set it (takes effect at the next use)."""
        self._options.start_snapshot = value

    @property
    def catalog(self) -> ReplicaCatalog:
        """The tables' Spark SQL names: views at the last consistent tick (:mod:`wlr.catalog`)."""
        return self._catalog

    @property
    def parallelism(self) -> int:
        """Tables applied at once (``replica.parallelism``)."""
        return self._options.parallelism

    @property
    def selection(self) -> Selection | None:
        """The tables (and rows) this replica carries; None until set up."""
        return self._setup.selection

    def load_state(self) -> ReplicaState | None:
        """The replica's ``wlr.config`` read now (None: the folder is no replica yet)."""
        return self._book.load()

    @property
    def spark(self):
        """The replay session: a child of the SparkSession given (else the active one) with its own SQL settings."""
        return self._session()

    @property
    def base_spark(self):
        """The SparkSession given to the replica, else the active one (made from config when none is)."""
        return self._session.base()

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
        return monitor.replica_status(self, self._book.current(), self._setup.check_history)

    # ------------------------------------------------------------------ set-up (wlr.replay)
    def ask_selection(self, tables=None, where=None) -> None:
        """What ``replicate(tables=, where=)`` asks for (None: the recorded selection, or
        for a new replica ``replica.tables``/``replica.where`` in config).

        Raises:
            ConfigError: a malformed name or pattern (:meth:`wlr.select.Selection.of`).
        """
        self._setup.ask_selection(None if tables is None and where is None else Selection.of(tables, where))

    def validate(self, until=None, timeout: float | None = None, empty: bool = False) -> MasterState:
        """Check, without writing anything, that ``replicate(until)`` may start; returns the
        master's wlc.config. See :meth:`wlr.replay.ReplicaSetup.validate` for the checks and errors.

        Raises:
            TargetError, ReplicationTimeout, ReplicationError, ReplicaStateError, ConfigError:
                as :meth:`wlr.replay.ReplicaSetup.validate` says.
        """
        return self._setup.validate(ReplicateOptions.of(until, timeout=timeout, empty=empty))

    def check(self, options: ReplicateOptions) -> MasterState:
        """Take what ``options`` asks of the replica (its start snapshot, compacted batches, selection)
        and check, without writing anything, that the call may start.

        Args:
            options (ReplicateOptions): the call.

        Returns:
            MasterState: the source's wlc.config.

        Raises:
            as :meth:`validate`.
        """
        self.start_snapshot, self.compacted = options.snapshot, options.compacted
        self._setup.ask_selection(options.selection)
        return self._setup.validate(options)

    def published(self, mcfg: MasterState) -> Published:
        """What the source's wlc.config ``mcfg`` says it has published, and capture's liveness."""
        return self._setup.published(mcfg)

    def route(self, mcfg: MasterState) -> Route:
        """The master's snapshots and compacted batches as this replica reads them."""
        return self._setup.route(mcfg)

    # ------------------------------------------------------------------ reads (wlr.catalog)
    def path_of(self, table: str) -> str:
        """Folder (URI) of replica table ``"schema.table"``."""
        return self._view.path_of(table)

    def table(self, table: str):
        """The replica table ``"schema.table"`` as a DataFrame as of the last consistent tick
        (:meth:`wlr.catalog.ConsistentView.table`).

        Raises:
            ReplicaStateError: the table is not on the replica at that tick.
        """
        return self._view.table(table)

    def tables(self) -> dict:
        """Every replica table as of the last consistent tick: ``{"schema.table": DataFrame}``."""
        return self._view.tables()

    def versions(self) -> dict[str, int]:
        """``{"schema.table": Delta version}`` of every replica table at the last consistent tick."""
        return self._view.versions()

    def view_tick(self) -> int:
        """The transaction the reads of :meth:`table` stand at (the last consistent tick)."""
        return self._view.view_tick()

    def verify(self) -> Verification:
        """Compare every table with the master at the replica's last consistent tick: definition,
        row count and an order-independent hash of every row, the master read by time travel at
        the versions that tick stands for (:mod:`wlr.verify`). Changes nothing.

        Returns:
            Verification: ``.equal`` (every table compared and equal), ``.tables`` (one
            :class:`wlr.verify.TableCheck` each, with the first differing rows), ``.reason`` (why
            nothing could be compared), ``.render()``.

        Raises:
            ReplicaStateError: the replica is being restored; its source is fenced or refuses it.
            NotFoundError: the master's folder (whose tables are read) or the source is not there.
            wlc.BatchError: a published batch is damaged.
        """
        st = self._book.current()
        if st.state == "restoring":
            raise ReplicaStateError(
                f"replica {self.name} is being restored (wlr restore); verify it when it has finished"
            )
        store = self._setup.store(self._setup.master_config())
        return verify(
            self._session,
            self.name,
            self.master,
            st.view_tick,
            st.read_versions(),
            self.storage,
            self.path,
            *self._master_folder(),
            store,
            Selection.from_state(st),
        )

    def _master_folder(self) -> tuple[Storage, str]:
        """The master's folder whose tables :meth:`verify` reads: the source's own when the replica
        reads a master (a promoted one's folder may have another name), else ``<master dbfarm>/<master>``."""
        src = self.source
        if src.is_master:
            return src.storage, src.root
        return Storage.of(self.master_dbfarm), self.master_path

    def pin(self) -> PinnedView:
        """The last consistent tick pinned for readers without Spark: each table's Delta version
        and folder (:class:`wlr.catalog.PinnedView`; :func:`wlr.pin` from any process)."""
        return self._view.pin()

    @property
    def metrics_port(self) -> int | None:
        """The port this process serves the replica's ``/metrics`` on (None: none)."""
        return self._metrics.port

    @property
    def relay_path(self) -> str:
        """The relay folder, ``<replica>/wlr_relay``."""
        return self._relay.relay_path

    @property
    def relaying(self) -> bool:
        """True when this replica relays what it applied."""
        return self._relay.relaying

    def following(self) -> bool:
        """True while the follow thread runs (it ends at stop(), close() or a divergence, not at a failure)."""
        return self._follower.following()

    def stop(self) -> None:
        """Stop following (MonetDB's wlr.stop()); each table first finishes the segment it is applying."""
        self._follower.stop()

    def interrupt(self) -> None:
        """Have the replay under way (:meth:`run`, in another thread) stop at its next safe point:
        each table ends the segment it is applying, what landed is recorded. Takes no lock (a
        signal handler may call it); the call then returns as a :meth:`stop` makes it."""
        self._follower.stop_event.set()

    def close(self) -> None:
        """Stop following and release the replica's lock and watcher."""
        self._follower.close()

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
        """Apply published batches up to ``until``, as :func:`wlr.replicate` on this replica (its
        arguments and the docs' reference page "Replicating" say what each does).

        Args:
            until (int | str | datetime | None): None: everything published; int: every
                transaction id <= it (-1: none); datetime or ISO-8601 string: every transaction
                committed at or before that UTC instant. Inclusive (:mod:`wlcore.target`).
            follow (bool | None): with ``until=None``, keep following until :meth:`stop` (None: ``replica.follow``).
            timeout (float | None): seconds to wait for ``until`` to be published (None: ``replica.timeout``).
            collapse (bool | None): one commit a segment (True) or a master transaction (False)
                (None: ``replica.collapse``).
            snapshot (int | None): the snapshot a new replica starts from (None: the newest fit).
            compacted (bool): replay through compacted batches where they fit.
            relay (bool | None): ship what is applied to ``<replica>/wlr_relay`` (None: as recorded).
            tables (str | list[str] | None): a new replica's tables (None: ``replica.tables``).
            where (dict[str, str] | None): ``{"schema.table": Spark SQL predicate}``: a new replica's rows.
            empty (bool): make a new replica whose target is before the master's first transaction.
            metrics_port (int | str | None): the port of ``/metrics`` (0: any free; None: ``metrics.port``).

        Returns:
            Replica: self, once the target is reached (following: once all published is applied).

        Raises:
            TargetError, ReplicationError, ReplicationTimeout, ReplicaStateError, DivergedError,
                ConfigError, MetricsError: as :func:`wlr.replicate` says.
        """
        options = ReplicateOptions.of(
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
        return self.run(options)

    def run(self, options: ReplicateOptions) -> Replica:
        """Carry out one ``replicate()`` call, its arguments checked already.

        Args:
            options (ReplicateOptions): the call (:meth:`wlr.replay.ReplicateOptions.of`).

        Returns:
            self, as :meth:`replicate`.

        Raises:
            as :meth:`replicate`.
        """
        self.collapse = options.collapse
        mcfg = self.check(options)
        note = date_note(options.target)
        if note:
            warnings.warn(note, TargetWarning, stacklevel=3)
        self._metrics.serve(options.metrics_port, self)  # wlr_tick, lag...: the figures of status()
        self.stop()
        self._options.relay_wanted = options.relay
        self._follower.run_to(options, mcfg)
        return self

    def accept(self) -> int:
        """Skip exactly the failed transaction (as PostgreSQL's ALTER SUBSCRIPTION ... SKIP).

        Returns the id of the skipped transaction; ``tick()`` then reports it as handled.

        Raises:
            ReplicaStateError: there is no failed transaction to skip, or the failure is not
                tied to one transaction (e.g. a gap in the logs).
        """
        self.stop()
        with self._follower.mutex, self._lock.holding():
            state = self._book.reload()
            txn = failure.skip(
                state,
                self.name,
                LogStore(self.source.storage, self.source.root, state.logs, self.master),
                self._applier.current().tables.current_version,
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


def _replay_session(base: Any) -> Any:
    """:func:`wlr.apply.replay_session` (imported at the first Spark use: ``wlr status`` imports no Spark)."""
    from .apply import replay_session

    return replay_session(base)
