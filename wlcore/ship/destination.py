"""What a shipped copy is: its layout, how its ``wlc.config`` is read, who may ship to it,
and the errors and report of shipping (see :mod:`wlcore.ship`)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from .. import epochs, snapshots as snap
from ..errors import LockHeldError, WlcError
from ..master_state import MasterState, read_master_state as read_master_config
from ..retention import RETENTION_FILE
from ..storage import HeldLock, Storage

LOGS_DIR = "wlc_logs"
TAG = "ship"  # local staging folders are .ship-<name>
LOCK_FILE = ".wlc-ship.lock"


class ShipError(WlcError):
    """Shipping cannot go on: the destination holds another database's copy or another
    history of it, or a copied batch does not verify there. Nothing unverified is published."""


class ShipVerifyError(ShipError):
    """A copied batch or snapshot did not verify at the destination (a bad link or disk);
    the next pass copies it again."""


@dataclass
class ShipReport:
    """What one pass (or, following, every pass so far) shipped.

    Attributes:
        batches: names of the batch folders published at the destination, in order.
        snapshots: names of the snapshot folders published there.
        bytes: bytes copied (files already there intact are not counted).
        gone: names of folders pruned at the source while being copied (not shipped).
        seconds: wall-clock seconds the pass (or passes) took.
    """

    batches: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)
    bytes: int = 0
    gone: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, other: "ShipReport") -> None:
        """Add a later pass's report to this one, in place.

        Args:
            other (ShipReport): the later pass's report.
        """
        self.batches += other.batches
        self.snapshots += other.snapshots
        self.gone += other.gone
        self.bytes += other.bytes
        self.seconds += other.seconds

    def lines(self) -> list[str]:
        """The report as lines for a person: a summary, the batch range, each snapshot and
        each folder pruned at the source meanwhile."""
        out = [
            f"shipped {len(self.batches)} batches and {len(self.snapshots)} snapshots, "
            f"{self.bytes / 1e6:.1f} MB in {self.seconds:.1f} s"
        ]
        if self.batches:
            out.append(f"  batches {self.batches[0]} .. {self.batches[-1]}")
        for name in self.snapshots:
            out.append(f"  snapshot {name}")
        for name in self.gone:
            out.append(f"  {name}: pruned at the source while being copied; not shipped")
        return out


def read_config(storage: Storage, root: str) -> MasterState | None:
    """The ``wlc.config`` at ``root``. A shipped copy's (it has ``shipped``) is read relative to
    ``root``: its logs are ``<root>/wlc_logs`` and its snapshots in ``<root>/wlc_snapshot``
    wherever the copy was shipped to or moved since (a mount seen under another path, a bucket
    replicated to another region).

    Args:
        storage (Storage): the storage holding ``root``.
        root (str): a master's folder or a shipped copy's (path or URL).

    Returns:
        MasterState | None: None when there is no ``wlc.config``.

    Raises:
        ConfigError: the file is malformed.
    """
    cfg = read_master_config(storage, root)
    if cfg is not None and cfg.is_shipped:
        cfg.logs = Storage.join(root, LOGS_DIR)
        if cfg.snapshot:
            cfg.snapshot = Storage.join(root, snap.SNAPSHOT_DIR, posixpath.basename(cfg.snapshot.rstrip("/")))
    return cfg


def dest_root(url: str) -> str:
    """``url`` without a trailing slash (checked: a shipped copy needs a folder or a bucket path).

    Args:
        url (str): the destination (folder, mount or ``s3://bucket/path``).

    Returns:
        str: the destination's root.

    Raises:
        ShipError: ``url`` is empty.
    """
    url = str(url).strip()
    if not url:
        raise ShipError("no destination given; name a folder or a URL such as s3://bucket/path")
    return url.rstrip("/") if url.rstrip("/") else url


def check_dest(dst: Storage, to: str, dbname: str, mcfg: MasterState) -> None:
    """Check that ``to`` may receive the copy of ``dbname``: it is empty, or a shipped copy of
    the same database (name and id) and history.

    Args:
        dst (Storage): the destination's storage.
        to (str): the destination's root (:func:`dest_root`).
        dbname (str): the master's name.
        mcfg (MasterState): the source's ``wlc.config``.

    Raises:
        ShipError: ``to`` holds other files, a master's own folder, another database's copy,
            a copy further on than the source, or another epoch history.
    """
    cfg = read_config(dst, to)
    if cfg is None:
        if dst.exists(to) and any(
            n
            for n in dst.listdir(to)
            if n not in (LOGS_DIR, snap.SNAPSHOT_DIR, LOCK_FILE, RETENTION_FILE) and not n.startswith(".")
        ):
            raise ShipError(f"{to} holds other files and no shipped copy; ship to an empty folder or URL")
        return
    if not cfg.is_shipped:
        raise ShipError(f"{to} is a master's own folder, not a shipped copy; ship to another folder or URL")
    if (cfg.database, cfg.dbid) != (dbname, mcfg.dbid):
        raise ShipError(
            f"{to} holds the shipped logs of database {cfg.database!r} (id {cfg.dbid}), "
            f"not of {dbname!r} (id {mcfg.dbid}); ship to another URL, or empty it first"
        )
    theirs, mine = cfg.tick, mcfg.tick
    if mine < theirs:
        raise ShipError(
            f"{to} holds {dbname!r} up to transaction {theirs} but the source stands at {mine}: it was "
            "restored from an older copy (or its logs were reset); ship to a new URL"
        )
    try:
        at = epochs.diverged(epochs.parse(cfg.epochs), theirs, epochs.parse(mcfg.epochs), mine)
    except ValueError as exc:
        raise ShipError(
            f"the epoch history in {to}'s or the source's wlc.config is damaged ({exc}); ship to a new URL"
        ) from None
    if at is not None:
        raise ShipError(
            f"{to} holds another history of {dbname!r} from transaction {at} on than the source (the "
            "master was restored from a copy, or its logs were reset); ship to a new URL"
        )


def lock_dest(dst: Storage, to: str) -> HeldLock:
    """One shipper a destination at a time (:meth:`wlcore.storage.Storage.lock`: a file lock on
    local folders, a lease on S3; refused where the destination can hold no lock). The
    destination folder is made when missing.

    Args:
        dst (Storage): the destination's storage.
        to (str): the destination's root; the lock is ``<to>/.wlc-ship.lock``.

    Returns:
        HeldLock: the lock, held; the caller releases it.

    Raises:
        ShipError: another process is shipping there.
        LockUnsupportedError: the destination can hold no lock.
    """
    dst.makedirs(to)
    try:
        return dst.lock(Storage.join(to, LOCK_FILE), blocking=False, what=f"shipping to {to}")
    except LockHeldError:
        raise ShipError(f"another process is shipping to {to}; stop it first") from None
