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

from .catalog import PinnedView, TickRecord
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
from .replay import ReplicateOptions
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
    "pin",
    "PinnedView",
    "catalog_tick",
    "TickRecord",
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


def __dir__() -> list[str]:
    """The public API (``__all__``), not the package's submodules (PEP 562)."""
    return sorted(__all__)


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
    """Make or continue replica ``replica`` of ``master`` and apply its logs up to ``until``
    (MonetDB's ``wlr.replicate``). What each argument does: the docs' reference page "Replicating".

    Args:
        master (str | wlc.Master | None): the master database; may be left out when ``source``
            or ``logs`` names it.
        until (int | str | datetime | None): None: everything published (then follow); int:
            every transaction id <= it (-1: none); datetime or ISO-8601 string: every
            transaction committed at or before that UTC instant (naive: UTC; a date alone: its
            start, said by a :class:`TargetWarning`). Inclusive (:mod:`wlcore.target`).
        replica (str | None): the replica database (None: ``<master>_replica``).
        dbfarm (str | None): the folder holding master and replica (None: ``$WLC_DBFARM`` or config).
        follow (bool | None): with ``until=None``, keep following in the background until
            :func:`stop` (None: ``replica.follow``).
        timeout (float | None): seconds to wait for ``until`` to be published (None: ``replica.timeout``).
        collapse (bool | None): True: each table's run of DML lands as one commit a segment;
            False: one commit a master transaction (None: ``replica.collapse``).
        snapshot (int | None): the transaction of the master's snapshot a new replica starts
            from (None: the newest at or before ``until``).
        compacted (bool): replay through compacted level-1/2 batches where they fit (False: level 0 only).
        logs (str | None): read a shipped copy of the logs at this folder or URL (recorded).
        source (str | wlc.Master | Replica | None): read from this master or relaying replica (recorded).
        relay (bool | None): True/False: ship what is applied to ``<replica>/wlr_relay``, or stop
            (None: as recorded).
        tables (str | list[str] | None): a new replica's tables, names or patterns on
            ``schema.table`` (None: ``replica.tables``, all).
        where (dict[str, str] | None): ``{"schema.table": Spark SQL predicate}``: a new replica's rows.
        empty (bool): make a new replica whose ``until`` is before the master's first transaction.
        metrics_port (int | str | None): serve Prometheus metrics at ``http://127.0.0.1:<port>/metrics``
            (0: any free port; ``"off"``: none; None: ``metrics.port``).

    Returns:
        Replica: the replica, once the target is reached (following: once all published is applied).

    Raises:
        TargetError: ``until`` is malformed, already passed, older than the master's retention
            keeps, an instant later than ``timeout`` can wait for, or (a new replica without
            ``empty``) before the master's first transaction.
        ReplicationError: a transaction or a batch of the logs could not be applied or read.
        ReplicationTimeout: ``until`` was not published within ``timeout`` seconds, or cannot be
            (capture's heartbeat is stale, or the master stopped logging before it).
        ReplicaStateError: the master is not a master; the replica folder is a master, another
            master's replica, not empty, or busy; the replica is behind the master's retention;
            ``tables``/``where`` differ from the recorded selection; ``source`` is neither a
            master nor a relay, or ``logs`` holds no shipped copy.
        DivergedError: the source's epoch history is not the one this replica followed.
        ConfigError: a malformed name, ``timeout``, ``tables`` pattern or ``where`` predicate;
            both ``logs`` and ``source``; the dbfarm or replica folder is a file; S3 without s3a.
        MetricsError: ``metrics_port`` is malformed or taken.
    """
    global _current
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
    rep = Replica(master, replica=replica, dbfarm=dbfarm, logs=logs, source=source)
    if _current is not None and (_current.path, _current.master_path) == (rep.path, rep.master_path):
        if (logs is not None or source is not None) and rep.source.root != _current.source.root:
            rep.check(options)
            _current.stop()
            _current.source = rep.source
        rep = _current
    else:
        rep.check(options)  # refused here: the current follower goes on, nothing is written
        if _current is not None:
            _current.stop()
    _current = rep
    return rep.run(options)


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


def catalog_tick(replica: str, spark=None) -> TickRecord:
    """A replica's last consistent tick as the Spark catalog's tick record says it (view
    ``<replica>.tick``, kept by the process that replays the replica), for a reader in any Spark
    application sharing that catalog (a Hive metastore: ``spark.metastore``): the tick, each
    table's Delta version and folder, and the seqlock check of reads by name
    (:class:`wlr.catalog.TickRecord`). Reads the catalog only; nothing is written.

    Args:
        replica (str): the replica's name.
        spark (SparkSession | None): the session whose catalog is read (None: the active one,
            started from config when none runs).

    Returns:
        TickRecord: ``.tick``, ``.settled``, ``.versions``, ``.table(t)``, ``.sql(t)``, ``.still_current()``.
        The session's ``spark.sql`` then raises :class:`ReadOnlyError` for a write through a
        replica's name, as in the replaying process.

    Raises:
        ReplicaStateError: the catalog has no tick record of that replica.
    """
    from wlcore.session import active_session

    from .catalog import guard_writes

    session = spark or active_session()
    record = TickRecord(session, replica)
    guard_writes(session)
    return record


def pin(replica: str | Replica, dbfarm: str | None = None) -> PinnedView:
    """A replica's last consistent tick, pinned for readers without Spark: each table's Delta
    version and folder, read once from its ``wlr.config``, so that polars or delta-rs read every
    table at one tick, also while another process replays it (:class:`wlr.catalog.PinnedView`).
    Nothing is locked or written; no Spark is started.

    Args:
        replica (str | Replica): the replica's name in ``dbfarm``, or a :class:`Replica` (then
            ``dbfarm`` is not used).
        dbfarm (str | None): the folder holding the replica (default ``$WLC_DBFARM`` or config).

    Returns:
        PinnedView: ``.tick``, ``.versions``, ``.path(t)``, ``.delta_table(t)``, ``.polars(t)``.

    Raises:
        NotFoundError: no such dbfarm, or ``replica`` is not a replica there (a master, a plain
            database or nothing: the message says which, and names the replicas there).
        ReplicaStateError: the replica is being restored, records no consistent view yet, or is
            in an object store.
        ConfigError: a malformed name, or a malformed ``wlr.config``.
    """
    if isinstance(replica, Replica):
        return replica.pin()
    from wlcore.names import check_part
    from wlcore.settings import dbfarm as resolve_dbfarm
    from wlcore.storage import Storage

    from .monitor import read_replica_state

    farm = resolve_dbfarm(dbfarm)
    storage = Storage.of(farm)
    if not storage.isdir(farm):
        raise NotFoundError(f"no dbfarm at {farm}; check dbfarm= (or $WLC_DBFARM, or dbfarm in config)")
    path = Storage.join(farm, check_part(replica, "replica"))
    try:
        state = read_replica_state(storage, path)
    except ReplicaStateError as exc:  # a master or a plain database: "not found", as register() says it
        raise NotFoundError(str(exc), cli=exc.cli) from None
    return PinnedView(storage, path, replica, state)
