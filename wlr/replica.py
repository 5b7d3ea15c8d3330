"""A replica database: its state (``wlr.config``) and replay of published batches (follow mode: :mod:`wlr.follow`).

``<dbfarm>/<replica>/wlr.config`` holds ``key=value`` lines: ``master``, ``masterfarm``,
``dbid`` (the master's database id), ``logs``, ``batches`` (next batch to read), ``tick``
(last transaction handled), ``clock`` (its commit time), ``skipped`` (accepted ids),
``state``, the error (``error_batch``, ``error_txn``, ``error_table``, ``error_cause``) and
``version.<schema.table>`` (the replica table's Delta version after replay's last commit,
to detect writes made by anyone else). ``wlr.log`` beside it keeps a line per event.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from datetime import datetime, timezone

from wlcore import batch as batchfmt
from wlcore.batch import parse_utc, utc_iso
from wlcore.databases import Dbfarm
from wlcore.replica_state import ReplicaState, read_replica_state, write_replica_state
from wlcore.settings import check_name, dbfarm as resolve_dbfarm, number, settings
from wlcore.errors import ConfigError
from wlcore.names import state_key
from wlcore.session import active_session
from wlcore.storage import Storage
from wlcore.watch import FolderWatch

from . import failure, monitor
from .apply import Applier, replay_session
from .errors import DivergedError, ReplicaStateError, ReplicationError, ReplicationTimeout, TargetWarning
from .logs import LogError, manifest_of, reaches, read_batches
from .plan import Target, TxnRef, check_not_passed, consistent_tick, is_barrier, parse_until, plan
from .replay import Failure, Item, Round
from .route import Route
from .follow import Follower
from .relay import Relay
from .source import Source, master_name, master_source, named_source, recorded_source, shipped_source
from .setup import ReplicaSetup
from .target import date_note, meaning
from .view import ConsistentView

log = logging.getLogger("wlr.replica")

from .setup import CONFIG_FILE, LOG_FILE  # noqa: E402, F401 (wlr.replica.CONFIG_FILE is used by others)


class Replica(ReplicaSetup, Follower, ConsistentView, Relay):
    """A replica of master ``master``, kept in ``<dbfarm>/<replica>``.

    Args:
        master: master database name (or a ``wlc.Master``); may be left out when ``source``
            or ``logs`` names it.
        replica: replica database name; default ``<master>_replica``.
        dbfarm: folder holding the replica; default from config. The master (and a named
            ``source``) is looked up in the same dbfarm unless ``master_dbfarm`` says otherwise.
        logs: read a shipped copy of the master's logs at this folder or URL
            (``s3://bucket/path``, made by ``wlc ship``) instead of the master's folder.
        source: read from this master or relaying replica (a name in the dbfarm, a
            ``wlc.Master`` or a ``wlr.Replica``): the master's batches with their original
            GTIDs, so a replica may switch between the master and its relays.
        Without ``logs`` and ``source``, a replica reads where it read last (``source`` in
        wlr.config), else ``replica.logs`` in config, else the master's folder.

    Raises:
        ConfigError: a name is malformed; both ``logs`` and ``source``; no master named.
        ReplicaStateError: the source is neither a master nor a replica, or is this replica.
    """

    def __init__(self, master=None, replica: str | None = None, dbfarm: str | None = None,
                 master_dbfarm: str | None = None, spark=None, logs: str | None = None, source=None):
        if logs is not None and source is not None:
            raise ConfigError("give logs= (a shipped copy) or source= (a master or relaying replica), not both")
        if hasattr(master, "dbname"):
            master_dbfarm = master_dbfarm or master.dbfarm
            master = master.dbname
        self.dbfarm = resolve_dbfarm(dbfarm)
        Dbfarm(self.dbfarm)  # a dbfarm that does not exist is refused (NotFoundError): never made by accident
        self.master_dbfarm = resolve_dbfarm(master_dbfarm) if master_dbfarm else self.dbfarm
        chosen = (named_source(source, self.master_dbfarm) if source is not None
                  else shipped_source(logs) if logs is not None else None)
        if master is None:
            if chosen is None:
                raise ConfigError("name the master to replicate (or a source= or logs= that names it)")
            master = master_name(chosen)
        self.master = check_name(master, "master database")
        self.name = check_name(replica or f"{master}_replica", "replica database")
        if self.name == self.master and self.dbfarm == self.master_dbfarm:
            raise ReplicaStateError(f"a database cannot replicate itself ({self.name!r}); name another replica")
        self.storage = Storage.of(self.dbfarm)
        self.path = Storage.join(self.dbfarm, self.name)
        self.master_path = Storage.join(self.master_dbfarm, self.master)
        cfg = settings().replica
        self.beat_seconds = cfg.beat
        self.default_timeout = cfg.timeout
        self.default_follow = cfg.follow
        self.default_collapse = cfg.collapse
        self.parallelism = cfg.parallelism
        self.collapse = self.default_collapse
        self.compacted = True  # replay through compacted batches where they fit (replicate(compacted=...))
        self.start_snapshot: int | None = None  # replicate(snapshot=...): the snapshot a new replica starts from
        self._level0_until = -2  # a compacted batch failed: its range is replayed from level 0 up to here
        self._route: Route | None = None
        self._state_lock = threading.RLock()  # wlr.config values written by replay's worker threads
        self._spark = spark
        self._session = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: FolderWatch | None = None
        self._lockfile = None
        self.last_error: ReplicationError | None = None
        self.state: dict[str, str] = self._load() or {}
        if chosen is not None and chosen.kind == "relay" and chosen.root.startswith(self.path.rstrip("/") + "/"):
            raise ReplicaStateError(f"a replica cannot read its own relay ({self.name!r}); name another source")
        default_logs = cfg.logs
        self.source: Source = (chosen or recorded_source(self.state)
                               or (shipped_source(default_logs) if default_logs and not self.state else None)
                               or master_source(self.master_dbfarm, self.master))

    # ------------------------------------------------------------------ state file
    def _load(self) -> dict[str, str] | None:
        st = read_replica_state(self.storage, self.path)
        return None if st is None else st.pairs()

    def _save(self) -> None:
        write_replica_state(self.storage, self.path, ReplicaState.from_pairs(self.state))

    def _log(self, message: str, level: int = logging.INFO) -> None:
        line = f"{utc_iso(datetime.now(timezone.utc))} {message}\n"
        log.log(level, "%s: %s", self.name, message)
        if self.storage.local:
            with open(os.path.join(self.path, LOG_FILE), "a", encoding="utf-8") as fh:
                fh.write(line)

    @property
    def spark(self):
        """The replay session: a child of the active SparkSession with its own SQL settings."""
        if self._session is None:
            self._session = replay_session(self._spark or active_session())
        return self._session

    # ------------------------------------------------------------------ public queries
    def tick(self) -> int:
        """Id of the last transaction handled (applied, or skipped by accept()); -1 when none."""
        return int(self._load_or_state().get("tick", -1))

    def clock(self) -> datetime | None:
        """Commit time (UTC) on the master of the last transaction handled; None when none."""
        text = self._load_or_state().get("clock")
        return parse_utc(text) if text else None

    def beat(self) -> int:
        """Refresh rate of follow mode, in seconds (MonetDB's ``wlr.beat()``)."""
        return int(round(self.beat_seconds))

    def _load_or_state(self) -> dict[str, str]:
        return self._load() or self.state

    def status(self) -> dict:
        """State for people: master, tick, clock, lag, liveness and error (:mod:`wlr.monitor`).

        Returns a dict: ``replica``, ``master``, ``state`` (``new``, ``idle``, ``following``,
        ``failed``, or ``stale`` for a follower whose heartbeat stopped: killed or hung),
        ``tick``/``clock`` (last transaction handled, its UTC commit time), ``master_tick``
        (last published), ``master_write``, ``unpublished`` (master commits capture has not
        published yet), ``lag_transactions`` (master commits not applied: ``master_tick - tick
        + unpublished``), ``lag_seconds`` (now - the oldest of them's commit time, 0 when none;
        None when unknown), ``capture`` (``alive``, ``stale``, ``stopped``, ``not started`` or
        ``unknown``) with ``capture_heartbeat`` (the instant it refers to) and ``capture_text``
        (the line ``wlr status`` prints, :func:`wlcore.health.liveness_line`), ``heartbeat`` (the
        follower's), ``skipped``, ``error``, ``diverged`` (why the source's history is not
        this replica's, or None) and ``exit`` (the code ``wlr status`` exits with: 0 healthy,
        1 failed, 4 diverged, 5 the follower or capture stale; :mod:`wlcore.health`).
        """
        return monitor.replica_status(self)

    def _applier(self) -> Applier:
        if getattr(self, "_applier_obj", None) is None or self._applier_obj.dbid != self.state["dbid"]:
            self._applier_obj = Applier(lambda: self.spark, self.storage, self.path, self.state["dbid"],
                                        self.source.storage)
        self._applier_obj.logs_storage = self.source.storage
        self._applier_obj.selection = self.selection
        return self._applier_obj

    # ------------------------------------------------------------------ replay
    def raise_if_failed(self) -> None:
        """Raise the stored ReplicationError when replay stopped at a failure not yet resolved."""
        err = failure.stored(self._load_or_state())
        if err is not None:
            raise err

    def replicate(self, until=None, follow: bool | None = None, timeout: float | None = None,
                  collapse: bool | None = None, snapshot: int | None = None,
                  compacted: bool = True, relay: bool | None = None, tables=None, where=None,
                  empty: bool = False) -> "Replica":
        """Apply published batches up to ``until`` (see :mod:`wlr.plan` for the semantics).

        Args:
            until: None (all published), int txn id (inclusive; -1: before the first), or a
                UTC instant (datetime or ISO-8601 string, inclusive, a consistent cut across
                tables; a date alone is that day's start, said by a :class:`wlr.TargetWarning`).
                A target not published yet is said at once and its wait shown (:mod:`wlr.wait`).
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
            ConfigError: a ``tables`` pattern or ``where`` predicate is malformed.
        """
        target = parse_until(until)
        self.start_snapshot = snapshot
        self.compacted = bool(compacted)
        self.ask_selection(tables, where)
        follow = self.default_follow if follow is None else bool(follow)
        self.collapse = self.default_collapse if collapse is None else bool(collapse)
        timeout = self.default_timeout if timeout is None else number(timeout, "timeout")
        mcfg = self.validate(until, timeout=timeout, empty=empty)
        note = date_note(until, target)
        if note:
            warnings.warn(note, TargetWarning, stacklevel=2)
        self.stop()
        self._relay_wanted = relay
        self._stop.clear()  # a stop() from now on ends this call after the segments being applied
        with self._lock:
            self._acquire()
            try:
                self.state = self._load() or {}
                if self.state:
                    check_not_passed(target, int(self.state.get("tick", -1)), self.clock(),
                                     named=meaning(until, target))
                self._wait_for(target, until, timeout, mcfg)
                self.state["until"] = "" if until is None else str(until)
                failed = bool(self.state.get("error_cause"))
                follow = follow and target.kind == "all" and not self._stop.is_set()
                self.state["state"] = "failed" if failed else ("following" if follow else "idle")
                self._save()
            finally:
                if not follow:
                    self._release()
        if follow:
            self._start_follow()
        return self

    def _step(self, target: Target, progress: bool = True) -> tuple[bool, str]:
        """Apply what the plan allows now. Returns (target reached, what it waits for)."""
        diverged = False
        try:
            while True:
                self._handoff = False
                reached, waiting = self._step_once(target, progress)
                if reached or self._handoff is False or self._stop.is_set():
                    return reached, waiting
        except DivergedError:
            diverged = True  # nothing more is relayed from a source on another history
            raise
        finally:
            if not diverged:
                self._relay()

    def _step_once(self, target: Target, progress: bool) -> tuple[bool, str]:
        """One round; ``_handoff`` set: level 0 stopped where a compacted batch takes over."""
        mcfg = self._master_config()
        self._ensure(mcfg, target)
        if getattr(self, "_relay_wanted", None) is not None:
            self.state["relay"] = "1" if self._relay_wanted else ""
            self._relay_wanted = None
        self._check_history(self.state, mcfg)
        logs = self._note_source(mcfg)
        next_batch = int(self.state.get("batches", 0))
        tick = int(self.state.get("tick", -1))
        units = self._units(mcfg, logs, tick, next_batch, target)
        if units:  # level 0 continues after them
            self._log("replaying through compacted " + ", ".join(os.path.basename(b.path) for b in units))
            tick, next_batch = units[-1].manifest.last_txn, units[-1].number + 1
        self.route(mcfg).check_level0(logs, tick, next_batch, mcfg, False, target)
        stopped, watermark = mcfg.stopped, mcfg.watermark_time
        batches, broken = list(units), None
        try:
            for b in read_batches(self.source.storage, logs, self.master, self.state["dbid"], next_batch, tick, target):
                batches.append(b)
                if watermark is None or b.manifest.watermark > watermark:
                    watermark = b.manifest.watermark
        except LogError as exc:
            if exc.batch > next_batch and self._compacted_from(logs, exc.batch):
                self._handoff = exc.batch  # pruned or damaged at level 0: a compacted batch starts there
            else:
                broken = exc  # the intact batches before it are applied first
        # the last batch read; every batch there is, when reading did not stop at the target
        read_up_to = batches[-1].number if batches else next_batch - 1
        if not (batches and reaches(batches[-1].manifest, target)):
            read_up_to = sys.maxsize
        if self._handoff is not False:
            read_up_to = self._handoff - 1
        self._note_recovery(read_up_to if broken is None else broken.batch - 1)  # a batch's failure
        unit_refs = [TxnRef(t.txn, t.time, b.number, t.table, is_barrier(t.ddl, t.change, t.adds),
                            b.manifest.first_txn, t.committed) for b in units for t in b.manifest.txns]
        refs = [TxnRef(t.txn, t.time, b.number, t.table, is_barrier(t.ddl, t.change, t.adds), None, t.committed)
                for b in batches[len(units):] for t in b.manifest.txns if t.txn > tick]
        todo = plan(tick, refs, target, watermark, stopped)
        if self._handoff is not False and not (batches and reaches(batches[-1].manifest, target)):
            todo.reached = False  # the batches after the hand-off are not read yet
        todo.apply = unit_refs + todo.apply
        self._check_batches(batches)  # read after the config was: a batch of another history is never applied
        failed = self._round(todo.apply, batches, *self._items(batches, {r.txn for r in todo.apply}), progress)
        self._advance(batches)
        self._note_history(batches)
        self._save()
        if int(self.state.get("tick", -1)) > tick:  # wlr.lag_history() reads these lines
            self._log(f"{monitor.TICK_LINE} {self.state['tick']} (committed {self.state.get('clock', '')})")
        self._note_recovery(-1)  # a transaction's failure, passed now
        if failed is not None and any(r.txn == failed.txn for r in unit_refs):
            unit = next(b for b in units if b.manifest.first_txn <= failed.txn <= b.manifest.last_txn)
            self._level0_until = unit.manifest.last_txn
            self._log(f"compacted batch {os.path.basename(unit.path)} failed on {failed.table} ({failed.cause}); "
                      f"replaying transactions up to {unit.manifest.last_txn} from level 0")
            return False, "level-0 replay of a compacted batch's range"
        if failed is not None:
            self._fail(failed.batch, failed.txn, failed.table, failed.cause)
        # reading stops at the batch that reaches the target, so a broken batch was needed,
        # unless the replica already stood at a target transaction
        if broken is not None and not (target.kind == "txn" and tick >= target.txn):
            self._fail(broken.batch, None, None, broken.cause)
        if self._stop.is_set():
            return False, "stop() was called"  # the round may have ended early: the target is not known reached
        if target.kind == "txn" and not todo.reached and stopped:
            raise ReplicationTimeout(f"the master stopped logging at transaction {mcfg.tick if mcfg.has('tick') else None}; "
                                     f"transaction {target.txn} will never be published (the replica "
                                     f"applied everything up to {self.state.get('tick')})")
        return todo.reached, todo.waiting_for

    def _compacted_from(self, logs: str, number: int) -> bool:
        """True when replay may use compacted batches and one begins at level-0 batch ``number``."""
        if not (self.collapse and self.compacted) or int(self.state.get("tick", -1)) < self._level0_until:
            return False
        return any(first == number for _lv, first, _l, _p in batchfmt.list_compacted(self.source.storage, logs, self.master))

    def _units(self, mcfg, logs: str, tick: int, next_batch: int, target: Target) -> list:
        """The compacted batches to apply first (none with ``collapse=False`` or
        ``compacted=False``, or inside a range that failed compacted)."""
        if not (self.collapse and self.compacted) or tick < self._level0_until:
            return []
        try:
            return self.route(mcfg).units(logs, tick, next_batch, target)
        except LogError as exc:  # level 0 holds everything a compacted batch does
            self._log(f"not using compacted batches: {exc.cause}")
            return []

    def _note_recovery(self, read_up_to: int) -> None:
        """Clear a stored failure once replay got past it (a later retry succeeded)."""
        line = failure.clear_if_passed(self.state, read_up_to)
        if line:
            self._save()
            self.last_error = None
            self._log(line)

    def _items(self, batches, wanted: set[int]) -> tuple[dict[int, Item], dict[int, str]]:
        """``({txn: Item}, {txn: cause})`` of the wanted transactions, files verified; the
        causes are the transactions that cannot be applied as published."""
        items, bad = {}, {}
        for b in batches:
            records = [t for t in b.manifest.txns if t.txn in wanted
                       and (self.selection is None or self.selection.wants(t.table))]
            if not records:
                continue
            problems = batchfmt.verify_files(self.source.storage, b.path, b.manifest, [r.rows for r in records if r.rows])
            for rec in records:
                items[rec.txn] = Item(b.number, b.path, rec)
                found = {f: p for f, p in problems.items() if rec.rows and f.startswith(rec.rows.rstrip("/") + "/")}
                if found:
                    bad[rec.txn] = "checksum verification failed: " + "; ".join(
                        f"{f}: {p}" for f, p in sorted(found.items())[:3])
                elif rec.lost:
                    bad[rec.txn] = f"its change rows were not captured: {rec.lost}"
        return items, bad

    def _advance(self, batches) -> None:
        """Move ``batches`` (the next batch to read) past every batch whose transactions are all handled."""
        tick = int(self.state["tick"])
        for b in batches:
            if tick < b.manifest.last_txn:
                break
            self.state["batches"] = str(b.number + 1)

    def _round(self, todo: list[TxnRef], batches, items: dict[int, Item], bad: dict[int, str],
               progress: bool = True) -> Failure | None:
        """Apply ``todo`` by segments, tables in parallel; tick, clock, the next batch and the
        read view follow the consistent point after every segment (the caller saves at the end)."""
        if not todo:
            return None
        tick0 = int(self.state.get("tick", -1))
        times = {r.txn: r.time for r in todo}

        def progressed(done: dict[str, int]) -> None:
            reached = consistent_tick(tick0, todo, done)
            if reached > int(self.state["tick"]):
                self.state["tick"], self.state["clock"] = str(reached), utc_iso(times[reached])
                self._advance(batches)
                self._set_view(reached, done)  # saved with the tick: readers see both move together
            self._save()

        rnd = Round(self._applier(), self.state, self._state_lock, items, bad, progressed, self._log, self._stop)
        sel = self.selection
        skipped = {r.table for r in todo if sel is not None and not sel.wants(r.table)}
        if skipped:  # tables this replica does not carry: handled without being applied
            rnd.done.update({t: max(r.txn for r in todo if r.table == t) for t in skipped})
            for t in skipped:  # a drop or create there must not leave a stale table entry
                self.state.pop(state_key("version.", t), None)
        failed = rnd.run([r for r in todo if r.table not in skipped], collapse=self.collapse,
                         parallelism=self.parallelism, progress=progress)
        if skipped:
            with self._state_lock:
                progressed(dict(rnd.done))
        return failed

    def _fail(self, batch: int | None, txn: int | None, table: str | None, cause: str):
        err = failure.record(self.state, batch, txn, table, cause)
        self._save()
        self.last_error = err
        self._log(f"FAILED {err}")
        raise err

    def accept(self) -> int:
        """Skip exactly the failed transaction (as PostgreSQL's ALTER SUBSCRIPTION ... SKIP).

        Returns the id of the skipped transaction; ``tick()`` then reports it as handled.

        Raises:
            ReplicaStateError: there is no failed transaction to skip, or the failure is not
                tied to one transaction (e.g. a gap in the logs).
        """
        self.stop()
        with self._lock:
            self._acquire()
            try:
                return self._accept()
            finally:
                self._release()

    def _accept(self) -> int:
        self.state = self._load() or {}
        txn, batch = failure.skippable(self.state, self.name)
        manifest = manifest_of(self.source.storage, self.state.get("logs"), self.master, batch)
        rec = next((t for t in manifest.txns if t.txn == txn), None) if manifest else None
        skipped = [x for x in self.state.get("skipped", "").split(",") if x] + [str(txn)]
        failure.clear(self.state)
        self.state.update({"tick": str(txn), "skipped": ",".join(skipped)})
        if rec is not None:
            self.state["clock"] = utc_iso(rec.time)
            key = state_key("version.", rec.table)
            if key in self.state:
                self.state[key] = str(self._applier().current_version(rec.table))
        if manifest is None or (manifest.txns and txn >= manifest.last_txn):
            self.state["batches"] = str((batch if batch is not None else int(self.state.get("batches", 0))) + 1)
        self._save()
        self._log(f"accepted: skipped transaction {txn}")
        return txn

    def restore_table(self, table: str, into, as_: str | None = None, replace: bool = False,
                      dbfarm: str | None = None):
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

    def _release(self) -> None:
        if self._lockfile is not None:
            self._lockfile.release()
            self._lockfile = None

    def __repr__(self) -> str:
        return f"<wlr.Replica {self.name!r} of {self.master!r} tick={self.tick()}>"
