"""Shipping logs and snapshots to another filesystem (MonetDB's log-shipping agents).

``wlc.ship(to=URL)`` and ``wlc ship <dbfarm> <db> <URL> [--follow]`` copy a master's
published batches (level 0 and compacted) and snapshots to another fsspec filesystem:
another local folder or mount, or an S3-compatible object store. The copy at ``URL`` (a
*shipped copy*) is laid out as a master's folder without its tables, so a replica reads it
exactly as it reads the master (``wlr.replicate(master, logs=URL)``)::

    <URL>/wlc.config          the source's wlc.config; logs and snapshot point inside URL;
                              ``database`` and ``shipped`` added. Rewritten at each pass's end
    <URL>/wlc_logs/<batch>/   every published batch, each visible once complete and verified
    <URL>/wlc_snapshot/<T>/   every snapshot, likewise

Each folder is assembled aside (a hidden sibling on local storage, published by one rename)
or in place (object stores, published by the commit marker ``<folder>.committed`` written
last). Before publishing, every file of a batch is read back and checked against the
batch manifest's size and SHA-256; a snapshot's files against their source sizes. A pass
that stops half-way (a crash, a lost connection) leaves only unpublished folders, and the
next pass resumes them, keeping each file already there and intact. A published folder is
never copied again. The copy has a retention of its own (:mod:`wlcore.ship.prune`, stored in
``<URL>/wlc.retention``, defaulting to ``master.retention``): pruned by the master's rules,
and what it deleted is never copied again.

The wlc.config copy is written after the batches it describes, so its ``tick`` and
``watermark`` never claim a transaction the copy does not hold. Relays (:mod:`wlr.relay`)
ship with an upper bound: only what their replica has applied.

The modules: :mod:`wlcore.ship.destination` (what a shipped copy is, its errors and
report), :mod:`wlcore.ship.folders` (copying one batch or snapshot folder, verified, then
published), :mod:`wlcore.ship.once` (one pass, :func:`ship`),
:mod:`wlcore.ship.shipper` (:class:`Shipper`, passes again whenever the source publishes) and
:mod:`wlcore.ship.prune` (the copy's retention, :func:`prune_copy`).
"""

from __future__ import annotations

from .destination import LOCK_FILE, LOGS_DIR, TAG, ShipError, ShipReport, ShipVerifyError, dest_root, read_config
from .once import ship
from .prune import prune_copy, prune_if_due
from .shipper import Shipper

__all__ = [
    "LOCK_FILE",
    "LOGS_DIR",
    "TAG",
    "ShipError",
    "ShipReport",
    "ShipVerifyError",
    "Shipper",
    "dest_root",
    "prune_copy",
    "prune_if_due",
    "read_config",
    "ship",
]
