"""The batch format: what a published batch holds, how it is published and verified.

A batch is a folder ``<logs>/<dbname>_<12-digit batch number>`` (level 0, as capture
publishes it) or ``<logs>/<dbname>_L<level>_<first batch>_<last batch>`` (a compacted batch
of level 1 or 2 merging level-0 batches first..last, see :mod:`wlc.compaction`)::

    manifest.json                      written last: format, txn records, watermark, checksums
    rows/<schema.table>/wlc_version=<v>/part-*.parquet   change rows of one Delta version
    images/<schema.table>/<v>/part-*.parquet             full table image where the change feed cannot describe a version

It is built in a staging folder ``<logs>/.open-<dbname>-<n>-<uuid>`` and published by one rename,
so a reader sees no batch or the whole batch; it is never changed afterwards. Every file
but the manifest is listed in the manifest with its size and SHA-256; the manifest carries
the SHA-256 of its own canonical content. Replay verifies all of it before applying.

The manifest itself (:class:`Manifest`, :class:`TxnRecord`) is :mod:`wlcore.manifest`'s; its
names are re-exported here, where most callers know them from.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Iterable

from .errors import BatchError
from .manifest import FORMAT, FileEntry, Manifest, TxnRecord, batch_name, compacted_name
from .storage import Storage
from .version import FORMAT_VERSION

__all__ = [
    "CHANGE_TYPE",
    "CHANGE_TYPES",
    "FORMAT",
    "FORMAT_VERSION",
    "FileEntry",
    "MANIFEST",
    "STAGING_PREFIX",
    "VERSION_COLUMN",
    "Manifest",
    "TxnRecord",
    "batch_name",
    "clear_staging",
    "compacted_name",
    "file_sha256",
    "list_batches",
    "list_compacted",
    "open_staging",
    "publish",
    "read_manifest",
    "verify_files",
]

MANIFEST = "manifest.json"
STAGING_PREFIX = ".open-"

# the columns of a batch's change rows besides the table's own: the master Delta version a row
# comes from, and Delta's change type
VERSION_COLUMN = "wlc_version"
CHANGE_TYPE = "_change_type"
CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")  # Delta's _change_type values


def file_sha256(storage: Storage, path: str) -> tuple[int, str]:
    """``(size, SHA-256)`` of the file ``path``, read in 1 MiB chunks.

    Args:
        storage (Storage): the storage holding the file.
        path (str): the file.

    Returns:
        tuple[int, str]: its size in bytes and its SHA-256 as 64 hex digits.

    Raises:
        FileNotFoundError: ``path`` is not there.
    """
    h = hashlib.sha256()
    size = 0
    with storage.open_read(path) as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            size += len(chunk)
            h.update(chunk)
    return size, h.hexdigest()


# ----------------------------------------------------------------------------- writing


def _staging_prefix(dbname: str) -> str:
    return f"{STAGING_PREFIX}{dbname}-"


def open_staging(storage: Storage, logs: str, dbname: str, number: int) -> str:
    """Create a fresh staging folder for batch ``number`` of ``dbname`` inside ``logs``.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        dbname (str): the master database's name.
        number (int): the level-0 batch number it will be published as.

    Returns:
        str: ``<logs>/.open-<dbname>-<number, 12 digits>-<8 hex>``, made.
    """
    path = Storage.join(logs, f"{_staging_prefix(dbname)}{number:012d}-{uuid.uuid4().hex[:8]}")
    storage.makedirs(path)
    return path


def clear_staging(storage: Storage, logs: str, dbname: str) -> None:
    """Remove the staging folders of ``dbname`` left by a capture that stopped before publishing.

    Only that database's: masters may share a log folder. The caller holds the database's lock.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        dbname (str): the master database's name.
    """
    for name in storage.listdir(logs):
        if name.startswith(_staging_prefix(dbname)):
            storage.rm(Storage.join(logs, name))


def publish(storage: Storage, logs: str, staging: str, manifest: Manifest) -> str:
    """Checksum the staged files, write the manifest last, and publish the folder at once
    (:meth:`wlcore.storage.Storage.publish_dir`: one rename, or a commit marker written last).

    Spark's hidden ``.crc`` files and ``_SUCCESS`` markers are deleted first; every other
    file is listed in the manifest with its size and SHA-256.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        staging (str): the staging folder holding the batch's files (:func:`open_staging`).
        manifest (Manifest): the batch's manifest; its ``files`` are filled in here.

    Returns:
        str: the published batch's path (``<logs>/<manifest.folder>``).

    Raises:
        BatchError: the staging folder is gone.
        FileExistsError: the batch's name is taken (another capturer is running on the same master).
    """
    if not storage.isdir(staging):
        raise BatchError(
            f"the staging folder {staging} of batch {manifest.batch} is gone (removed by another "
            "process?); its change rows are lost: restart capture, which captures them again"
        )
    files: dict[str, FileEntry] = {}
    for rel in storage.walk_files(staging):
        if rel == MANIFEST or rel.rsplit("/", 1)[-1].startswith("."):
            if rel != MANIFEST:  # Spark's hidden .crc files: not part of the batch
                storage.rm(Storage.join(staging, rel))
            continue
        if rel.endswith("_SUCCESS"):
            storage.rm(Storage.join(staging, rel))
            continue
        size, digest = file_sha256(storage, Storage.join(staging, rel))
        files[rel] = FileEntry(size, digest)
    manifest.files = files
    storage.write_atomic(Storage.join(staging, MANIFEST), manifest.to_bytes())
    final = Storage.join(logs, manifest.folder)
    storage.publish_dir(staging, final)
    return final


# ----------------------------------------------------------------------------- reading


def list_batches(storage: Storage, logs: str, dbname: str, start: int = 0) -> list[tuple[int, str]]:
    """Published level-0 batches of ``dbname`` in ``logs``.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        dbname (str): the master database's name.
        start (int): the lowest batch number to list.

    Returns:
        list[tuple[int, str]]: ``[(number, path)]``, ascending; ``[]`` when ``logs`` is missing.
    """
    pattern = re.compile(rf"^{re.escape(dbname)}_(\d{{12}})$")
    out = []
    for name in storage.published(logs):
        m = pattern.match(name)
        if m and int(m.group(1)) >= start:
            out.append((int(m.group(1)), Storage.join(logs, name)))
    return sorted(out)


def list_compacted(storage: Storage, logs: str, dbname: str) -> list[tuple[int, int, int, str]]:
    """Published compacted batches (levels 1 and 2) of ``dbname`` in ``logs``.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the logs folder.
        dbname (str): the master database's name.

    Returns:
        list[tuple[int, int, int, str]]: ``[(level, first batch, last batch, path)]`` ordered by
        first batch, then level.
    """
    pattern = re.compile(rf"^{re.escape(dbname)}_L(\d)_(\d{{12}})_(\d{{12}})$")
    out = []
    for name in storage.published(logs):
        m = pattern.match(name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), Storage.join(logs, name)))
    return sorted(out, key=lambda t: (t[1], t[0], t[2]))


def read_manifest(storage: Storage, batch_path: str) -> Manifest:
    """Read and check a batch's manifest (:meth:`Manifest.from_bytes`: format, version, checksum).

    Args:
        storage (Storage): the storage holding the batch.
        batch_path (str): the batch's folder.

    Returns:
        Manifest: the manifest.

    Raises:
        BatchError: the manifest is missing or damaged.
    """
    try:
        raw = storage.read_bytes(Storage.join(batch_path, MANIFEST))
    except FileNotFoundError as exc:
        raise BatchError(f"{batch_path}: manifest.json is missing; the batch is damaged") from exc
    return Manifest.from_bytes(raw, batch_path)


def verify_files(
    storage: Storage, batch_path: str, manifest: Manifest, prefixes: Iterable[str] | None = None
) -> dict[str, str]:
    """Check listed files (all, or those under ``prefixes``) against size and SHA-256.

    Args:
        storage (Storage): the storage holding the batch.
        batch_path (str): the batch's folder.
        manifest (Manifest): its manifest (:func:`read_manifest`).
        prefixes (Iterable[str] | None): folders relative to the batch (``rows/s.t``) to check
            only; None: every listed file.

    Returns:
        dict[str, str]: ``{relative path: problem}``, empty when everything is intact. Files present
        under a checked prefix but not listed count as problems too (they would be read).
    """
    prefixes = list(prefixes) if prefixes is not None else None
    folders = None if prefixes is None else {p.rstrip("/") for p in prefixes}

    def wanted(rel: str) -> bool:  # a folder of the file's is checked (one lookup a level, not one a prefix)
        if folders is None:
            return True
        parts = rel.split("/")
        return any("/".join(parts[:i]) in folders for i in range(1, len(parts)))

    problems: dict[str, str] = {}
    for rel, entry in manifest.files.items():
        if not wanted(rel):
            continue
        path = Storage.join(batch_path, rel)
        try:
            size, digest = file_sha256(storage, path)
        except FileNotFoundError:
            problems[rel] = "missing"
            continue
        if size != entry.size:
            problems[rel] = f"size {size} bytes, expected {entry.size} (truncated or extended)"
        elif digest != entry.sha256:
            problems[rel] = "SHA-256 mismatch"
    for prefix in prefixes or []:
        for rel in storage.walk_files(Storage.join(batch_path, prefix)):
            full = f"{prefix.rstrip('/')}/{rel}"
            if full not in manifest.files and not rel.rsplit("/", 1)[-1].startswith("."):
                problems[full] = "not listed in the manifest (added after publishing)"
    return problems
