"""wlr: workload replay. Makes and keeps replicas of a ``wlc`` master (MonetDB's Lazy
Logical Replication): copy the master's snapshot, apply its published batches in order,
up to a transaction id or an instant, and stop at the first failure until it is fixed
or skipped with :func:`accept`.

Module functions act on the replica used last in this process; programs that drive
several replicas use :class:`wlr.Replica` objects directly.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from wlcore import __version__
from wlcore.errors import NotFoundError

from .errors import (
    DivergedError,
    NoStartError,
    NoSuchTableError,
    PromotionError,
    ReadOnlyError,
    ReplicaStateError,
    ReplicationError,
    ReplicationTimeout,
    RestoreError,
    TableExistsError,
    TargetError,
    TargetWarning,
)
from .monitor import lag_history
from .planner import parse_until
from .promote import Promotion, promote as promote_replica
from .relay import prune
from .replay import ReplicateCall
from .replica import Replica
from .txlog import transactions

if TYPE_CHECKING:
    from .source import MasterLike

__all__ = [
    "__version__",
    "replicate",
    "transactions",
    "lag_history",
    "stop",
    "accept",
    "beat",
    "clock",
    "tick",
    "status",
    "prune",
    "current",
    "register",
    "promote",
    "Promotion",
    "PromotionError",
    "Replica",
    "ReplicationError",
    "ReplicaStateError",
    "ReadOnlyError",
    "ReplicationTimeout",
    "TargetError",
    "NoStartError",
    "DivergedError",
    "NotFoundError",
    "NoSuchTableError",
    "TableExistsError",
    "RestoreError",
    "TargetWarning",
    "parse_until",
]

_current: Replica | None = None


def replicate(
    master: str | MasterLike | None = None,
    until: int | str | datetime | None = None,
    replica: str | None = None,
    dbfarm: str | None = None,
    *,
    follow: bool | None = None,
    timeout: float | None = None,
    collapse: bool | None = None,
    snapshot: int | None = None,
    compacted: bool = True,
    logs: str | None = None,
    source: str | MasterLike | Replica | None = None,
    relay: bool | None = None,
    tables: str | list[str] | None = None,
    where: dict[str, str] | None = None,
    empty: bool = False,
    metrics_port: int | str | None = None,
) -> Replica:
    """Make or continue replica ``replica`` of ``master`` and apply its logs up to ``until``.

    Args:
        master: master database name (or the ``wlc.Master``); may be left out when
            ``source`` or ``logs`` names it.
        until: None: everything published, then (by default) keep following in the
            background until :func:`stop`. int N: every transaction with id <= N (inclusive,
            as MonetDB's ``wlr.replicate(N)``). datetime or ISO-8601 string: every
            transaction committed at or before that UTC instant, across all tables
            (inclusive, as PostgreSQL's ``recovery_target_time`` with
            ``recovery_target_inclusive``); naive datetimes are taken as UTC, and a date
            alone (``"2026-11-24"``) as the start of that day, UTC, which a
            :class:`TargetWarning` says. -1: before the first transaction (a new replica
            then needs ``empty=True``). A target the master has not published yet is said
            at once (a warning on the ``wlr.replica`` logger: the master's tick, watermark,
            last commit and whether capture is alive), and the wait shows a progress bar on
            a terminal or in a notebook, a line every 30 s elsewhere.
        replica: replica database name; default ``<master>_replica``.
        dbfarm: folder holding master and replica; default ``$WLC_DBFARM`` or config.
        follow: override ``replica.follow`` from config for ``until=None``.
        timeout: seconds to wait for ``until`` to be published (default ``replica.timeout``);
            an instant later than now + timeout (less ``capture.settle``, the delay before
            capture publishes a commit) is refused at once.
        collapse: True (default ``replica.collapse``): replay by segments, each table's run
            of DML transactions collapsed to its net change and landed as one Delta commit,
            tables in parallel (``replica.parallelism``); False: one replica commit per
            master transaction (for jobs that read every intermediate state).
        snapshot: the transaction of the master's snapshot a new replica starts from
            (``wlr log --snapshots``); default the newest snapshot at or before ``until``.
        compacted: True: replay through the master's compacted level-1/2 batches where they
            fit (the coarsest that end at or before ``until``, then finer, then level 0 up
            to the exact target, as Litestream restores); False: level 0 only.
        logs: read a shipped copy of the master's logs and snapshots at this folder or URL
            (``s3://bucket/path``, made by :func:`wlc.ship`), e.g. a replica far from the
            master. Recorded: later calls read there until told otherwise.
        source: read from this master or relaying replica (a name, a ``wlc.Master`` or a
            ``wlr.Replica``; a relay ships what it has applied with the master's original
            GTIDs). Switching between the master, shipped copies and relays of one master
            continues from the same transaction without a new copy.
        relay: True: this replica ships what it has applied to ``<replica>/wlr_relay`` after
            every round, as a source for further replicas (``source=<this replica>``); False:
            it stops; None: as before.
        tables: a new replica carries only these tables (``["sales.*", "hr.employees"]``:
            names or patterns on ``schema.table``); default ``replica.tables`` (all).
        where: ``{"sales.orders": "o_region = 'EU'"}``: of these tables only the rows
            matching the Spark SQL predicate after each change (rows moved in by an update
            are inserted, rows moved out deleted). ``tables`` and ``where`` are recorded in
            wlr.config; another selection needs a new replica.
        empty: make a new replica even when ``until`` is before the master's first
            transaction (it then holds none of the master's transactions: no table, or the
            tables the master had when master mode began); refused without it.
        metrics_port: serve Prometheus metrics of the replica (:mod:`wlr.monitor`) at
            ``http://127.0.0.1:<port>/metrics`` while this process runs (0: any free port, then
            ``Replica.metrics_port`` holds it); default the ``metrics.port`` setting (off).

    Returns:
        wlr.Replica: when the target is reached (following: when all published is applied).

    A new replica starts from the newest snapshot at or before ``until`` (or empty), then
    replays only the logs after it; a replica that exists is never reset by a newer snapshot.
    A later call continues from
    where the replica stands, and retries a failure stored by an earlier call (its cause may
    have been fixed), as PostgreSQL's apply worker does.

    A refused call changes nothing: no file is written and the replica this process was
    following goes on following. Once the call is accepted, module functions act on the
    new replica and the previous one stops following.

    Raises:
        TargetError: ``until`` is malformed (``Timestamp 'halo' has incorrect format``), is
            a point the replica has already passed (replay cannot go back), is older than
            the earliest point the master's retention keeps (the message names it), is an
            instant later than ``timeout`` can wait for, or, for a new replica without
            ``empty``, is before the master's first transaction (the message names it and
            its commit time).
        ReplicationError: a transaction could not be applied (names batch, txn, table and
            cause), or a batch of the logs is missing or damaged (names the batch).
        ReplicationTimeout: ``until`` was not published within ``timeout`` seconds (the
            message states what the master published and capture's liveness), or cannot be:
            capture's heartbeat is stale or the master stopped logging before it (at once,
            nothing written).
        ReplicaStateError: the master is not a master; the replica folder is a master,
            belongs to another master, is not empty, or is busy; the replica is further
            behind than the master's retention keeps (the message names the earliest point).
        ConfigError: the dbfarm or the replica folder is a file; a name is malformed; both
            ``logs`` and ``source``; a ``tables`` pattern or ``where`` predicate is malformed
            or does not fit its table; S3 without Spark's s3a (``spark.s3a``).
        DivergedError (a ReplicaStateError): the source's epoch history is not the one this
            replica followed (the master was restored from a copy); nothing was applied.
        ReplicaStateError also: ``tables``/``where`` differ from the replica's recorded
            selection (make a new replica); ``source`` is neither a master nor a relaying
            replica, or ``logs`` holds no shipped copy.
    """
    global _current
    rep = Replica(master, replica=replica, dbfarm=dbfarm, logs=logs, source=source)
    rep.ask_selection(tables, where)
    call = ReplicateCall.of(  # until parsed once; as given, it names the target in messages
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
    if _current is not None and (_current.path, _current.master_path) == (rep.path, rep.master_path):
        if (logs is not None or source is not None) and rep.source.root != _current.source.root:
            rep.check(call)
            _current.stop()
            _current.source = rep.source
        rep = _current
    else:
        rep.start_snapshot, rep.compacted = snapshot, bool(compacted)
        # refused here: the current follower goes on, nothing is written
        rep.check(call)
        if _current is not None:
            _current.stop()
    _current = rep
    return rep.run(call)


def promote(replica: str, dbfarm: str | None = None, *, force: bool = False) -> Promotion:
    """Make replica ``replica`` the master of its database: failover, as PostgreSQL's ``pg_promote``.

    The database keeps its name, database id, transaction ids and GTIDs; its history goes on
    from the replica's tick + 1 under a new epoch; the old master's folder is fenced (where it
    is reached) so that its capture may not publish again. Then start capture on the promoted
    folder (``wlc.master(replica)`` or ``wlc capture <dbfarm> <replica>``) and switch the other
    replicas to it with ``wlr.replicate(source=replica, replica=other)``: those whose history is
    a prefix of the new one go on from their tick; one that applied transactions the promoted
    replica never got raises :class:`DivergedError`. A replica this process follows is stopped
    first. See the how-to "Fail over to a replica".

    Args:
        replica (str): the replica's name in the dbfarm.
        dbfarm (str | None): the dbfarm folder (None: ``$WLC_DBFARM`` or config).
        force (bool): promote even when the replica is not caught up with everything its source
            and its master published, or its replay failed; :attr:`Promotion.left_out` then names
            the published transactions the new history leaves out.

    Returns:
        Promotion: the database, the transaction it stands at (``tick``), the new ``epoch``, the
        transactions left out, the old master's folder when fenced, the batches copied.

    Raises:
        PromotionError: (nothing changed) the replica is not caught up (``left_out`` names the
            transactions), its replay failed, it is selective or still being made; without ``force``.
        ReplicaStateError: the database is not a replica; another process replays into it.
        NotFoundError: no such dbfarm or database.
        ConfigError: a malformed name.
    """
    global _current
    if _current is not None and _current.name == replica:
        _current.close()  # its follower holds the replica's lock
        _current = None
    return promote_replica(replica, dbfarm, force=force)


def current() -> Replica:
    """The replica used last in this process (the one the module functions act on).

    Returns:
        wlr.Replica: the replica.

    Raises:
        ReplicaStateError: no replica was used in this process.
    """
    if _current is None:
        raise ReplicaStateError("no replica in this process: call wlr.replicate(master) first")
    return _current


def stop() -> None:
    """Stop following (MonetDB's ``wlr.stop()``); the replica keeps what it applied. Nothing
    happens when no replica was used in this process.
    """
    if _current is not None:
        _current.stop()


def accept() -> int:
    """Skip exactly the transaction replay failed at (MonetDB's ``wlr.accept()``, PostgreSQL's
    ``ALTER SUBSCRIPTION ... SKIP``); ``tick()`` then reports it as handled.

    Returns:
        The id of the skipped transaction.

    Raises:
        ReplicaStateError: no replica was used in this process; there is no failed transaction
            to skip, or the failure is not tied to one transaction (a gap in the logs).
    """
    return current().accept()


def beat() -> int:
    """Refresh rate of follow mode (MonetDB's ``wlr.beat()``, ``replica.beat`` in config).

    Returns:
        Seconds, rounded to a whole number.

    Raises:
        ReplicaStateError: no replica was used in this process.
    """
    return current().beat()


def clock() -> datetime | None:
    """Master commit time (UTC) of the last transaction applied (MonetDB's ``wlr.clock()``).

    Returns:
        The instant (UTC); None when none was applied.

    Raises:
        ReplicaStateError: no replica was used in this process.
    """
    return current().clock()


def tick() -> int:
    """Id of the last transaction applied, or skipped by :func:`accept` (MonetDB's ``wlr.tick()``).

    Returns:
        The transaction id; -1 when none.

    Raises:
        ReplicaStateError: no replica was used in this process.
    """
    return current().tick()


def status() -> dict:
    """The current replica's state: master, tick, clock, lag (transactions, seconds), error
    (:meth:`wlr.Replica.status` lists the keys).

    Returns:
        The state as a dict.

    Raises:
        ReplicaStateError: no replica was used in this process.
    """
    return current().status()


def register(replica: str | Replica | None = None, dbfarm: str | None = None, spark=None) -> dict[str, str]:
    """Make a replica's tables readable by name in this process's Spark SQL, at its last consistent tick.

    Replica table ``schema.table`` becomes the view ``<replica>__<schema>.<table>`` of the Spark
    session catalog (``SELECT * FROM shop_replica__sales.orders``), reading the Delta version the
    table had at the replica's last consistent tick; writes through it are refused
    (:mod:`wlr.catalog`). The process that replays the replica registers and moves them by
    itself (``replica.names`` in config); a process that only reads calls this, and again to
    move them to the replica's newer tick.

    Args:
        replica (str | Replica | None): the replica's name in ``dbfarm``, or a :class:`Replica`;
            None: the replica used last in this process.
        dbfarm (str | None): the folder holding the replica (default ``$WLC_DBFARM`` or config).
        spark (SparkSession | None): the session whose catalog gets the names (None: the
            active one, started from config when none runs).

    Returns:
        dict[str, str]: ``{"schema.table": "<replica>__<schema>.<table>"}`` of the tables registered.
        A table whose name Spark's catalog does not take (``q1-orders``) is left out with a
        warning saying why; read it with :meth:`Replica.table`.

    Raises:
        NotFoundError: no such dbfarm, or ``replica`` is not a replica there (the message names those that are).
        ReplicaStateError: ``replica`` is None and no replica was used in this process.
        ConfigError: a malformed name.
    """
    from wlcore.settings import dbfarm as resolve_dbfarm

    if replica is None:
        rep = current()
    elif isinstance(replica, Replica):
        rep = replica
    elif _current is not None and (_current.name, _current.dbfarm) == (replica, resolve_dbfarm(dbfarm)):
        rep = _current  # the replica this process follows: its views, moved by its rounds
    else:
        import argparse

        from .cli import open_replica

        rep = open_replica(argparse.Namespace(dbfarm=dbfarm, replica=replica))
    return rep.catalog.register(spark)
