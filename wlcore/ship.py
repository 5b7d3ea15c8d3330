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
never copied again. A folder pruned at the source while it is copied is dropped and reported
in :attr:`ShipReport.gone`.

The wlc.config copy is written after the batches it describes, so its ``tick`` and
``watermark`` never claim a transaction the copy does not hold. Relays (:mod:`wlr.relay`)
ship with an upper bound: only what their replica has applied.

In order below: what a shipped copy is (its layout, how its ``wlc.config`` is read, who may
ship to it, the errors and :class:`ShipReport`); the copies a master knows of; copying one
batch or snapshot folder; the copy's retention (:func:`prune_copy`); one pass (:func:`ship`);
the shipper's metrics (:class:`ShipMetrics`); and :class:`Shipper`, which passes again
whenever the source publishes (``wlc ship --follow``).

The copies a master knows of are ``<db>/wlc.copies``, one destination a line: ``wlc ship``
and :meth:`wlc.Master.ship` add their destination; ``wlc prune`` prunes the master's own
folder and then every copy listed, each by its own retention. Relays are not listed: their
replica prunes them (``wlr prune``).

Retention: shipped copies and relay folders are pruned by the same rules as the master's own
folder (:func:`wlcore.retention.prune_folder`), with a retention of their own, stored with
the copy in ``<copy>/wlc.retention`` (:mod:`wlcore.retention`) and defaulting to
``master.retention``: set by ``wlc ship --retention``, ``wlc prune --copy URL --retention`` or
``wlr prune --retention`` (a relay), each level not set there taking ``master.retention``'s.
What a prune deletes is noted there before it is deleted, and a shipping pass reads that
note after listing what the copy holds, so no pass copies it again, even one running
meanwhile: pruning and shipping need not take turns (a ``wlc ship --follow`` goes on while
``wlc prune`` runs). Prunes of one copy take turns (``<copy>/.wlc-prune.lock``). A shipping
pass also prunes its copy when the last prune there is older than ``storage.ship_prune``
(:func:`prune_if_due`).

Metrics (:mod:`wlcore.metrics`), labels ``database`` and ``destination`` (the copy's folder
or URL; one a shipper):

* ``wlc_ship_batches_total``, ``wlc_ship_snapshots_total``, ``wlc_ship_bytes_total``: batch and
  snapshot folders published at the destination and the bytes copied (counted after each pass);
