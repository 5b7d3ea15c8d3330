"""One shipping pass (:func:`ship`): what the source publishes and the destination lacks is
copied, then the copy's ``wlc.config`` is written last (see :mod:`wlcore.ship`)."""

from __future__ import annotations

import logging
import posixpath
import time
from typing import Any, Callable

from .. import batch as batchfmt, snapshots as snap
from ..master_state import CONFIG_FILE, MasterState, logs_of, write_master_state
from ..retention import PRUNE_LOCK, RetentionState, read_retention_state, write_retention_state
from ..storage import Storage
from ..utc import utcnow
from .destination import LOGS_DIR, ShipError, ShipReport, check_dest, dest_root, lock_dest, read_config
from .folders import ship_batch, ship_snapshot, snapshot_name
from .prune import prune_if_due

log = logging.getLogger("wlc.ship")


def ship(
    storage: Storage,
    root: str,
    dbname: str,
    to: str,
    up_to_batch: int | None = None,
    up_to_txn: int | None = None,
    edit_config: Callable[[MasterState], MasterState] | None = None,
    progress: bool = True,
    retention: dict[str, str | None] | None = None,
) -> ShipReport:
    """One shipping pass from the source folder ``root`` (a master's folder, or a shipped
    copy or relay holding a ``wlc.config``) to ``to``.

    Args:
        storage: the source's filesystem.
        root: the source folder (its ``wlc.config`` says where its logs are).
        dbname: the master's database name (batch folders are ``<dbname>_<number>``).
        to: destination folder or URL (``s3://bucket/path``, ``/mnt/far/m``).
        up_to_batch: ship only level-0 batches below this number (and compacted batches
            ending below it); None: every published batch.
        up_to_txn: ship only snapshots at or before this transaction; None: all.
        edit_config: called with the wlc.config copy before it is written (relays set the
            tick and watermark they stand at).
        progress: a bar for long passes, on a terminal or in a notebook.
        retention: the copy's own retention to store with it first (``{"level0": "1d"}``; None
            or ``"master"`` for a level: ``master.retention``'s again); None: leave it as it is.

    Returns:
        ShipReport: the folders published at the destination by this pass.

    The copy's wlc.config is written last, and not at all when batches vanished from
    the source (pruned) while copied and no compacted batch holding them was found: the
    copy then claims only what it held before.

    Raises:
        ShipError: ``root`` is not a master or shipped copy; the destination holds the copy
            of another database (another name or database id) or another history of it (a
            master restored from a copy: its tick went back, or its epochs differ).
        ConfigError: a malformed ``retention`` (nothing is shipped).
        ShipVerifyError: a copied batch or snapshot does not verify at the destination
            (nothing of it is published; ship again).
        OSError: the source or destination cannot be reached (the next pass resumes).
    """
    started = time.monotonic()
    mcfg = read_config(storage, root)
    if mcfg is None:
        raise ShipError(
            f"{root} is not a master (no {CONFIG_FILE}): check the dbfarm and the name; a database "
            "becomes a master by wlc.master() (wlc master on the command line)"
        )
    to = dest_root(to)
    dst = Storage.of(to)
    check_dest(dst, to, dbname, mcfg)
    RetentionState().set_keep(retention or {})  # a malformed one is refused before anything is written
    report = ShipReport()
    lock = lock_dest(dst, to)
    try:
        if retention:
            with dst.lock(Storage.join(to, PRUNE_LOCK), blocking=True, what=f"the retention of {to}"):
                state = read_retention_state(dst, to)
                state.set_keep(retention)
                write_retention_state(dst, to, state)
        for _attempt in (1, 2):  # batches pruned while copied: their compacted batch is published by then
            gone = len(report.gone)
            _pass(storage, root, dbname, mcfg, dst, to, up_to_batch, up_to_txn, report, progress)
            if len(report.gone) == gone:
                break
        else:
            log.warning(
                "shipping %s to %s: %s pruned at the source while being copied and no compacted batch "
                "holds them yet; the shipped wlc.config is left as it was until a later pass",
                dbname,
                to,
                ", ".join(report.gone),
            )
            return report
        _write_copy_config(storage, root, dbname, mcfg, dst, to, edit_config)
        prune_if_due(to, dbname)
    finally:
        lock.release()
        report.seconds = time.monotonic() - started
    if report.batches or report.snapshots:
        log.info(
            "shipped %d batches, %d snapshots of %s to %s (%.1f MB)",
            len(report.batches),
            len(report.snapshots),
            dbname,
            to,
            report.bytes / 1e6,
        )
    return report


