"""The log store: one database's log folder as a master, a shipped copy or a relay holds it.

A log folder holds the published batches of one database (or of several masters sharing a
folder, each batch named by its database): level-0 batches ``<db>_<number>``, one beat of a
master each, and compacted batches ``<db>_L<level>_<first>_<last>`` (levels 1 and 2,
:mod:`wlcore.levels`). A batch is staged in a hidden folder and published whole, by one rename
on local and mounted folders or by a commit marker written last on object stores
(:meth:`wlcore.storage.Storage.publish_dir`); readers see only published batches. The state
file (``wlc.config``) sits in the folder above the logs, the database's folder or the copy's
root, and the capture lock beside it.

:class:`LogStore` is what capture, shipping, compaction, pruning and replay use to reach it,
as Litestream's ``ReplicaClient`` is for its replicas: list the published batches (level 0 from a
number on, or the compacted ones), look one up by name, read its manifest, stage and publish a
batch, delete some, read and write the state file, take the lock. Its owner builds it once
(the master's record, its life cycle, the replica's set-up, a relay, a shipping pass) and passes it
on as a value. The difference
between a local folder and an object store lives in :class:`wlcore.storage.Storage`'s two
implementations (a file lock or a lease, a rename or a marker); the log store is the same on
both and passes one contract test on each. Batches are :class:`BatchRef` values.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from . import batch as batchfmt
from .batch import MANIFEST, STAGING_PREFIX, FileEntry, Manifest
from .errors import BatchError
from .levels import Span
from .state import LOCK_FILE, MasterState, read_master_state, write_master_state
from .storage import HeldLock, Storage

COMPACT_STAGING = ".compact-"  # the folder prefix a compacted batch is built in (capture's: STAGING_PREFIX)


@dataclass(frozen=True, order=True)
class BatchRef:
    """A published batch: level 0 (``first == last``: one beat's transactions) or a compacted
    batch of level 1 or 2 covering level-0 batches ``first..last``.

    Ordered by first batch, then level, then last batch: the order replay reads them in.

    Attributes:
        first (int): the first level-0 batch number it covers.
        level (int): 0, 1 or 2.
        last (int): the last level-0 batch number it covers.
        path (str): its folder (not compared).
    """

    first: int
    level: int
    last: int
    path: str = field(compare=False)

    @property
    def number(self) -> int:
        """A level-0 batch's number (its ``first``)."""
        return self.first

    @property
    def name(self) -> str:
        """The folder's base name (``<db>_<number>`` or ``<db>_L<level>_<first>_<last>``)."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]


class LogStore:
    """The log folder ``logs`` of database ``database`` on ``storage``, with the state file and
    lock in ``root`` (the database's folder, or a shipped copy's root).

    Args:
        storage (Storage): the storage holding it.
        root (str): the folder of ``wlc.config`` and ``wlc.lock``.
        logs (str): the log folder.
        database (str): the database's name its batches carry.
    """

    def __init__(self, storage: Storage, root: str, logs: str, database: str):
        self.storage = storage
        self.root = root
        self.logs = logs
        self.database = database
        self._level0 = re.compile(rf"^{re.escape(database)}_(\d{{12}})$")
        self._compacted = re.compile(rf"^{re.escape(database)}_L(\d)_(\d{{12}})_(\d{{12}})$")
        self._staging = f"{STAGING_PREFIX}{database}-"

    def batches(self, start: int = 0) -> list[BatchRef]:
        """The published level-0 batches numbered ``start`` or more, ascending (one listing).

        Args:
            start (int): the lowest batch number.

        Returns:
            list[BatchRef]: empty when the log folder is missing.
        """
        out = []
        for name in self.storage.published(self.logs):
            m = self._level0.match(name)
            if m and int(m.group(1)) >= start:
                n = int(m.group(1))
                out.append(BatchRef(n, 0, n, Storage.join(self.logs, name)))
        return sorted(out)

    def batch(self, number: int) -> BatchRef | None:
        """Level-0 batch ``number`` when it is published: one lookup by its name (a ``stat``, or
        one request on an object store), no listing; a follower near the end reads this way.

        Args:
            number (int): the batch number.

        Returns:
            BatchRef | None: the batch; None when it is not published (not yet, or pruned).
        """
        path = Storage.join(self.logs, batchfmt.batch_name(self.database, number))
        return BatchRef(number, 0, number, path) if self.storage.is_published(path) else None

    def compacted(self) -> list[BatchRef]:
        """The published compacted batches (levels 1 and 2), by first batch, then level (one listing).

        Returns:
            list[BatchRef]: empty when there are none.
        """
        out = []
        for name in self.storage.published(self.logs):
            m = self._compacted.match(name)
            if m:
                level, first, last = (int(g) for g in m.groups())
                out.append(BatchRef(first, level, last, Storage.join(self.logs, name)))
        return sorted(out)

    def manifest(self, batch: BatchRef | str) -> Manifest:
        """The batch's manifest, checked (format, version, checksum).

        Args:
            batch (BatchRef | str): a published batch, or its folder.

        Returns:
            Manifest: its manifest.

        Raises:
            BatchError: the manifest is missing or damaged.
        """
        return batchfmt.read_manifest(self.storage, batch if isinstance(batch, str) else batch.path)

    def stage(self, number: int, level: int = 0) -> str:
        """A new hidden staging folder, made: ``<logs>/.open-<database>-<number, 12 digits>-<8 hex>``
        for capture's level-0 batch ``number``, ``<logs>/.compact-<database>-L<level>-<number>-<8 hex>``
        for compaction's batch of ``level`` starting at level-0 batch ``number``.

        Args:
            number (int): the (first) level-0 batch number it will be published as.
            level (int): 0 for capture's batch; 1 or 2 for a compacted batch.

        Returns:
            str: the staging folder.
        """
        name = f"{number:012d}" if level == 0 else f"L{level}-{number:012d}"
        path = Storage.join(self.logs, f"{self._prefix(level)}{name}-{uuid.uuid4().hex[:8]}")
        self.storage.makedirs(path)
        return path

    def _prefix(self, level: int) -> str:
        return self._staging if level == 0 else f"{COMPACT_STAGING}{self.database}-"

    def clear_staging(self, level: int = 0) -> None:
        """Remove this database's staging folders left by a run that stopped before publishing:
        capture's (``level`` 0; the caller holds the capture lock) or compaction's (``level`` 1
        or 2, any; the caller holds the life-cycle lock). Other databases' in a shared folder stay.

        Args:
            level (int): 0 for capture's staging folders, above for compaction's.
        """
        prefix = self._prefix(level)
        for name in self.storage.listdir(self.logs):
            if name.startswith(prefix):
                self.storage.rm(Storage.join(self.logs, name))

    def discard(self, staging: str) -> None:
        """Remove one staging folder that will not be published (:meth:`stage`).

        Args:
            staging (str): the folder.
        """
        self.storage.rm(staging)

    def publish(self, staging: str, manifest: Manifest) -> BatchRef:
        """Checksum the staged files, write the manifest last, and publish the folder at once
        (:meth:`wlcore.storage.Storage.publish_dir`: one rename, or a commit marker written last).

        Spark's hidden ``.crc`` files and ``_SUCCESS`` markers are deleted first; every other
        file is listed in the manifest with its size and SHA-256.

        Args:
            staging (str): the staging folder holding the batch's files (:meth:`stage`).
            manifest (Manifest): the batch's manifest; its ``files`` are filled in here.

        Returns:
            BatchRef: the published batch (``<logs>/<manifest.folder>``).

        Raises:
            BatchError: the staging folder is gone.
            FileExistsError: the batch's name is taken (another capturer on the same master).
        """
        storage = self.storage
        if storage.empty_folders and not storage.isdir(staging):  # an object store has no empty folder to check
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
            size, digest = batchfmt.file_sha256(storage, Storage.join(staging, rel))
            files[rel] = FileEntry(size, digest)
        manifest.files = files
        storage.write_atomic(Storage.join(staging, MANIFEST), manifest.to_bytes())
        final = Storage.join(self.logs, manifest.folder)
        storage.publish_dir(staging, final)
        return BatchRef(manifest.batch, manifest.level, manifest.end_batch, final)

    def delete(self, batches: Iterable[BatchRef | Span]) -> None:
        """Delete published batches: each disappears whole for readers, then its files go
        (:meth:`wlcore.storage.Storage.unpublish`).

        Args:
            batches (Iterable[BatchRef | Span]): the batches.

        Raises:
            OSError: the store cannot be reached, or a file cannot be deleted.
        """
        for b in batches:
            self.storage.unpublish(b.path)

    def state(self) -> MasterState | None:
        """``wlc.config`` in the root (None: there is none)."""
        return read_master_state(self.storage, self.root)

    def write_state(self, cfg: MasterState) -> None:
        """Replace ``wlc.config`` in the root whole.

        Args:
            cfg (MasterState): the state to write.
        """
        write_master_state(self.storage, self.root, cfg)

    def lock(self, what: str, *, blocking: bool = False, timeout: float | None = None) -> HeldLock:
        """Take the capture lock ``<root>/wlc.lock`` (a file lock, or a lease on object stores).

        Args:
            what (str): what it guards, for messages (e.g. ``"capture of dw"``).
            blocking (bool): wait for another holder (False: one try).
            timeout (float | None): seconds to wait when ``blocking``; None waits for ever.

        Returns:
            HeldLock: the lock, held.

        Raises:
            LockHeldError: another process holds it (one try), or ``timeout`` passed.
        """
        return self.storage.lock(Storage.join(self.root, LOCK_FILE), blocking=blocking, timeout=timeout, what=what)
