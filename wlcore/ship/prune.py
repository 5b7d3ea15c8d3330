"""Retention of shipped copies and relay folders: pruned by the same rules as the master's
own folder (:func:`wlcore.pruning.prune_folder`), with a retention of their own.

A copy's retention is stored with it, in ``<copy>/wlc.retention``
(:mod:`wlcore.retention`): set by ``wlc ship --retention``, ``wlc prune --copy URL
--retention`` or ``wlr prune --retention`` (a relay), each level not set there taking
``master.retention``'s. What a prune deletes is noted there before it is deleted, and a
shipping pass reads that note after listing what the copy holds, so no pass copies it again,
even one running meanwhile: pruning and shipping need not take turns (a ``wlc ship --follow``
goes on while ``wlc prune`` runs). Prunes of one copy take turns (``<copy>/.wlc-prune.lock``).
A shipping pass also prunes its copy when the last prune there is older than
``storage.ship_prune`` (:func:`prune_if_due`).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from .. import snapshots as snap
from ..batch import SpanCache
from ..errors import LockHeldError
from ..levels import Span
from ..pruning import PruneReport, prune_folder
from ..retention import PRUNE_LOCK, read_retention_state, write_promise, write_retention_state
from ..settings import Every
from ..storage import Storage
from ..utc import utcnow
from .destination import LOGS_DIR, ShipError, dest_root, read_config

log = logging.getLogger("wlc.ship")

_caches: dict[str, SpanCache] = {}  # {log folder: its spans}: manifests never change
_caches_lock = threading.Lock()


def _listed(storage: Storage, logs: str, dbname: str) -> list[Span]:
    """Every published batch of every level in ``logs``, as spans (each manifest read once a process)."""
    with _caches_lock:
        cache = _caches.setdefault(logs, SpanCache(storage))
    return cache.spans(logs, dbname)


def prune_copy(
    to: str,
    dbname: str | None = None,
    keep: dict[str, Every | None] | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    wait: bool = True,
    retention: dict[str, str | None] | None = None,
    dbid: str | None = None,
) -> PruneReport:
    """Delete what the retention of the shipped copy or relay folder ``to`` no longer promises:
    never a batch or snapshot a replica reading there needs to reach a promised point, by the
    rules of the master's own prune (:func:`wlcore.retention.retain`, as Litestream's retention).

    Args:
        to (str): the copy's folder or URL (``s3://bucket/path``; a relay's ``<replica>/wlr_relay``).
        dbname (str | None): the master's name the copy must hold (None: whichever it holds).
        keep (dict[str, Every | None] | None): the retention per ``level0``, ``level1``,
            ``level2``, ``snapshots`` for this call (None for one: forever); None: the copy's own
            (its ``wlc.retention``), each level not set there ``master.retention``'s.
        dry_run (bool): only say what would be deleted (nothing is written).
        now (datetime | None): the instant retention counts back from (UTC); None: now.
        wait (bool): wait while another process prunes the copy (False: raise
            :class:`~wlcore.errors.LockHeldError` at once; a shipping pass then leaves it).
        retention (dict[str, str | None] | None): the copy's own retention to store first
            (``{"level0": "1d"}``; None or ``"master"`` for a level: ``master.retention``'s
            again); a dry run only uses it. None: leave it as it is.
        dbid (str | None): the master's database id the copy must hold (None: not checked).

    Returns:
        PruneReport: what was (or would be) deleted, and what the copy still promises.

    Raises:
        ShipError: ``to`` holds no shipped copy, or the copy of another database than ``dbname``
            (or ``dbid``).
        ConfigError: the copy's ``wlc.retention`` or ``retention`` is malformed (nothing is done).
        BatchError: a manifest there is missing or damaged.
        LockHeldError: ``wait`` is False and another process prunes the copy.
        OSError: the copy cannot be reached.
    """
    from ..settings import settings

    to = dest_root(to)
    dst = Storage.of(to)
    cfg = read_config(dst, to)
    if cfg is None or not cfg.is_shipped:
        what = "a master's own folder (wlc prune prunes it)" if cfg is not None else "no shipped copy (no wlc.config)"
        raise ShipError(f"{to} holds {what}; name a folder or URL that wlc ship ships to, or a relay's wlr_relay")
    if (dbname is not None and cfg.database != dbname) or (dbid is not None and cfg.dbid != dbid):
        raise ShipError(
            f"{to} holds the shipped logs of database {cfg.database!r} (id {cfg.dbid}), not of "
            f"{dbname or cfg.database!r} (id {dbid or cfg.dbid}); check the URL"
        )
    now = now or utcnow()
    with dst.lock(Storage.join(to, PRUNE_LOCK), blocking=wait, what=f"pruning {to}"):
        state = read_retention_state(dst, to)
        if retention:
            state.set_keep(retention)
            if not dry_run:
                write_retention_state(dst, to, state)
        keep = keep if keep is not None else state.keep(settings().master.retention.by_name())
        logs = Storage.join(to, LOGS_DIR)
        starts = snap.list_snapshots(dst, to, cfg.snapshot, logs, cfg.database)

        def note(report: PruneReport) -> None:  # before deleting: a shipping pass skips them from now on
            write_promise(dst, to, report, now, ranges=True)

        report = prune_folder(dst, starts, _listed(dst, logs, cfg.database), now, keep, dry_run, note)
    if report.deleted and not dry_run:
        log.info("pruned %d folders of the copy %s (%.1f MB)", len(report.deleted), to, report.bytes_freed / 1e6)
    return report


def prune_if_due(to: str, dbname: str, now: datetime | None = None) -> PruneReport | None:
    """Prune the copy ``to`` when its last prune is older than ``storage.ship_prune`` (a
    shipping pass calls it at its end), unless another process prunes it now. A failure is
    logged, never raised: the copy was shipped, and the next pass tries again.

    Args:
        to (str): the copy's folder or URL.
        dbname (str): the master's name.
        now (datetime | None): the current instant (UTC); None: now.

    Returns:
        PruneReport | None: the prune's report; None when none was due (or ``storage.ship_prune``
        is off), another process prunes the copy, or it failed.
    """
    from ..settings import settings

    every = settings().storage.ship_prune
    if every is None:
        return None
    now = now or utcnow()
    try:
        last = read_retention_state(Storage.of(to), to).pruned
        if last is not None and (now - last).total_seconds() < every.amount:
            return None
        return prune_copy(to, dbname, now=now, wait=False)
    except LockHeldError:  # another process prunes it now
        return None
    except Exception as exc:  # noqa: BLE001 (the pass shipped; pruning is tried again at the next one)
        log.warning(
            "pruning the copy %s failed (%s: %s); the next shipping pass tries again", to, type(exc).__name__, exc
        )
        return None
