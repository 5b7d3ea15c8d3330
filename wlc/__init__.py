"""wlc: workload capture. Puts a database of Delta tables in master mode and logs its
committed changes into batches that ``wlr`` replays (MonetDB's Lazy Logical Replication).

Module functions act on the master started last in this process (as MonetDB's SQL
procedures act on the current database); programs that drive several masters use
:class:`wlc.Master` objects directly.
"""

from __future__ import annotations

import warnings
from datetime import datetime
from typing import TYPE_CHECKING

from wlcore import __version__
from wlcore.errors import (
    BatchError,
    ConfigError,
    MasterStateError,
    NotFoundError,
    NotReplicatedWarning,
    NotWritableError,
    StalePathError,
    WlcError,
)
from wlcore.health import status
from wlcore.session import spark_session
from wlcore.ship import ShipError

from .master import Master
from .master_record import ChangeFeedWarning

if TYPE_CHECKING:
    from wlcore.ship import Shipper, ShipReport

__all__ = [
    "__version__",
    "spark_session",
    "master",
    "attach",
    "beat",
    "stop",
    "flush",
    "clock",
    "tick",
    "last_logged",
    "current",
    "snapshot",
    "snapshots",
    "compact",
    "prune",
    "prune_copy",
    "ship",
    "status",
    "Master",
    "WlcError",
    "ConfigError",
    "MasterStateError",
    "NotFoundError",
    "BatchError",
    "NotWritableError",
    "StalePathError",
    "NotReplicatedWarning",
    "ChangeFeedWarning",
    "ShipError",
]

_current: Master | None = None


def __dir__() -> list[str]:
    """The public API (``__all__``), not the package's submodules (PEP 562)."""
    return sorted(__all__)


def master(
    dbname: str, dbfarm: str | None = None, logs: str | None = None, metrics_port: int | str | None = None
) -> Master:
    """Put ``<dbfarm>/<dbname>`` in master mode and start capturing its committed changes.

    Args:
        dbname: database name (a plain identifier; the folder ``<dbfarm>/<dbname>``).
        dbfarm: folder holding the databases; default ``$WLC_DBFARM`` or ``dbfarm`` in config.
        logs: folder for the published batches; default ``<dbfarm>/<dbname>/wlc_logs``
            (MonetDB's optional log path). Recorded in ``wlc.config``.
        metrics_port: serve Prometheus metrics of capture at ``http://127.0.0.1:<port>/metrics``
            (:mod:`wlc.metrics`; 0: any free port, then ``Master.metrics_port`` holds it); default
            the ``metrics.port`` setting (off).

    Returns:
        wlc.Master: the master, also the target of the module functions below.

    A database already holding tables gets a snapshot first (each table copied at its
    current Delta version). Calling it on a database already in master mode warns and
    changes nothing but resumes capture in this process, continuing where capture stopped.

    A refused call changes nothing: no file is written and the master this process was
    capturing goes on capturing. Once the new master has started, module functions act on
    it and the previous one's capture in this process stops.

    Raises:
        ConfigError: a name, ``logs`` (empty, a file) or the beat in config is malformed;
            MetricsError (a ConfigError): the metrics port is malformed or taken.
        MasterStateError: the database stopped logging (``wlc.stop()``); as in MonetDB a
            stopped master needs a fresh snapshot. Also when the database is a replica, or
            another process is capturing it.
    """
    global _current
    m = Master(dbname, dbfarm=dbfarm, logs=logs, metrics_port=metrics_port)
    if _current is not None and _current.path == m.path and _current.running:
        m.validate()  # e.g. another logs= than the running master's: refused, nothing changes
        warnings.warn(f"database {dbname!r} is already in master mode in this process; nothing changed", stacklevel=2)
        return _current
    m.start()
    if _current is not None:
        _current.close()  # module functions drive one master at a time; the previous one's capture stops
    _current = m
    return m


