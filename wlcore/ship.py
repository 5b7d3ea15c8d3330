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
never copied again. Nothing at the destination is deleted: retention there is its own.

The wlc.config copy is written after the batches it describes, so its ``tick`` and
``watermark`` never claim a transaction the copy does not hold. Relays (:mod:`wlr.relay`)
ship with an upper bound: only what their replica has applied.
"""
from __future__ import annotations

import logging
import posixpath
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable

from . import batch as batchfmt
from . import epochs
from . import snapshots as snap
from .errors import BatchError, LockHeldError, WlcError
from .faults import crash_point
from .master_state import CONFIG_FILE, MasterState, logs_of, read_config as read_master_config, write_master_state
from .storage import Storage, copy_file

if TYPE_CHECKING:
    from .watch import FolderWatch

log = logging.getLogger("wlc.ship")



def read_config(storage: Storage, root: str) -> MasterState | None:
    """The ``wlc.config`` at ``root`` (None when there is none). A shipped copy's (it has
    ``shipped``) is read relative to ``root``: its logs are ``<root>/wlc_logs`` and its
    snapshots in ``<root>/wlc_snapshot`` wherever the copy was shipped to or moved since (a
    mount seen under another path, a bucket replicated to another region)."""
    cfg = read_master_config(storage, root)
    if cfg is not None and cfg.is_shipped:
        cfg.logs = Storage.join(root, LOGS_DIR)
        if cfg.snapshot:
            cfg.snapshot = Storage.join(root, snap.SNAPSHOT_DIR, posixpath.basename(cfg.snapshot.rstrip("/")))
    return cfg



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
    """What one pass (or, following, every pass so far) shipped."""

    batches: list[str] = field(default_factory=list)    # batch folders published at the destination
    snapshots: list[str] = field(default_factory=list)  # snapshot folders published there
    bytes: int = 0                                       # bytes copied
    gone: list[str] = field(default_factory=list)       # pruned at the source while being copied
    seconds: float = 0.0

    def add(self, other: "ShipReport") -> None:
        self.batches += other.batches
        self.snapshots += other.snapshots
        self.gone += other.gone
        self.bytes += other.bytes
        self.seconds += other.seconds

    def lines(self) -> list[str]:
        out = [f"shipped {len(self.batches)} batches and {len(self.snapshots)} snapshots, "
               f"{self.bytes / 1e6:.1f} MB in {self.seconds:.1f} s"]
        if self.batches:
            out.append(f"  batches {self.batches[0]} .. {self.batches[-1]}")
        for name in self.snapshots:
            out.append(f"  snapshot {name}")
        for name in self.gone:
            out.append(f"  {name}: pruned at the source while being copied; not shipped")
        return out


def dest_root(url: str) -> str:
    """``url`` without a trailing slash (checked: a shipped copy needs a folder or a bucket path)."""
    url = str(url).strip()
    if not url:
        raise ShipError("no destination given; name a folder or a URL such as s3://bucket/path")
    return url.rstrip("/") if url.rstrip("/") else url


def ship(storage: Storage, root: str, dbname: str, to: str, up_to_batch: int | None = None,
         up_to_txn: int | None = None, edit_config: Callable[[MasterState], MasterState] | None = None,
         progress: bool = True) -> ShipReport:
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

    Returns:
        ShipReport: the folders published at the destination by this pass.

    The copy's wlc.config is written last, and not at all when batches vanished from
    the source (pruned) while copied and no compacted batch holding them was found: the
    copy then claims only what it held before.

    Raises:
        ShipError: ``root`` is not a master or shipped copy; the destination holds the copy
            of another database (another name or database id) or another history of it (a
            master restored from a copy: its tick went back, or its epochs differ).
        ShipVerifyError: a copied batch or snapshot does not verify at the destination
            (nothing of it is published; ship again).
        OSError: the source or destination cannot be reached (the next pass resumes).
    """
    started = time.monotonic()
    mcfg = read_config(storage, root)
    if mcfg is None:
        raise ShipError(f"{root} is not a master (no {CONFIG_FILE}): check the dbfarm and the name; a database "
                        "becomes a master by wlc.master() (wlc master on the command line)")
    to = dest_root(to)
    dst = Storage.of(to)
    _check_dest(dst, to, dbname, mcfg)
    report = ShipReport()
    lock = _lock(dst, to)
    try:
        for _attempt in (1, 2):  # batches pruned while copied: their compacted batch is published by then
            gone = len(report.gone)
            _pass(storage, root, dbname, mcfg, dst, to, up_to_batch, up_to_txn, report, progress)
            if len(report.gone) == gone:
                break
        else:
            log.warning("shipping %s to %s: %s pruned at the source while being copied and no compacted batch "
                        "holds them yet; the shipped wlc.config is left as it was until a later pass",
                        dbname, to, ", ".join(report.gone))
            return report
        out = mcfg.copy()
        dsnap = Storage.join(to, snap.SNAPSHOT_DIR)
        out.database, out.logs = dbname, Storage.join(to, LOGS_DIR)
        out.shipped, out.shipped_from = datetime.now(timezone.utc), storage.url(root)
        configured = mcfg.snapshot
        out.snapshot = Storage.join(dsnap, _snapshot_name(root, configured)) if configured else ""
        if edit_config is not None:
            out = edit_config(out)
        write_master_state(dst, to, out)
    finally:
        lock.release()
        report.seconds = time.monotonic() - started
    if report.batches or report.snapshots:
        log.info("shipped %d batches, %d snapshots of %s to %s (%.1f MB)", len(report.batches),
                 len(report.snapshots), dbname, to, report.bytes / 1e6)
    return report


