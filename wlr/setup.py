"""Making a replica: the checks before anything is written, the start from a snapshot, the locks.

A part of :class:`wlr.replica.Replica`, built with what it uses: the replica's state
(:class:`wlr.book.StateBook`), its lock, its source, its options and its consistent view.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Sequence

from wlcore import epochs, snapshots as snap
from wlcore.discovery import delta_ref
from wlcore.errors import ConfigError
from wlcore.master_state import CONFIG_FILE as MASTER_CONFIG, MasterState, check_paths
from wlcore.names import split_name
from wlcore.replica_state import ReplicaState
from wlcore.session import check_s3a
from wlcore.settings import number, settings
from wlcore.storage import Storage, copy_tree

from . import select
from .book import LOCK_FILE, LOG_FILE, ReplicaLock, StateBook
from .errors import ReplicaStateError, ReplicationError
from .options import ReplayOptions
from .planner import Batch, LogError, Route, Target, check_history, check_not_passed, note_history
from .select import Selection
from .source import Names, Source
from .target import Published, check_capture, check_in_time, check_not_empty, meaning
from .view import ConsistentView

if TYPE_CHECKING:  # wlr.apply imports pyspark: `wlr status` and `wlr log` start without it
    from .apply import Applier


class ReplicaSetup:
    """Set-up of :class:`wlr.replica.Replica`: validate, the first copy, the master's config.

    Args:
        book (StateBook): the replica's state and log.
        lock (ReplicaLock): the replica's ``wlr.book`` (probed by :meth:`validate`).
        source (Callable[[], Source]): returns where the replica reads now (:mod:`wlr.source`).
        names (Names): the replica's resolved names: its dbfarm, the master and the master's dbfarm.
        options (ReplayOptions): how replay runs (:class:`wlr.options.ReplayOptions`).
        default_timeout (float): seconds ``replicate`` waits for a target (``replica.timeout``).
        spark (Callable[[], SparkSession]): returns the replay session.
        applier (Callable[[], Applier]): returns the replica's applier.
        view (ConsistentView): the replica's consistent view (set when a replica is made).
    """

    def __init__(
        self,
        book: StateBook,
        lock: ReplicaLock,
        source: Callable[[], Source],
        names: Names,
        options: ReplayOptions,
        default_timeout: float,
        spark: Callable[[], Any],
        applier: Callable[[], Applier],
        view: ConsistentView,
    ) -> None:
        self.book = book
        self.lock = lock
        self._source = source
        self.master = names.master
        self.master_dbfarm = names.master_dbfarm
        self.dbfarm = names.dbfarm
        self.options = options
        self.default_timeout = default_timeout
        self._spark = spark
        self._applier = applier
        self.view = view
        self.storage: Storage = book.storage
        self.path = book.path
        self.name = book.name
        self.selection: Selection | None = None
        self._asked: Selection | None = None
        self._route: Route | None = None

    @property
    def source(self) -> Source:
        """Where the replica reads now."""
        return self._source()

    @property
    def state(self) -> ReplicaState:
        """The replica's state in memory (:attr:`wlr.book.StateBook.state`)."""
        return self.book.state

    @property
    def spark(self) -> Any:
        """The replay session."""
        return self._spark()

    def ask_selection(self, tables=None, where=None) -> None:
        """Keep what ``replicate(tables=, where=)`` asks for; :meth:`validate` settles it.

        Args:
            tables (str | list[str] | None): table names or patterns (``fnmatch``) to replicate;
                None with ``where`` None: the recorded selection, or for a new replica
                ``replica.tables``/``replica.where`` in config.
            where (dict[str, str] | None): ``{table: Spark SQL predicate}``: the rows to replicate.

        Raises:
            ConfigError: a malformed name or pattern (:meth:`wlr.select.Selection.of`).
        """
        self._asked = None if tables is None and where is None else Selection.of(tables, where)

    def validate(self, target: Target, until=None, timeout: float | None = None, empty: bool = False) -> MasterState:
        """Check, without writing anything, that ``replicate(until)`` may start (see :mod:`wlr.target`
        for the checks on the target).

        Args:
            target (Target): ``until`` parsed (:func:`wlcore.target.parse_until`).
            until (int | str | datetime | None): the target as the caller gave it, named in messages.
            timeout (float | None): seconds ``replicate`` would wait for the target (None:
                ``replica.timeout``).
            empty (bool): a new replica may hold no transaction.

        Returns:
            MasterState: the source's ``wlc.config``.

        Raises:
            TargetError: ``until`` is malformed or already passed; an instant later than the
                timeout can wait for; a new replica's target before the master's first
                transaction (unless ``empty``).
            ReplicationTimeout: the target is not published and cannot be: capture is stale
                or the master stopped logging before it.
            ReplicationError: a new replica's path through the logs meets a batch that is
                missing, damaged or another database's (``batch`` names it; nothing is written).
            ReplicaStateError: the master is not a master; the replica folder is a master, a
                replica of another master or of an earlier incarnation, or a non-empty folder.
            ConfigError: the replica folder is a file; a predicate does not parse or fit.
            NotFoundError: a selected table is unknown to the master.
        """
        # Spark must reach S3 before anything is written. The URL's scheme, not the storage,
        # decides it: this is about Spark's configuration (its s3a filesystem on the
        # classpath, as wlcore.session decides from the same prefixes), not about files
        for url in (self.source.root, self.dbfarm):
            if url.startswith(("s3://", "s3a://")):
                check_s3a(self.spark, url)
        mcfg = self.master_config()
        if self.storage.exists(self.path) and not self.storage.isdir(self.path):
            raise ConfigError(f"{self.path} is a file, not a database folder; name another replica")
        self.lock.probe()
        if self.storage.exists(Storage.join(self.path, MASTER_CONFIG)):
            raise ReplicaStateError(f"{self.path} is a master; a master cannot become a replica")
        state = self.book.load()
        if state is not None and state.empty:
            state = None  # a wlr.config without a key: not a replica yet
        if state is not None:
            self._check_follows(state, mcfg)
            self.check_history(state, mcfg)
            check_not_passed(target, state.tick, state.clock, named=meaning(until, target))
        elif any(
            n for n in self.storage.listdir(self.path) if not n.startswith(".") and n not in (LOCK_FILE, LOG_FILE)
        ):
            raise ReplicaStateError(f"{self.path} exists and is not empty; replicate into a new database name")
        pub = self.published(mcfg)
        check_capture(target, until, pub, f"wlc capture {self.master_dbfarm} {self.source.capture_name(self.master)}")
        check_in_time(
            target,
            until,
            pub,
            datetime.now(timezone.utc),
            self.default_timeout if timeout is None else number(timeout, "timeout"),
            settings().capture.settle,
        )
        self.selection = select.choose(state, self._asked, self.name, self._spark)
        if state is None or state.state == "restoring":
            logs = self.source.logs(mcfg)
            start = self.route(mcfg).start_for(mcfg, logs, target, self.options.start_snapshot)
            if state is None and start.txn < 0 and not empty and target.kind != "all":  # reads the first manifest
                check_not_empty(
                    target, until, self.route(mcfg).first_after(logs, start), pub, bool(start.path), empty, self.master
                )
            try:
                self.route(mcfg).check_path(logs, mcfg, start, target, self.options.use_compacted)
            except LogError as exc:  # what an existing replica raises there, and nothing is written
                raise ReplicationError(exc.batch, None, None, exc.cause) from None
            select.check_selected(self.selection, self.source.storage, logs, self.master, start.path or "")
            select.check_predicates(self.selection, self._spark, self.source.storage, start.path or "")
        return mcfg

    def published(self, mcfg: MasterState) -> Published:
        """What the source's ``wlc.config`` says it has published, and capture's liveness (known
        from the master's own folder only).

        Args:
            mcfg (MasterState): the source's ``wlc.config``.

        Returns:
            Published: its tick, clock, watermark and capture's state, judged now (UTC).
        """
        label = "the master" if self.source.is_master else self.source.label
        return Published.of(mcfg, datetime.now(timezone.utc), label, self.source.is_master)

    def route(self, mcfg: MasterState) -> Route:
        """The master's snapshots and compacted batches as this replica reads them (made again when
        the source or its database id changed).

        Args:
            mcfg (MasterState): the source's ``wlc.config`` (its ``dbid``).

        Returns:
            Route: the replica's route (:class:`wlr.planner.Route`).
        """
        if self._route is None or (self._route.dbid, self._route.master_path) != (mcfg.dbid, self.source.root):
            self._route = Route(
                self.source.storage,
                self.source.root,
                self.master,
                mcfg.dbid,
                f"wlc snapshot {self.master_dbfarm} {self.source.capture_name(self.master)}",
            )
        return self._route

    def _check_follows(self, state: ReplicaState, mcfg: MasterState) -> None:
        """Raise ReplicaStateError unless replica ``state`` follows this master, same database id."""
        if state.master != self.master:
            raise ReplicaStateError(f"{self.path} is a replica of {state.master!r}, not {self.master!r}")
        if state.dbid != mcfg.dbid:
            raise ReplicaStateError(
                f"{self.source.label} has database id {mcfg.dbid} but this replica follows "
                f"{state.dbid}: the master was made anew (or the source is another master's); "
                "make a new replica"
            )

    def check_history(self, state: ReplicaState, mcfg: MasterState) -> None:
        """Refuse a source whose epoch history disagrees with the one this replica followed.

        Args:
            state (ReplicaState): the replica's state.
            mcfg (MasterState): the source's ``wlc.config`` (its ``epochs`` up to its ``tick``).

        Raises:
            DivergedError: the histories disagree on a transaction both have (:mod:`wlr.planner`).
            ReplicaStateError: either history is damaged.
        """
        # a promoted master's new epoch holds every transaction after the promotion, written or not
        tick = mcfg.tick if mcfg.promoted_tick is None else max(mcfg.tick, mcfg.promoted_tick + 1)
        self._check_epochs(state, mcfg.epochs, tick, f"{self.source.label}'s wlc.config", mcfg.promoted_tick)

    def check_batches(self, batches: Sequence[Batch]) -> None:
        """Refuse a batch read for this round that was written in another history than the
        replica followed (the config read before it may be older).

        Args:
            batches (Sequence[Batch]): the batches read, each with its manifest's ``epochs``.

        Raises:
            DivergedError: a batch's history disagrees (:mod:`wlr.planner`).
            ReplicaStateError: a history is damaged.
        """
        for b in batches:
            if b.manifest.epochs:
                self._check_epochs(self.state, b.manifest.epochs, b.manifest.last_txn, f"batch {b.number}")

    def _check_epochs(
        self, state: ReplicaState, their_text: str, their_tick: int, where: str, promoted: int | None = None
    ) -> None:
        check_history(
            state, their_text, their_tick, where, label=self.source.label, master=self.master, path=self.path,
            promoted=promoted,
        )  # fmt: skip

    def note_history(self, batches: Sequence[Batch]) -> None:
        """Keep the epoch history of the batch holding the replica's tick (:func:`wlr.planner.note`).

        Args:
            batches (Sequence[Batch]): the batches of the round, ascending.
        """
        note_history(self.state, batches)

    def ensure(self, mcfg: MasterState, target: Target) -> None:
        """Make the replica on first use from the newest snapshot at or before ``target``
        (:mod:`wlr.planner`): wlr.config first (state ``restoring``), then the snapshot's
        tables, then state ``new`` at the snapshot's transaction. A crash in between
        restarts the copy. A replica that exists is never reset by a newer snapshot.

        Args:
            mcfg (MasterState): the source's ``wlc.config``.
            target (Target): the replay target the snapshot must be at or before.

        Raises:
            ReplicaStateError: an existing replica follows another master or database id.
            TargetError: no snapshot is at or before the target.
        """
        if not self.state.empty and self.state.state != "restoring":
            self._check_follows(self.state, mcfg)
            if self.selection is None:
                self.selection = Selection.from_state(self.state)
            return
        logs = self.source.logs(mcfg)
        start = self.route(mcfg).start_for(mcfg, logs, target, self.options.start_snapshot)
        self.storage.makedirs(self.path)
        state = ReplicaState.of(
            master=self.master,
            masterfarm=self.master_dbfarm,
            dbid=mcfg.dbid,
            source=self.source.root,
            source_kind=self.source.kind,
            **(self.selection or Selection()).to_state(),
            logs=logs,
            batches=start.batch + 1,
            tick=start.txn,
            clock=start.time or None,
            skipped=[],
            state="restoring",
        )
        state.set_error(None, None, "", "")
        self.book.state = state
        self.book.save()
        hist = epochs.upto(epochs.parse(mcfg.epochs), start.txn)
        if start.path:
            body = snap.read(self.source.storage, start.path)
            hist = epochs.upto(epochs.parse(body.epochs or mcfg.epochs), start.txn)
            applier = self._applier()
            sel = self.selection or Selection()
            for name in sorted(n for n in body.tables if sel.wants(n)):
                schema, table = split_name(name)
                dst = Storage.join(self.path, schema, table)
                self.storage.rm(dst)
                copy_tree(self.source.storage, Storage.join(start.path, schema, table), self.storage, dst)
                keep = sel.predicate(name)
                if keep is not None:  # selective replication: the rows outside the filter go
                    self.spark.sql(
                        f"DELETE FROM {delta_ref(self.storage.uri(dst))} WHERE NOT coalesce(({keep}), false)"
                    )
                self.state.set_version(name, applier.tables.current_version(name))
            self.book.log(
                f"started from the snapshot of {self.master} at transaction {start.txn} "
                f"({len(body.tables)} tables, {start.path}, {self.source.label})"
            )
        else:
            self.book.log(f"started empty from master {self.master} ({self.source.label})")
        self.state.epochs = epochs.format(hist)
        self.state.epoch = epochs.at(hist, start.txn) or ""
        self.view.set_view(-1, {})
        self.state.state = "new"
        self.book.save()

    def master_config(self) -> MasterState:
        """The source's ``wlc.config`` (the master's, or its shipped or relayed copy).

        Returns:
            MasterState: the configuration read now.

        Raises:
            WlcError: the source has no ``wlc.config`` (:meth:`wlr.source.Source.missing`: a
                ReplicaStateError, or NotFoundError naming the nearest master).
            ReplicaStateError: the source holds another master's logs.
            StalePathError: the master's wlc.config names a log folder or snapshot of another
                place (its folder was moved or copied while the file held absolute paths).
        """
        mcfg = self.source.config()
        if mcfg is None:
            raise self.source.missing(self.master)
        fenced = self.source.fenced()  # a replica was promoted in the master's place
        if fenced is not None:
            raise fenced
        if self.source.is_master:  # a master folder moved or copied while wlc.config held absolute paths
            check_paths(self.source.storage, self.source.root, mcfg)
        if self.source.is_master and mcfg.promoted is None and self.source.name != self.master:
            raise ReplicaStateError(
                f"{self.source.label} is not master {self.master!r}; name the master's own "
                "database or one of its relays as the source"
            )
        if mcfg.database and mcfg.database != self.master:
            raise ReplicaStateError(
                f"{self.source.label} holds the logs of master {mcfg.database!r}, not "
                f"{self.master!r}; name the right master or source"
            )
        return mcfg

    def note_source(self, mcfg: MasterState) -> str:
        """Record in wlr.config where this round reads (a replica may switch between the
        master, shipped copies and relays of one master), logging a switch.

        Args:
            mcfg (MasterState): the source's ``wlc.config`` (names its log folder).

        Returns:
            str: the log folder read.
        """
        logs = self.source.logs(mcfg)
        state = self.state
        if state.source_error:  # read again: status shows the replica's own state again
            self.book.log(f"reading {self.source.label} again (it was out of reach: {state.source_error})")
            state.source_error, state.source_error_since = "", None
            self.book.save()
        if mcfg.beat is not None and state.master_beat != mcfg.beat:  # a promotion keeps it (wlr.promote)
            state.master_beat = mcfg.beat
            self.book.save()
        if (state.source, state.source_kind, state.logs) != (self.source.root, self.source.kind, logs):
            if state.source and state.source != self.source.root:
                self.book.log(
                    f"now reading from {self.source.label} (was {state.source}), from transaction {state.tick + 1}"
                )
            state.source, state.source_kind, state.logs = self.source.root, self.source.kind, logs
            self.book.save()
        return logs