def attach(dbname: str, dbfarm: str | None = None) -> Master:
    """Use master ``<dbfarm>/<dbname>``'s tables by name in this process without capturing here.

    For writer applications while another process captures (``wlc capture`` or
    :func:`master` there): the master's schemas and tables are registered in this
    process's Spark session catalog at their folders, so ``CREATE TABLE sales.orders``,
    ``spark.table("sales.orders")`` and ``DROP TABLE`` act on the master's folders.

    Args:
        dbname: database name (a plain identifier).
        dbfarm: folder holding the databases; default ``$WLC_DBFARM`` or ``dbfarm`` in config.

    Returns:
        wlc.Master: the master, not capturing (module functions such as :func:`flush`
        keep acting on the master this process captures, if any).

    Raises:
        ConfigError: a malformed name or dbfarm.
        MasterStateError: the database is not a master, or it stopped logging.
    """
    return Master(dbname, dbfarm=dbfarm, capture=False).attach()


def current() -> Master:
    """The master started last in this process (the one the module functions act on).

    Returns:
        wlc.Master: the master.

    Raises:
        MasterStateError: no master was started in this process.
    """
    if _current is None:
        raise MasterStateError("no master in this process: call wlc.master(dbname) first")
    return _current


def beat(seconds: float) -> None:
    """Publish each batch ``seconds`` after its first record (MonetDB's ``wlc.beat``), saved in ``wlc.config``.

    Args:
        seconds: the heartbeat in seconds (0: one batch per transaction).

    Raises:
        ConfigError: a negative or non-numeric value (nothing changes).
        MasterStateError: no master runs in this process, or it stopped.
    """
    current().beat(seconds)


def flush() -> int:
    """Capture every commit made before the call and publish the open batch now (:meth:`wlc.Master.flush`).

    Returns:
        The id of the last transaction published (-1: none yet).

    Raises:
        MasterStateError: no master runs in this process, or it stopped.
        BatchError: the batch could not be published; its transactions stay staged.
    """
    return current().flush()


def stop() -> None:
    """Flush and stop logging for good (``state=2`` in wlc.config); as MonetDB's ``wlc.stop()``.

    Raises:
        MasterStateError: no master runs in this process.
    """
    current().stop()


def clock() -> datetime | None:
    """Commit time (UTC) of the last published transaction, :func:`tick`'s (MonetDB's ``wlc.clock()``).

    Returns:
        The instant (UTC); None when none was published.

    Raises:
        MasterStateError: no master was started in this process.
    """
    return current().clock()


def tick() -> int:
    """Id of the last published transaction, as wlc.config's ``tick`` (MonetDB's ``wlc.tick()``); the
    last logged one (maybe in a batch still open) is :func:`last_logged`.

    Returns:
        The transaction id; -1 when none was published.

    Raises:
        MasterStateError: no master was started in this process.
    """
    return current().tick()


def last_logged() -> int:
    """Id of the last logged transaction (captured into a batch, published or still open); -1 when
    none was logged. It may run ahead of :func:`tick`, the last published one."""
    return current().last_logged()


def snapshot():
    """Flush, then take a snapshot of the current master at its last published transaction
    T while capture goes on (``wlc_snapshot/<T>/``); see :meth:`wlc.Master.snapshot`.

    Returns:
        A :class:`wlcore.levels.Start` (``txn``, ``time`` UTC, ``batch``, ``path``).

    Raises:
        MasterStateError: no master runs in this process, it stopped, or a table is no longer
            readable at its version.
    """
    return current().snapshot()


def snapshots() -> list:
    """The current master's snapshots, oldest first (:meth:`wlc.Master.snapshots`).

    Returns:
        A :class:`wlcore.levels.Start` for each (``txn``, ``time`` UTC, ``batch``, ``path``).

    Raises:
        MasterStateError: no master was started in this process.
    """
    return current().snapshots()