def _pass(storage: Storage, root: str, dbname: str, mcfg: MasterState, dst: Storage, to: str,
          up_to_batch: int | None, up_to_txn: int | None, report: ShipReport, progress: bool) -> None:
    """Copy what the source publishes and the destination lacks: snapshots, then batches."""
    logs, dlogs = logs_of(mcfg, root), Storage.join(to, LOGS_DIR)
    dst.makedirs(dlogs)
    # snapshots and batches listed after the config was read: they hold all it claims
    starts = [s for s in snap.list_snapshots(storage, root, mcfg.snapshot, logs, dbname)
              if s.path and (up_to_txn is None or s.txn <= up_to_txn)]
    level0 = [(n, p) for n, p in batchfmt.list_batches(storage, logs, dbname) if up_to_batch is None or n < up_to_batch]
    compacted = [(lv, f, last, p) for lv, f, last, p in batchfmt.list_compacted(storage, logs, dbname)
                 if up_to_batch is None or last < up_to_batch]
    have = set(dst.published(dlogs))
    todo = [p for _n, p in level0 if posixpath.basename(p) not in have]
    todo += [p for *_x, p in compacted if posixpath.basename(p) not in have]
    dsnap = Storage.join(to, snap.SNAPSHOT_DIR)
    have_snaps = set(dst.published(dsnap))
    snaps = [(s, _snapshot_name(root, s.path)) for s in starts]
    snaps = [(s, name) for s, name in snaps if name not in have_snaps]
    bar = _bar(len(todo) + len(snaps), progress)
    try:
        for s, name in snaps:
            if _ship_snapshot(storage, s.path, root, dst, Storage.join(dsnap, name), report):
                report.snapshots.append(name)
            bar.update(1)
        for path in todo:
            _ship_batch(storage, path, dst, Storage.join(dlogs, posixpath.basename(path)), report)
            bar.update(1)
    finally:
        bar.close()


