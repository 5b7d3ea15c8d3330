"""Copying one batch or snapshot folder to a shipped copy: assembled aside, read back and
verified, then published (see :mod:`wlcore.ship`). A folder pruned at the source while it
is copied is dropped and reported in :attr:`ShipReport.gone`."""

from __future__ import annotations

import posixpath
import re

from .. import batch as batchfmt, snapshots as snap
from ..errors import BatchError
from ..faults import crash_point
from ..storage import Storage, copy_file
from .destination import TAG, ShipError, ShipReport, ShipVerifyError

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