def compact(level1: float | str | None = None, level2: float | str | None = None) -> list:
    """Merge the current master's published batches into level-1/2 batches as far as due
    (``master.compact`` in config, or the intervals given); see :meth:`wlc.Master.compact`.

    Args:
        level1 (float | str | None): the level-1 interval instead of ``master.compact.level1``:
            seconds, a duration (``"1h"``: the batches of each UTC-aligned hour, once it is
            over) or ``"<n> batches"``; None: config's.
        level2 (float | str | None): the level-2 interval, of the same kinds; None: config's.

    Returns:
        list: the batches made (:class:`wlcore.levels.Span`: ``level``, ``first_txn``,
        ``last_txn``, ``path``), in order.

    Raises:
        MasterStateError: no master was started in this process.
        ConfigError: a malformed interval.
        BatchError: an input batch is damaged.
    """
    return current().compact(level1=level1, level2=level2)


def prune(dry_run: bool = False, now: datetime | None = None, keep: dict | None = None):
    """Delete what ``master.retention`` (or ``keep``) no longer promises; see :meth:`wlc.Master.prune`.
    This prunes the master's own folder; :func:`prune_copy` prunes a shipped copy (``wlc prune``
    on the command line does both).

    Args:
        dry_run (bool): only report what would be deleted.
        now (datetime | None): the instant (UTC) retention counts back from; None: now.
        keep (dict | None): ``{"level0": "1d", "level1": "30d", "level2": "365d",
            "snapshots": "365d"}`` instead of ``master.retention`` (durations as in config;
            left out or ``"off"``: forever).

    Returns:
        PruneReport: ``deleted``, ``bytes_freed`` and ``lines()``, which say what was deleted
        and which recovery points remain.

    Raises:
        MasterStateError: no master was started in this process.
        ConfigError: a malformed retention.
    """
    return current().prune(dry_run=dry_run, now=now, keep=keep)


def prune_copy(
    to: str,
    dry_run: bool = False,
    now: datetime | None = None,
    keep: dict | None = None,
    retention: dict | None = None,
):
    """Delete what the shipped copy at ``to`` no longer promises by its own retention (stored with
    it; each level not set there: ``master.retention``'s), by the rules of :func:`prune`: never a
    batch or snapshot a replica reading the copy needs to reach a promised point. What was deleted
    is not shipped there again. No master needs to be started in this process.

    Args:
        to (str): the copy's folder or URL (``s3://bucket/path``), as :func:`ship` was given it.
        dry_run (bool): only report what would be deleted (nothing is written).
        now (datetime | None): the instant (UTC) retention counts back from; None: now.
        keep (dict | None): ``{"level0": "1d", ...}`` for this call only, instead of the copy's
            retention (durations as in config; left out or ``"off"``: forever).
        retention (dict | None): the copy's own retention to store first, e.g. ``{"level0": "1d",
            "snapshots": "30d"}`` (``"off"``: forever; None or ``"master"``: as
            ``master.retention``); a dry run only uses it.

    Returns:
        PruneReport: ``deleted``, ``bytes_freed``, ``promise`` and ``lines()``, which say what was
        deleted and what the copy still promises.

    Raises:
        ShipError: ``to`` holds no shipped copy.
        ConfigError: a malformed ``keep`` or ``retention`` (nothing is deleted).
    """
    from wlcore.retention import keep_of
    from wlcore.ship import prune_copy as prune_it

    keep = keep_of(keep)  # checked before anything is deleted
    return prune_it(to, keep=keep, dry_run=dry_run, now=now, retention=retention)


def ship(to: str, follow: bool = False) -> ShipReport | Shipper:
    """Copy the current master's published batches and snapshots to ``to``: another folder
    or mount, or ``s3://bucket/path`` (MonetDB's log-shipping agent; see :meth:`Master.ship`).

    Args:
        to: destination folder or URL; replicas read it with ``wlr.replicate(master, logs=to)``.
        follow: False: one pass after a flush; True: keep shipping in the background until
            ``wlc.stop()`` or the master is closed.

    Returns:
        the pass's ShipReport (``batches``, ``snapshots``, ``bytes``, ``seconds``), or,
        following, the Shipper (``report`` adds up, ``stop()``), both of :mod:`wlcore.ship`.

    Raises:
        MasterStateError: no master was started in this process.
        ShipError: the destination holds another database's copy, or a batch did
            not verify there.
    """
    return current().ship(to, follow=follow)