def _check_dest(dst: Storage, to: str, dbname: str, mcfg: MasterState) -> None:
    cfg = read_config(dst, to)
    if cfg is None:
        if dst.exists(to) and any(n for n in dst.listdir(to) if n not in (LOGS_DIR, snap.SNAPSHOT_DIR, LOCK_FILE)
                                  and not n.startswith(".")):
            raise ShipError(f"{to} holds other files and no shipped copy; ship to an empty folder or URL")
        return
    if not cfg.is_shipped:
        raise ShipError(f"{to} is a master's own folder, not a shipped copy; ship to another folder or URL")
    if (cfg.database, cfg.dbid) != (dbname, mcfg.dbid):
        raise ShipError(f"{to} holds the shipped logs of database {cfg.database!r} (id {cfg.dbid}), "
                        f"not of {dbname!r} (id {mcfg.dbid}); ship to another URL, or empty it first")
    theirs, mine = cfg.tick, mcfg.tick
    if mine < theirs:
        raise ShipError(f"{to} holds {dbname!r} up to transaction {theirs} but the source stands at {mine}: it was "
                        "restored from an older copy (or its logs were reset); ship to a new URL")
    try:
        at = epochs.diverged(epochs.parse(cfg.epochs), theirs, epochs.parse(mcfg.epochs), mine)
    except ValueError as exc:
        raise ShipError(f"the epoch history in {to}'s or the source's wlc.config is damaged ({exc}); ship to a "
                        "new URL") from None
    if at is not None:
        raise ShipError(f"{to} holds another history of {dbname!r} from transaction {at} on than the source (the "
                        "master was restored from a copy, or its logs were reset); ship to a new URL")


def _lock(dst: Storage, to: str):
    """One shipper a destination at a time (:meth:`Storage.lock`: a file lock on local
    folders, a lease on S3; refused where the destination can hold no lock).

    Raises:
        ShipError: another process is shipping there.
        LockUnsupportedError: the destination can hold no lock.
    """
    dst.makedirs(to)
    try:
        return dst.lock(Storage.join(to, LOCK_FILE), blocking=False, what=f"shipping to {to}")
    except LockHeldError:
        raise ShipError(f"another process is shipping to {to}; stop it first") from None


def _bar(total: int, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="ship", unit="folder", delay=2.0, disable=None if progress else True, leave=False)


def _snapshot_name(root: str, path: str) -> str:
    """The destination name of the snapshot folder ``path`` (an old-layout snapshot, kept
    directly in ``wlc_snapshot``, becomes ``initial``)."""
    if path.rstrip("/") == Storage.join(root, snap.SNAPSHOT_DIR).rstrip("/"):
        return snap.INITIAL
    return posixpath.basename(path.rstrip("/"))


def _copy_if_changed(src: Storage, a: str, dst: Storage, b: str, size: int | None, sha: str | None) -> int:
    """Copy ``a`` to ``b`` unless ``b`` is already there intact (a resumed pass); bytes copied."""
    have = dst.size(b)
    if have is not None and have == size and (sha is None or batchfmt.file_sha256(dst, b)[1] == sha):
        return 0
    return copy_file(src, a, dst, b)


def _ship_batch(src: Storage, path: str, dst: Storage, final: str, report: ShipReport) -> None:
    name = posixpath.basename(final)
    staging = dst.staging_for(final, TAG)

    def drop() -> None:  # never a folder another shipper published meanwhile
        if staging != final or not dst.is_published(final):
            dst.rm(staging)

    try:
        manifest = batchfmt.read_manifest(src, path)
        for rel, info in sorted(manifest.files.items()):
            report.bytes += _copy_if_changed(src, Storage.join(path, rel), dst, Storage.join(staging, rel),
                                             int(info["size"]), info["sha256"])
            crash_point("ship.file")
        report.bytes += copy_file(src, Storage.join(path, batchfmt.MANIFEST), dst,
                                  Storage.join(staging, batchfmt.MANIFEST))
    except (FileNotFoundError, BatchError) as exc:
        if src.is_published(path):
            if isinstance(exc, BatchError):
                raise ShipError(f"batch {name} at the source cannot be read ({exc}); repair the source's logs") from None
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
        raise ShipVerifyError(f"batch {name} does not verify at {posixpath.dirname(final)} after copying ("
                              + "; ".join(f"{f}: {p}" for f, p in sorted(problems.items())[:3])
                              + "); nothing of it was published. Check the destination and ship again")
    crash_point("ship.verified")
    try:
        dst.publish_dir(staging, final)
    except FileExistsError:  # another shipper published it first: it is there, verified
        drop()
        return
    report.batches.append(name)