def _write_copy_config(
    storage: Storage,
    root: str,
    dbname: str,
    mcfg: MasterState,
    dst: Storage,
    to: str,
    edit_config: Callable[[MasterState], MasterState] | None,
) -> None:
    """Write the copy's ``wlc.config``: the source's ``mcfg`` with its logs and snapshot
    inside ``to`` and ``database``, ``shipped``, ``shipped_from`` set, then ``edit_config``'s."""
    out = mcfg.copy()
    dsnap = Storage.join(to, snap.SNAPSHOT_DIR)
    out.database, out.logs = dbname, Storage.join(to, LOGS_DIR)
    out.shipped, out.shipped_from = utcnow(), storage.url(root)
    configured = mcfg.snapshot
    out.snapshot = Storage.join(dsnap, snapshot_name(root, configured)) if configured else ""
    if edit_config is not None:
        out = edit_config(out)
    write_master_state(dst, to, out)


def _pass(
    storage: Storage,
    root: str,
    dbname: str,
    mcfg: MasterState,
    dst: Storage,
    to: str,
    up_to_batch: int | None,
    up_to_txn: int | None,
    report: ShipReport,
    progress: bool,
) -> None:
    """Copy what the source publishes and the destination lacks: snapshots, then batches."""
    logs, dlogs = logs_of(mcfg, root), Storage.join(to, LOGS_DIR)
    dst.makedirs(dlogs)
    # snapshots and batches listed after the config was read: they hold all it claims
    starts = [
        s
        for s in snap.list_snapshots(storage, root, mcfg.snapshot, logs, dbname)
        if s.path and (up_to_txn is None or s.txn <= up_to_txn)
    ]
    level0 = [(n, p) for n, p in batchfmt.list_batches(storage, logs, dbname) if up_to_batch is None or n < up_to_batch]
    compacted = [
        (lv, f, last, p)
        for lv, f, last, p in batchfmt.list_compacted(storage, logs, dbname)
        if up_to_batch is None or last < up_to_batch
    ]
    have = set(dst.published(dlogs))
    dsnap = Storage.join(to, snap.SNAPSHOT_DIR)
    have_snaps = set(dst.published(dsnap))
    # read after the listings: a prune notes what it deletes before deleting it, so whatever is
    # missing from them that a prune deleted is in this note (and is not shipped again)
    pruned = read_retention_state(dst, to)
    todo = [p for n, p in level0 if posixpath.basename(p) not in have and not pruned.skips_batch(0, n, n)]
    todo += [
        p for lv, f, last, p in compacted if posixpath.basename(p) not in have and not pruned.skips_batch(lv, f, last)
    ]
    snaps = [(s, snapshot_name(root, s.path)) for s in starts if not pruned.skips_snapshot(s.txn)]
    snaps = [(s, name) for s, name in snaps if name not in have_snaps]
    bar = _bar(len(todo) + len(snaps), progress)
    try:
        for s, name in snaps:
            if ship_snapshot(storage, s.path, root, dst, Storage.join(dsnap, name), report):
                report.snapshots.append(name)
            bar.update(1)
        for path in todo:
            ship_batch(storage, path, dst, Storage.join(dlogs, posixpath.basename(path)), report)
            bar.update(1)
    finally:
        bar.close()


def _bar(total: int, progress: bool) -> Any:
    """A tqdm bar of ``total`` folders, shown after 2 s on a terminal or in a notebook when ``progress``."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="ship", unit="folder", delay=2.0, disable=None if progress else True, leave=False)