* ``wlc_ship_errors_total{kind}``: passes that failed (``kind``: the exception's class), each
  retried by the next pass;
* read at scrape time: ``wlc_ship_behind_batches`` (level-0 batches the source published that
  the copy does not hold yet) and ``wlc_ship_behind_seconds`` (how long ago the oldest of them
  was published; 0 when the copy holds everything).
"""

from __future__ import annotations

import logging
import posixpath
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable

from prometheus_client import Counter

from . import batch as batchfmt, epochs, snapshots as snap
from .batch import MANIFEST, SpanCache, batch_name
from .errors import BatchError, LockHeldError, WlcError
from .faults import crash_point
from .levels import Span
from .logstore import LogStore
from .metrics import Family, Live, Sample, once
from .retention import (
    PRUNE_LOCK,
    RETENTION_FILE,
    PruneReport,
    RetentionState,
    prune_folder,
    read_retention_state,
    write_promise,
    write_retention_state,
)
from .settings import Every, settings
from .state import (
    MASTER_CONFIG as CONFIG_FILE,
    MasterState,
    logs_of,
    read_master_state as read_master_config,
    write_master_state,
)
from .storage import HeldLock, Storage, copy_file
from .utc import utcnow

LOGS_DIR = "wlc_logs"
TAG = "ship"  # local staging folders are .ship-<name>
LOCK_FILE = ".wlc-ship.lock"

log = logging.getLogger("wlc.ship")


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


COPIES_FILE = "wlc.copies"
COPIES_LOCK = "wlc.copies.lock"


def known_copies(storage: Storage, db_path: str) -> list[str]:
    """The destinations master ``db_path`` has shipped to, in the order first shipped.

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.

    Returns:
        list[str]: the destination folders or URLs (empty: none yet).
    """
    path = Storage.join(db_path, COPIES_FILE)
    if not storage.exists(path):
        return []
    return [line.strip() for line in storage.read_text(path).splitlines() if line.strip()]


def add_copy(storage: Storage, db_path: str, to: str) -> None:
    """Note that master ``db_path`` ships to ``to`` (nothing when it is listed already).

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.
        to (str): the destination folder or URL.

    Raises:
        ShipError: ``to`` is empty.
    """
    url = dest_root(to)
    if url in known_copies(storage, db_path):
        return
    with storage.lock(Storage.join(db_path, COPIES_LOCK), blocking=True, what=f"the copies of {db_path}"):
        listed = known_copies(storage, db_path)
        if url not in listed:
            storage.write_atomic(Storage.join(db_path, COPIES_FILE), "".join(f"{u}\n" for u in listed + [url]))


_SKIP = re.compile(r"^(\d+|initial|\..*)$")  # an old-layout snapshot folder also holds the newer ones


def snapshot_name(root: str, path: str) -> str:
    """The destination name of the snapshot folder ``path`` of the source ``root`` (an
    old-layout snapshot, kept directly in ``wlc_snapshot``, becomes ``initial``).

    Args:
        root (str): the source's root folder.
        path (str): the snapshot's folder there.

    Returns:
        str: the folder name at the destination (``<txn>`` or ``initial``).
    """
    if path.rstrip("/") == Storage.join(root, snap.SNAPSHOT_DIR).rstrip("/"):
        return snap.INITIAL
    return posixpath.basename(path.rstrip("/"))


def _copy_if_changed(src: Storage, a: str, dst: Storage, b: str, size: int | None, sha: str | None) -> int:
    """Copy ``a`` to ``b`` unless ``b`` is already there intact (a resumed pass); bytes copied."""
    have = dst.size(b)
    if have is not None and have == size and (sha is None or batchfmt.file_sha256(dst, b)[1] == sha):
        return 0
    return copy_file(src, a, dst, b)


def ship_batch(src: Storage, path: str, dst: Storage, final: str, report: ShipReport) -> None:
    """Copy the published batch folder ``path`` on ``src`` to ``final`` on ``dst``: every
    file its manifest lists, then the manifest; each read back against the manifest's size
    and SHA-256 before the folder is published. A file already there intact (a resumed
    pass) is not copied again.

    Args:
        src (Storage): the source's storage.
        path (str): the batch's folder at the source.
        dst (Storage): the destination's storage.
        final (str): the batch's folder at the destination.
        report (ShipReport): the pass's report, added to in place (bytes, the batch's name in
            ``batches``, or in ``gone`` when it was pruned at the source meanwhile).

    Raises:
        ShipError: the batch at the source cannot be read (repair the source's logs).
        ShipVerifyError: the copy does not verify (nothing of it is published).
        FileNotFoundError: a file of a batch still published at the source is missing.
    """
    name = posixpath.basename(final)
    staging = dst.staging_for(final, TAG)

    def drop() -> None:  # never a folder another shipper published meanwhile
        if staging != final or not dst.is_published(final):
            dst.rm(staging)

    try:
        manifest = batchfmt.read_manifest(src, path)
        for rel, entry in sorted(manifest.files.items()):
            report.bytes += _copy_if_changed(
                src, Storage.join(path, rel), dst, Storage.join(staging, rel), entry.size, entry.sha256
            )
            crash_point("ship.file")
        report.bytes += copy_file(
            src, Storage.join(path, batchfmt.MANIFEST), dst, Storage.join(staging, batchfmt.MANIFEST)
        )
    except (FileNotFoundError, BatchError) as exc:
        if src.is_published(path):
            if isinstance(exc, BatchError):
                raise ShipError(
                    f"batch {name} at the source cannot be read ({exc}); repair the source's logs"
                ) from None
            raise
        drop()
        report.gone.append(name)  # pruned at the source while being copied
        return
    try:
        problems = batchfmt.verify_files(dst, staging, batchfmt.read_manifest(dst, staging))
    except BatchError as exc:
        problems = {batchfmt.MANIFEST: str(exc)}
    if problems:
        drop()
        raise ShipVerifyError(
            f"batch {name} does not verify at {posixpath.dirname(final)} after copying ("
            + "; ".join(f"{f}: {p}" for f, p in sorted(problems.items())[:3])
            + "); nothing of it was published. Check the destination and ship again"
        )
    crash_point("ship.verified")
    try:
        dst.publish_dir(staging, final)
    except FileExistsError:  # another shipper published it first: it is there, verified
        drop()
        return
    report.batches.append(name)


def ship_snapshot(src: Storage, path: str, root: str, dst: Storage, final: str, report: ShipReport) -> bool:
    """Copy the snapshot folder ``path`` of the source ``root`` to ``final`` on ``dst``; its
    manifest last, then sizes checked, then published. Adds the bytes copied to ``report``
    (and the name to ``gone`` when it was deleted at the source meanwhile).

    Args:
        src (Storage): the source's storage.
        path (str): the snapshot's folder at the source.
        root (str): the source's root folder (names the snapshot of an earlier layout).
        dst (Storage): the destination's storage.
        final (str): the snapshot's folder at the destination.
        report (ShipReport): the pass's report, added to in place.

    Returns:
        bool: True when this call published it; False when it was deleted at the source
        meanwhile or another shipper published it first.

    Raises:
        ShipVerifyError: a copied file's size differs (nothing of it is published).
        FileNotFoundError: a file of a snapshot still published at the source is missing.
    """
    old_layout = snapshot_name(root, path) == snap.INITIAL and posixpath.basename(path.rstrip("/")) != snap.INITIAL
    staging = dst.staging_for(final, TAG)
    sizes: dict[str, int | None] = {}
    try:
        for rel in src.walk_files(path):
            if rel == snap.SNAPSHOT_MANIFEST or (old_layout and _SKIP.match(rel.split("/", 1)[0])):
                continue
            a = Storage.join(path, rel)
            sizes[rel] = src.size(a)
            report.bytes += _copy_if_changed(src, a, dst, Storage.join(staging, rel), sizes[rel], None)
        report.bytes += copy_file(
            src, Storage.join(path, snap.SNAPSHOT_MANIFEST), dst, Storage.join(staging, snap.SNAPSHOT_MANIFEST)
        )
    except FileNotFoundError:
        if src.is_published(path):
            raise
        if staging != final or not dst.is_published(final):
            dst.rm(staging)
        report.gone.append(posixpath.basename(final))
        return False
    wrong = [rel for rel, size in sizes.items() if dst.size(Storage.join(staging, rel)) != size]
    if wrong:
        dst.rm(staging)
        raise ShipVerifyError(
            f"snapshot {posixpath.basename(final)} does not verify at the destination after copying "
            f"({', '.join(wrong[:3])}: size differs); nothing of it was published. Ship again"
        )
    try:
        dst.publish_dir(staging, final)
    except FileExistsError:  # another shipper published it first
        return False
    return True


_caches: dict[str, SpanCache] = {}  # {log folder: its spans}: manifests never change
_caches_lock = threading.Lock()


def _listed(store: LogStore) -> list[Span]:
    """Every published batch of every level in ``store``, as spans (each manifest read once a process)."""
    with _caches_lock:
        cache = _caches.setdefault(store.logs, SpanCache(store.storage))
    return cache.spans([b.path for b in store.batches() + store.compacted()])


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
        store = LogStore(dst, to, Storage.join(to, LOGS_DIR), cfg.database)
        starts = snap.list_snapshots(dst, to, cfg.snapshot, store)

        def note(report: PruneReport) -> None:  # before deleting: a shipping pass skips them from now on
            write_promise(dst, to, report, now, ranges=True)

        report = prune_folder(store, starts, _listed(store), now, keep, dry_run, note)
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
    source = LogStore(storage, root, logs_of(mcfg, root), dbname)
    lock = lock_dest(dst, to)
    try:
        if retention:
            with dst.lock(Storage.join(to, PRUNE_LOCK), blocking=True, what=f"the retention of {to}"):
                state = read_retention_state(dst, to)
                state.set_keep(retention)
                write_retention_state(dst, to, state)
        for _attempt in (1, 2):  # batches pruned while copied: their compacted batch is published by then
            gone = len(report.gone)
            _pass(source, mcfg, dst, to, up_to_batch, up_to_txn, report, progress)
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
    source: LogStore,
    mcfg: MasterState,
    dst: Storage,
    to: str,
    up_to_batch: int | None,
    up_to_txn: int | None,
    report: ShipReport,
    progress: bool,
) -> None:
    """Copy what the source (its log store, read from ``mcfg``) publishes and the destination
    lacks: snapshots, then batches."""
    storage, root = source.storage, source.root
    dlogs = Storage.join(to, LOGS_DIR)
    dst.makedirs(dlogs)
    # snapshots and batches listed after the config was read: they hold all it claims
    starts = [
        s
        for s in snap.list_snapshots(storage, root, mcfg.snapshot, source)
        if s.path and (up_to_txn is None or s.txn <= up_to_txn)
    ]
    batches = [b for b in source.batches() + source.compacted() if up_to_batch is None or b.last < up_to_batch]
    have = set(dst.published(dlogs))
    dsnap = Storage.join(to, snap.SNAPSHOT_DIR)
    have_snaps = set(dst.published(dsnap))
    # read after the listings: a prune notes what it deletes before deleting it, so whatever is
    # missing from them that a prune deleted is in this note (and is not shipped again)
    pruned = read_retention_state(dst, to)
    todo = [b.path for b in batches if b.name not in have and not pruned.skips_batch(b.level, b.first, b.last)]
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


LABELS = ["database", "destination"]
EVENTS = once(
    lambda: SimpleNamespace(
        batches=Counter("wlc_ship_batches", "Batch folders published at the destination", LABELS),
        snapshots=Counter("wlc_ship_snapshots", "Snapshot folders published at the destination", LABELS),
        bytes=Counter("wlc_ship_bytes", "Bytes copied to the destination", LABELS),
        errors=Counter("wlc_ship_errors", "Shipping passes that failed, by the exception's class", [*LABELS, "kind"]),
    )
)
_L = tuple(LABELS)
LIVE = Live(
    [
        Family("wlc_ship_behind_batches", "Level-0 batches published at the source, not yet at the copy", _L),
        Family("wlc_ship_behind_seconds", "Seconds since the oldest batch the copy lacks was published", _L),
    ]
)


class ShipMetrics:
    """The metrics of one shipper (:class:`wlcore.ship.Shipper`).

    Args:
        storage: the source's storage; root: the source folder (holding a ``wlc.config``).
        dbname: the master's database name; to: the destination folder or URL.
    """

    def __init__(self, storage: Storage, root: str, dbname: str, to: str) -> None:
        self.storage, self.root, self.dbname, self.to = storage, root, dbname, to
        self.labels = (dbname, to)

    def start(self) -> None:
        """Report how far behind the copy is, from now on."""
        LIVE.add(self)

    def stop(self) -> None:
        """Stop reporting it (the counters stay)."""
        LIVE.remove(self)

    def shipped(self, report: ShipReport) -> None:
        """Count what one pass published.

        Args:
            report (ShipReport): the pass's report.
        """
        e = EVENTS()
        e.batches.labels(*self.labels).inc(len(report.batches))
        e.snapshots.labels(*self.labels).inc(len(report.snapshots))
        e.bytes.labels(*self.labels).inc(report.bytes)

    def error(self, kind: str) -> None:
        """Count a failed pass (``kind``: the exception's class name)."""
        EVENTS().errors.labels(*self.labels, kind).inc()

    def samples(self) -> Iterable[Sample]:
        """How far behind the copy is now: two small files read, one ``stat`` when it lacks a batch."""
        labels = dict(zip(LABELS, self.labels, strict=True))
        source = read_config(self.storage, self.root)
        if source is None:
            return
        copy = read_config(Storage.of(self.to), self.to)
        held = copy.batches if copy is not None else 0
        behind = max(0, source.batches - held)
        yield "wlc_ship_behind_batches", labels, behind
        seconds = 0.0
        if behind:
            manifest = Storage.join(logs_of(source, self.root), batch_name(self.dbname, held), MANIFEST)
            try:
                published = self.storage.mtime_ms(manifest)
            except FileNotFoundError:  # pruned at the source, or not there: age unknown
                published = None
            if published is not None:
                seconds = max(0.0, time.time() - published / 1000.0)
        yield "wlc_ship_behind_seconds", labels, seconds

    def __repr__(self) -> str:
        return f"<ship metrics of {self.dbname!r} to {self.to!r}>"


if TYPE_CHECKING:
    from .watch import FolderWatch


class Shipper:
    """Ships a source to one destination now and, following, again whenever the source
    publishes (folder events on local logs, else every ``storage.ship_poll`` seconds),
    until :meth:`stop`. ``report`` adds up every pass; ``error`` is the exception that
    ended following, if any."""

    def __init__(self, storage: Storage, root: str, dbname: str, to: str, poll: float | None = None, **kwargs: Any):
        """A shipper, not started (:meth:`once`, :meth:`follow`).

        Args:
            storage (Storage): the source's storage.
            root (str): the source folder (a master's, or a shipped copy or relay holding a ``wlc.config``).
            dbname (str): the master's database name.
            to (str): the destination folder or URL (``s3://bucket/path``).
            poll (float | None): seconds between passes when no folder event wakes the shipper
                (None: ``storage.ship_poll``).
            **kwargs (Any): passed to :func:`wlcore.ship.ship` (``up_to_batch``, ``up_to_txn``,
                ``edit_config``).

        Raises:
            ShipError: ``to`` is empty.
        """

        self.storage, self.root, self.dbname, self.to = storage, root, dbname, dest_root(to)
        self.kwargs = kwargs
        self.poll = poll if poll is not None else settings().storage.ship_poll
        self.report = ShipReport()
        self.metrics = ShipMetrics(storage, root, dbname, self.to)  # Prometheus (ShipMetrics)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: FolderWatch | None = None

    def once(self, progress: bool = True) -> ShipReport:
        """One pass (:func:`wlcore.ship.ship`); what it shipped is also added to ``report``.

        Args:
            progress (bool): a bar for a long pass, on a terminal or in a notebook.

        Returns:
            ShipReport: what this pass shipped.

        Raises:
            ShipError, ShipVerifyError, OSError: as :func:`wlcore.ship.ship`.
        """
        try:
            out = ship(self.storage, self.root, self.dbname, self.to, progress=progress, **self.kwargs)
        except Exception as exc:
            self.metrics.error(type(exc).__name__)
            raise
        self.report.add(out)
        self.metrics.shipped(out)
        return out

    def follow(self, background: bool = True) -> "Shipper":
        """Keep shipping until :meth:`stop`: a pass, then another whenever the source publishes.
        Errors are logged and retried at the next pass, except a :class:`ShipError`, which ends
        following and is kept in ``error``.

        Args:
            background (bool): in a daemon thread (True), or in this one until :meth:`stop` (the CLI).

        Returns:
            Shipper: this shipper.
        """
        self.metrics.start()  # how far behind the copy is, on /metrics while following
        if background:
            self._thread = threading.Thread(target=self._loop, name=f"wlc-ship-{self.dbname}", daemon=True)
            self._thread.start()
        else:
            self._loop()
        return self

    def _loop(self) -> None:

        logs = logs_of(read_config(self.storage, self.root), self.root)
        polling = settings().capture.polling
        watch = self.storage.watcher(logs, recursive=False, polling=polling, interval=self.poll)  # None: polled
        self._watch = watch
        try:
            while not self._stop.is_set():
                try:
                    self.once(progress=False)
                except ShipVerifyError as exc:  # copied again by the next pass
                    log.warning("shipping %s to %s: %s; retrying", self.dbname, self.to, exc)
                except ShipError as exc:
                    self.error = exc
                    log.error("shipping %s to %s stopped: %s", self.dbname, self.to, exc)
                    return
                except Exception as exc:  # a lost connection: the next pass resumes
                    log.warning("shipping %s to %s: %s; retrying", self.dbname, self.to, exc)
                if watch is not None:
                    watch.wait(self.poll)
                else:
                    self._stop.wait(self.poll)
        finally:
            if watch is not None:
                watch.close()
            self.metrics.stop()

    @property
    def running(self) -> bool:
        """True while the following thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 60.0) -> ShipReport:
        """Stop following after the pass under way.

        Args:
            timeout (float): seconds to wait for the thread to end.

        Returns:
            ShipReport: ``report``, every pass added up.
        """
        self._stop.set()
        if self._watch is not None:
            self._watch.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.report