_SKIP = re.compile(r"^(\d+|initial|\..*)$")  # an old-layout snapshot folder also holds the newer ones


def _ship_snapshot(src: Storage, path: str, root: str, dst: Storage, final: str, report: ShipReport) -> bool:
    """Copy the snapshot folder ``path``; its manifest last, then sizes checked. False when it
    was deleted at the source meanwhile."""
    old_layout = _snapshot_name(root, path) == snap.INITIAL and posixpath.basename(path.rstrip("/")) != snap.INITIAL
    staging = dst.staging_for(final, TAG)
    sizes: dict[str, int] = {}
    try:
        for rel in src.walk_files(path):
            if rel == snap.SNAPSHOT_MANIFEST or (old_layout and _SKIP.match(rel.split("/", 1)[0])):
                continue
            a = Storage.join(path, rel)
            sizes[rel] = src.size(a)
            report.bytes += _copy_if_changed(src, a, dst, Storage.join(staging, rel), sizes[rel], None)
        report.bytes += copy_file(src, Storage.join(path, snap.SNAPSHOT_MANIFEST), dst,
                                  Storage.join(staging, snap.SNAPSHOT_MANIFEST))
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
        raise ShipVerifyError(f"snapshot {posixpath.basename(final)} does not verify at the destination after copying "
                        f"({', '.join(wrong[:3])}: size differs); nothing of it was published. Ship again")
    try:
        dst.publish_dir(staging, final)
    except FileExistsError:  # another shipper published it first
        return False
    return True


class Shipper:
    """Ships a source to one destination now and, following, again whenever the source
    publishes (folder events on local logs, else every ``storage.ship_poll`` seconds),
    until :meth:`stop`. ``report`` adds up every pass; ``error`` is the exception that
    ended following, if any."""

    def __init__(self, storage: Storage, root: str, dbname: str, to: str, poll: float | None = None, **kwargs):
        """``storage``/``root``/``dbname``/``to`` as :func:`ship`'s; ``poll``: seconds between
        passes when no folder event wakes the shipper (default ``storage.ship_poll``);
        ``kwargs``: passed to :func:`ship` (``up_to_batch``, ``up_to_txn``, ``edit_config``)."""
        from .settings import settings

        self.storage, self.root, self.dbname, self.to = storage, root, dbname, dest_root(to)
        self.kwargs = kwargs
        self.poll = poll if poll is not None else settings().storage.ship_poll
        self.report = ShipReport()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: FolderWatch | None = None

    def once(self, progress: bool = True) -> ShipReport:
        """One pass; returns what it shipped (also added to ``report``)."""
        out = ship(self.storage, self.root, self.dbname, self.to, progress=progress, **self.kwargs)
        self.report.add(out)
        return out

    def follow(self, background: bool = True) -> "Shipper":
        """Keep shipping until :meth:`stop`; in a daemon thread, or in this one (the CLI)."""
        if background:
            self._thread = threading.Thread(target=self._loop, name=f"wlc-ship-{self.dbname}", daemon=True)
            self._thread.start()
        else:
            self._loop()
        return self

    def _loop(self) -> None:
        from .settings import settings
        from .watch import FolderWatch

        logs = logs_of(read_config(self.storage, self.root), self.root)
        polling = settings().capture.polling
        watch = FolderWatch(logs, recursive=False, polling=polling, interval=self.poll) if self.storage.local else None
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

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 60.0) -> ShipReport:
        """Stop following after the pass under way; returns ``report``."""
        self._stop.set()
        if self._watch is not None:
            self._watch.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.report
