"""Making a replica: the checks before anything is written, the start from a snapshot, the locks.

A part of :class:`wlr.replica.Replica`, built with what it uses: the replica's state
(:class:`wlr.book.StateBook`), its lock, its source, its options and its consistent view.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from wlcore import epochs
from wlcore import snapshots as snap
from wlcore.discovery import delta_ref
from wlcore.errors import ConfigError
from wlcore.master_state import CONFIG_FILE as MASTER_CONFIG
from wlcore.master_state import MasterState
from wlcore.names import split_name
from wlcore.replica_state import ReplicaState
from wlcore.session import check_s3a
from wlcore.settings import number, settings
from wlcore.storage import Storage, copy_tree

from .apply import Applier
from .book import LOG_FILE, StateBook
from .errors import DivergedError, ReplicaStateError, ReplicationError
from .lock import LOCK_FILE, ReplicaLock
from .logs import LogError
from .options import ReplayOptions
from .plan import Target, check_not_passed
from .route import Route
from .select import Selection, check_same
from .source import Names, Source
from .target import Published, check_capture, check_in_time, check_not_empty, meaning
from .view import ConsistentView


class ReplicaSetup:
    """Set-up of :class:`wlr.replica.Replica`: validate, the first copy, the master's config.

    Args:
        book: the replica's state and log.
        lock: the replica's ``wlr.lock`` (probed by :meth:`validate`).
        source: returns where the replica reads now (:mod:`wlr.source`).
        names: the replica's resolved names: its dbfarm, the master and the master's dbfarm.
        options: how replay runs (:class:`wlr.options.ReplayOptions`).
        default_timeout: seconds ``replicate`` waits for a target (``replica.timeout``).
        spark: returns the replay session; applier: returns the replica's applier.
        view: the replica's consistent view (set when a replica is made).
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
        """What ``replicate(tables=, where=)`` asks for (None: the recorded selection, or
        for a new replica ``replica.tables``/``replica.where`` in config)."""
        self._asked = None if tables is None and where is None else Selection.of(tables, where)

    def _choose_selection(self, state: ReplicaState | None) -> None:
        """Settle the selection: the recorded one (a different one asked is refused), or
        for a new replica (``state`` None) the one asked or configured, its predicates parsed now."""
        if state is not None and state.state != "restoring":
            recorded = Selection.from_state(state)
            if self._asked is not None:
                check_same(recorded, self._asked, self.name)
            self.selection = recorded
            return
        cfg = settings().replica
        self.selection = self._asked or Selection.of(cfg.tables or None, cfg.where or None)
        if not self.selection.where:
            return
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        for table, pred in self.selection.where:  # parsed now: a typo fails before anything is written
            try:
                parser.parseExpression(pred)
            except Exception as exc:  # noqa: BLE001 (Py4JJavaError: ParseException)
                first = str(exc).split("ParseException:", 1)[-1].strip().splitlines()[0]
                raise ConfigError(
                    f"where: the predicate of {table} does not parse ({first}); "
                    "give a Spark SQL condition such as \"o_region = 'EU'\""
                ) from None

    def validate(self, target: Target, until=None, timeout: float | None = None, empty: bool = False) -> MasterState:
        """Check, without writing anything, that ``replicate(until)`` may start; returns the master's wlc.config.

        ``target``: ``until`` parsed (:func:`wlcore.target.parse_until`; ``until`` names it in
        messages); ``timeout``: seconds ``replicate`` would wait for the target (default
        ``replica.timeout``); ``empty``: a new replica may hold no transaction (see
        :mod:`wlr.target` for the checks on the target).

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
            ConfigError: the replica folder is a file.
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
        check_capture(target, until, pub, f"wlc capture {self.master_dbfarm} {self.master}")
        check_in_time(
            target,
            until,
            pub,
            datetime.now(timezone.utc),
            self.default_timeout if timeout is None else number(timeout, "timeout"),
            settings().capture.settle,
        )
        self._choose_selection(state)
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
            self._check_selected(mcfg, logs, start)
            self._check_predicates(start)
        return mcfg

    def _check_selected(self, mcfg: MasterState, logs: str, start) -> None:
        """Raise NotFoundError when a new selective replica names a table (or pattern) that no
        published transaction and not its start snapshot knows, naming the nearest; as
        PostgreSQL's CREATE PUBLICATION refuses a table that does not exist."""
        if self.selection is None or not (self.selection.tables or self.selection.where):
            return
        from .txlog import check_tables, known_tables

        known = known_tables(self.source.storage, logs, self.master, start.path or "")
        where = f"in master {self.master!r} (its snapshot and published transactions)"
        check_tables(self.selection.tables, known, where)
        check_tables([t for t, _p in self.selection.where], known, where)

    def _check_predicates(self, start) -> None:
        """Raise ConfigError when a ``where`` predicate does not fit its table in the snapshot
        a new replica starts from (an unknown column, a type error), before anything is written."""
        if self.selection is None or not self.selection.where or not start.path:
            return
        from pyspark.sql import functions as F

        tables = {n.lower(): n for n in snap.read(self.source.storage, start.path).tables}
        for table, pred in self.selection.where:
            if table not in tables:
                continue  # created later: checked when it is applied
            schema, name = split_name(tables[table])
            uri = self.source.storage.uri(Storage.join(start.path, schema, name))
            try:
                self.spark.read.format("delta").load(uri).filter(F.expr(pred)).schema  # noqa: B018 (resolving the schema analyses the predicate)
            except Exception as exc:  # noqa: BLE001 (AnalysisException: the caller's predicate)
                raise ConfigError(
                    f"where: the predicate of {table} does not fit the table "
                    f"({str(exc).splitlines()[0]}); correct it (columns: "
                    f"{', '.join(self.spark.read.format('delta').load(uri).columns)})"
                ) from None

    def published(self, mcfg: MasterState) -> Published:
        """What the source's wlc.config ``mcfg`` says it has published, and capture's liveness
        (known from the master's own folder only)."""
        label = "the master" if self.source.is_master else self.source.label
        return Published.of(mcfg, datetime.now(timezone.utc), label, self.source.is_master)

    def route(self, mcfg: MasterState) -> Route:
        """The master's snapshots and compacted batches as this replica reads them."""
        if self._route is None or (self._route.dbid, self._route.master_path) != (mcfg.dbid, self.source.root):
            self._route = Route(self.source.storage, self.source.root, self.master, mcfg.dbid)
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
        """Raise DivergedError when the source's epoch history (:mod:`wlcore.epochs`) disagrees
        with the one this replica followed on a transaction both have."""
        self._check_epochs(state, mcfg.epochs, mcfg.tick, f"{self.source.label}'s wlc.config")

    def check_batches(self, batches) -> None:
        """Raise DivergedError when a batch read for this round was written in another
        history than the replica followed (the config read before it may be older)."""
        for b in batches:
            if b.manifest.epochs:
                self._check_epochs(self.state, b.manifest.epochs, b.manifest.last_txn, f"batch {b.number}")

    def _check_epochs(self, state: ReplicaState, their_text: str, their_tick: int, where: str) -> None:
        """Raise DivergedError when ``their_text`` (an epoch history up to ``their_tick``, read
        from ``where``) disagrees with the one in ``state`` on a transaction both have."""
        try:
            mine, theirs = epochs.parse(state.epochs), epochs.parse(their_text)
        except ValueError as exc:
            raise ReplicaStateError(
                f"the epoch history in {where} or in {self.path}'s wlr.config is damaged ({exc}); make a new replica"
            ) from None
        tick = state.tick
        at = epochs.diverged(mine, tick, theirs, their_tick)
        if at is None:
            return
        cause = (
            f"{self.source.label} wrote another history from transaction {at} on (epoch "
            f"{epochs.at(theirs, at)}) than this replica followed up to transaction {tick} (epoch "
            f"{epochs.at(mine, at)}): the master was restored from a copy or its logs were reset. "
            "Nothing was applied"
        )
        raise DivergedError(
            f"{cause}; make a new replica (wlr.replicate({self.master!r}, replica='<new name>')) or read from a "
            "source that kept this history (source=...)",
            at,
            cli=f"{cause}; make a new replica (wlr replicate <dbfarm> {self.master} <new name>) or read from a "
            "source that kept this history (--source)",
        )

    def note_history(self, batches) -> None:
        """Keep the epoch history of the batch holding the replica's tick (its manifest's)."""
        tick = self.state.tick
        for b in reversed(batches):
            if b.manifest.epochs and b.manifest.first_txn <= tick:
                hist = epochs.upto(epochs.parse(b.manifest.epochs), tick)
                self.state.epochs = epochs.format(hist)
                self.state.epoch = epochs.at(hist, tick) or ""
                return

    def ensure(self, mcfg: MasterState, target: Target) -> None:
        """Make the replica on first use from the newest snapshot at or before ``target``
        (:mod:`wlr.route`): wlr.config first (state ``restoring``), then the snapshot's
        tables, then state ``new`` at the snapshot's transaction. A crash in between
        restarts the copy. A replica that exists is never reset by a newer snapshot."""
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
                self.state.set_version(name, applier.current_version(name))
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
        """The source's wlc.config (the master's, or its shipped or relayed copy)."""
        mcfg = self.source.config()
        if mcfg is None:
            raise self.source.missing(self.master)
        if self.source.is_master and self.source.name != self.master:
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
        master, shipped copies and relays of one master); returns the log folder."""
        logs = self.source.logs(mcfg)
        state = self.state
        if (state.source, state.source_kind, state.logs) != (self.source.root, self.source.kind, logs):
            if state.source and state.source != self.source.root:
                self.book.log(
                    f"now reading from {self.source.label} (was {state.source}), from transaction {state.tick + 1}"
                )
            state.source, state.source_kind, state.logs = self.source.root, self.source.kind, logs
            self.book.save()
        return logs
