"""The storage interface: every file wlc and wlr write outside Delta tables goes through it.

As Litestream's ``ReplicaClient``, one interface and one implementation per kind of store,
each method's error contract stated here and kept by every implementation:

* :class:`wlcore.storage.local.LocalStorage`: local and network-mounted folders; writes are
  crash-safe the Litestream way (write aside, fsync, rename, fsync the folder); a folder is
  published by one rename; locks are file locks (the ``filelock`` library).
* :class:`wlcore.storage.remote.RemoteStorage`: any other filesystem fsspec knows, where
  rename is not atomic: a published folder ``X`` is visible only once its commit marker
  ``X.committed``, written last beside it, exists; it cannot hold locks.
* :class:`wlcore.storage.remote.ObjectStorage`: object stores, where one PUT replaces an
  object whole; locks are leases taken by conditional writes where the store has them
  (:class:`wlcore.storage.s3.S3Storage`), else refused.

Paths are strings as fsspec takes them (a local path, or ``s3://bucket/key``). Unless a
method says otherwise, a store that cannot be reached raises ``OSError``.
"""

from __future__ import annotations

import posixpath
import uuid
from abc import ABC, abstractmethod
from typing import IO, TYPE_CHECKING, Callable, Iterable, NamedTuple

import fsspec

if TYPE_CHECKING:
    from ..watch import FolderWatch

MARKER = ".committed"  # the commit marker of a published folder where rename is not atomic
OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "abfs", "az", "memory"}  # one PUT is atomic, rename is a copy


def protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    """The protocol names of the fsspec filesystem ``fs`` (e.g. ``{"s3", "s3a"}``)."""
    proto = fs.protocol
    return set(proto) if isinstance(proto, (tuple, list)) else {proto}


class FileStat(NamedTuple):
    """What one look at a file says (:meth:`Storage.stat`).

    Attributes:
        size (int): its size in bytes.
        mtime_ms (int | None): its modification time in whole milliseconds since the epoch,
            None when the store does not say.
        tag (str | None): what the store says of its contents (an object's ETag: S3's is the MD5
            of what one PUT wrote, so an object written again differs even in the same second and
            size); None on local folders.
    """

    size: int
    mtime_ms: int | None
    tag: str | None = None


class HeldLock:
    """An exclusive lock this process holds, until :meth:`release` or the end of its ``with``
    block; releasing twice is harmless.

    Args:
        path (str): the lock's file or object.
        release (Callable[[], None]): lets go of it (called once).
    """

    def __init__(self, path: str, release: Callable[[], None]):
        self.path = path
        self._release: Callable[[], None] | None = release

    @property
    def held(self) -> bool:
        """True until :meth:`release`."""
        return self._release is not None

    def release(self) -> None:
        """Let go of the lock (nothing when already released)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> "HeldLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Storage(ABC):
    """A filesystem plus helpers. ``Storage.of(path)`` picks the implementation from the path or URL.

    Attributes:
        fs (fsspec.AbstractFileSystem): the underlying filesystem.
        local (bool): a local or mounted folder (Spark and the OS read it directly).
        object_store (bool): one PUT replaces an object whole; rename is a copy.
        s3 (bool): an S3 or S3-compatible store (Spark reaches it as ``s3a://``).
        empty_folders (bool): a folder exists by itself, empty or not (local folders, most
            filesystems). False on object stores, where a folder is the common prefix of its
            objects: :meth:`makedirs` makes nothing, a missing folder looks like a new empty one.
    """

    local = False
    object_store = False
    s3 = False
    empty_folders = True

    def __init__(self, fs: fsspec.AbstractFileSystem):
        self.fs = fs

    @classmethod
    def of(cls, path: str) -> "Storage":
        """The storage of ``path`` (a folder or a URL such as ``s3://bucket/key``).

        S3 URLs use the ``storage.s3`` settings (endpoint, keys, region; empty: the AWS
        default chain), the same ones Spark's s3a is given (:func:`wlcore.session.s3a_conf`).

        Args:
            path (str): a local path or an fsspec URL.

        Returns:
            Storage: a :class:`LocalStorage`, :class:`S3Storage`, :class:`ObjectStorage` or
            :class:`RemoteStorage` over the filesystem fsspec gives for ``path``.

        Raises:
            ValueError: fsspec knows no filesystem for the URL's protocol.
            ImportError: the protocol's fsspec implementation is not installed.
        """
        # the package (wlcore.storage) picks the implementation: the interface imports none of them
        from . import storage_of

        return storage_of(path)

    @staticmethod
    def same(a: "Storage", b: "Storage") -> bool:
        """True when ``a`` and ``b`` reach the same filesystem (a copy between them is a plain copy)."""
        return a.same_filesystem(b)

    def same_filesystem(self, other: "Storage") -> bool:
        """True when ``other`` reaches the same filesystem as this storage."""
        return self.fs is other.fs

    # paths --------------------------------------------------------------------------
    @staticmethod
    def join(*parts: str) -> str:
        """``parts`` joined with ``/`` (POSIX rules: an absolute part restarts the path)."""
        return posixpath.join(*[str(p) for p in parts])

    def absolute(self, path: str) -> str:
        """``path`` (str, a path or URL on this storage) made absolute, as state files record it
        for other working folders: ``os.path.abspath`` on local folders, URLs as they are."""
        return path

    @abstractmethod
    def uri(self, path: str) -> str:
        """The path as Spark wants it (``file:`` URI for local folders, ``s3a://`` for S3)."""

    @abstractmethod
    def url(self, path: str) -> str:
        """The path as a URL fsspec opens again (``s3://bucket/key``; local paths as they are)."""

    # queries ------------------------------------------------------------------------
    def os_path(self, path: str) -> str | None:
        """``path`` (str) as this machine's file path (delta-rs and pyarrow open it); None on object stores."""
        return None

    def exists(self, path: str) -> bool:
        """True when a file or folder is at ``path`` (published or not)."""
        return self.fs.exists(path)

    def isdir(self, path: str) -> bool:
        """True when ``path`` is a folder (False when missing or a file)."""
        return self.fs.isdir(path)

    @abstractmethod
    def listdir(self, path: str) -> list[str]:
        """Base names in ``path``, sorted (empty when it does not exist or is a file)."""

    def listdir_after(self, path: str, after: str) -> list[str]:
        """Base names in ``path`` that sort after ``after``, sorted: what came since a name seen
        (a Delta log's commits after the last version read). Object stores list only those
        (S3's ``StartAfter``); elsewhere the folder is listed and filtered.

        Args:
            path (str): the folder.
            after (str): a base name (it need not exist).

        Returns:
            list[str]: the names, sorted; empty when the folder does not exist.
        """
        return [n for n in self.listdir(path) if n > after]

    @abstractmethod
    def subdirs(self, path: str) -> list[str]:
        """Base names of the folders in ``path``, sorted (empty when it does not exist)."""

    @abstractmethod
    def published(self, path: str) -> list[str]:
        """Base names in ``path`` that are published, sorted: names not hidden (staging
        folders are) whose folder appeared whole (see :meth:`publish_dir`); empty when
        ``path`` does not exist."""

    @abstractmethod
    def is_published(self, path: str) -> bool:
        """True when the folder or file ``path`` is published (see :meth:`published`)."""

    def open_read(self, path: str) -> IO[bytes]:
        """The file ``path`` opened to read bytes in pieces, in a ``with`` block: fsspec's
        ``open`` on every store (an object is read by ranged GETs as the reader goes).

        Args:
            path (str): the file.

        Returns:
            IO[bytes]: a binary file object, positioned at the start.

        Raises:
            FileNotFoundError: ``path`` is not there.
            OSError: the store cannot be reached.
        """
        return self.fs.open(path, "rb")

    def read_bytes(self, path: str) -> bytes:
        """The whole file ``path``. Raises FileNotFoundError when it is not there."""
        with self.open_read(path) as fh:
            return fh.read()

    def read_text(self, path: str) -> str:
        """The file ``path`` decoded as UTF-8. Raises FileNotFoundError when it is not there,
        UnicodeDecodeError when it is not UTF-8."""
        return self.read_bytes(path).decode("utf-8")

    @abstractmethod
    def walk_files(self, path: str) -> Iterable[str]:
        """Every file below ``path``, as paths relative to it, sorted (empty when missing)."""

    @abstractmethod
    def tree_size(self, path: str) -> int:
        """The bytes in the files below the folder ``path``, hidden ones too (a file: its size;
        nothing there: 0), e.g. what ``wlc prune`` frees. Local folders add up ``os.walk``'s
        sizes; other stores those of one recursive listing (fsspec ``du``), reading no file.
        A file deleted meanwhile counts 0.

        Args:
            path (str): the folder (or file).

        Returns:
            int: the total size in bytes.

        Raises:
            OSError: the store cannot be reached.
        """

    def size(self, path: str) -> int | None:
        """Size of the file ``path`` in bytes, None when it is not there."""
        try:
            return int(self.fs.size(path))
        except (FileNotFoundError, OSError):
            return None

    @abstractmethod
    def mtime_ms(self, path: str) -> int | None:
        """Modification time of the file ``path`` in whole milliseconds since the epoch (as
        Hadoop's ``FileStatus.getModificationTime``), None when the store does not say.
        Raises FileNotFoundError when it is not there."""

    def watcher(
        self,
        path: str,
        *,
        recursive: bool,
        polling: bool,
        interval: float,
        accept: Callable[[str], bool] | None = None,
        create: bool = True,
        skip: tuple[str, ...] = (),
    ) -> "FolderWatch | None":
        """A watcher whose ``wait(timeout)`` returns early on a change in the folder ``path``:
        a :class:`wlcore.watch.FolderWatch` on local folders (watchdog's events, or its
        polling observer); None on object stores and other fsspec filesystems, which send no
        events: the caller polls them (waits by timeout only).

        Args:
            path (str): the folder to watch.
            recursive (bool): watch its sub-folders too.
            polling (bool): look every ``interval`` rather than wait for the OS's events.
            interval (float): seconds between the polling observer's looks.
            accept (Callable[[str], bool] | None): which changed paths wake a waiter (None: all).
            create (bool): make the folder when missing (False: None when it is missing).
            skip (tuple[str, ...]): names of the folder's own sub-folders not watched (with
                ``recursive``): folders of files only the watcher's owner writes.

        Returns:
            FolderWatch | None: the watcher (close it with ``close()``), or None: poll.

        Raises:
            OSError: ``create`` and the folder cannot be made.
        """
        return None

    @abstractmethod
    def stat(self, path: str) -> FileStat:
        """Size and modification time of the file ``path`` from one look (``os.stat``; one
        fsspec ``info``, a HEAD on S3), where :meth:`size` and :meth:`mtime_ms` make two.

        Args:
            path (str): the file.

        Returns:
            FileStat: ``size`` in bytes and ``mtime_ms`` as :meth:`mtime_ms` gives it.

        Raises:
            FileNotFoundError: ``path`` is not there.
            OSError: the store cannot be reached.
        """

    # writes -------------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        """Create the folder ``path`` and its parents (nothing when it exists)."""
        self.fs.makedirs(path, exist_ok=True)

    def _aside(self, path: str, data: bytes | str) -> tuple[str, str, bytes]:
        """For a write of ``data`` (text as UTF-8) over ``path``: its folder (made), a hidden
        name beside it to write first, and the bytes."""
        parent = posixpath.dirname(path)
        self.makedirs(parent)
        tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
        return parent, tmp, data.encode("utf-8") if isinstance(data, str) else data

    @abstractmethod
    def write_atomic(self, path: str, data: bytes | str, durable: bool = True) -> None:
        """Write ``data`` (str: as UTF-8) to ``path`` so that readers see the old file or the
        whole new one; the parent folder is created when missing. ``durable`` False: a cache a
        crash may lose or leave empty (Delta's version checksum), not synced to disk."""

    @abstractmethod
    def append_text(self, path: str, text: str) -> None:
        """Add ``text`` (UTF-8) at the end of the file ``path``, made (parent folder too) when
        missing: the event logs ``wlc.log`` and ``wlr.log``, a few lines an hour.

        Local folders append in place. An object cannot be appended to: it is read and
        written again whole (a GET and a PUT, growing with the log). On S3 the PUT is
        conditional on the ETag read, retried on a change, so no process loses a line;
        elsewhere appends of one process take turns, but two processes appending at once
        can lose a line (last write wins). No reader sees a line half written.

        Args:
            path (str): the log file.
            text (str): what to add, newline included.

        Raises:
            OSError: the store cannot be reached or written.
        """

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Rename a file or folder. Raises FileExistsError when ``dst`` exists (a published
        name is never overwritten), FileNotFoundError when ``src`` does not."""

    @abstractmethod
    def publish_dir(self, staging: str, final: str) -> None:
        """Make the complete folder ``staging`` visible as ``final`` at once. Raises
        FileExistsError when ``final`` is published."""

    @abstractmethod
    def mark_published(self, path: str) -> None:
        """Publish the complete folder ``path``, written in place rather than staged (e.g. the
        first snapshot); nothing when it is published already. Local folders: nothing (a
        folder is visible as it is written; to appear whole, stage it: :meth:`publish_dir`).
        Where rename is not atomic: its commit marker is written (:meth:`published`).

        Args:
            path (str): the folder, complete.

        Raises:
            OSError: the store cannot be reached or written.
        """

    @abstractmethod
    def unpublish(self, path: str) -> None:
        """Delete the published folder ``path``: readers stop seeing it first, then its files
        go, so a reader sees it whole or not at all (nothing when it is not there).

        Local folders are renamed aside to a hidden sibling first (one atomic rename), then
        deleted; where rename is not atomic the commit marker goes first, then the files.

        Raises:
            OSError: the store cannot be reached, or a file cannot be deleted (what is left
                is hidden or unmarked: never seen as published again).
        """

    @abstractmethod
    def staging_for(self, final: str, tag: str) -> str:
        """Where to assemble the folder ``final`` before :meth:`publish_dir` (``tag``: a
        short word naming the writer, e.g. ``ship``); a later try resumes there."""

    def fsync_dir(self, path: str) -> None:  # noqa: B027 (a default that does nothing: object stores)
        """Make the entries of folder ``path`` durable where the store needs it (errors ignored)."""

    def fsync_tree(self, path: str) -> None:  # noqa: B027 (a default that does nothing: object stores)
        """Make every file below ``path`` durable where the store needs it, before a publish."""

    def rm(self, path: str) -> None:
        """Delete the file or folder ``path`` and all below it (nothing when it is not there)."""
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    @abstractmethod
    def copy_tree(self, src: str, dst: str) -> None:
        """Copy the folder ``src`` to ``dst`` on this storage (``dst`` must not exist; on
        local storage FileExistsError when it does)."""

    # copies between stores (double dispatch: the source picks how, the destination writes)
    @abstractmethod
    def copy_file_to(self, path: str, dst: "Storage", dst_path: str) -> int:
        """Copy the file ``path`` to ``dst_path`` of ``dst``; returns the bytes copied.
        Raises FileNotFoundError when ``path`` is not there."""

    @abstractmethod
    def put_local_file(self, local_path: str, path: str) -> int:
        """Copy the local file ``local_path`` to ``path`` here; returns the bytes copied."""

    @abstractmethod
    def get_remote_file(self, src: "Storage", src_path: str, path: str) -> int:
        """Copy the file ``src_path`` of the non-local ``src`` to ``path`` here; returns the
        bytes copied."""

    # locks --------------------------------------------------------------------------
    @abstractmethod
    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """Take the exclusive lock ``path`` (a file beside the data it guards) across processes
        and hosts that share this storage; the parent folder is created when missing.

        Args:
            path (str): the lock's file or object.
            blocking (bool): wait for another holder to let go (False: one try).
            timeout (float | None): seconds to wait when ``blocking``; None waits for ever.
            what (str): what the lock guards, for messages (e.g. ``"capture of db"``).

        Returns:
            HeldLock: the lock, held; release it with ``release()`` or a ``with`` block.

        Raises:
            LockHeldError: another process holds it (and the wait, if any, ran out).
            LockUnsupportedError: this storage cannot hold a lock (never done unlocked).
        """


def copy_file(src: Storage, src_path: str, dst: Storage, dst_path: str) -> int:
    """Copy one file between two filesystems (or within one).

    Args:
        src (Storage): the storage holding the file.
        src_path (str): the file there.
        dst (Storage): the storage to copy it to (the same as ``src`` or another).
        dst_path (str): its path there (replaced when it exists).

    Returns:
        int: the bytes copied.

    Raises:
        FileNotFoundError: ``src_path`` is not there (deleted meanwhile).
        OSError: either filesystem cannot be reached or written.
    """
    return src.copy_file_to(src_path, dst, dst_path)


def copy_tree(src: Storage, src_path: str, dst: Storage, dst_path: str) -> int:
    """Copy the folder ``src_path`` of ``src`` to ``dst_path`` of ``dst`` (any two
    filesystems).

    Args:
        src (Storage): the storage holding the folder.
        src_path (str): the folder there.
        dst (Storage): the storage to copy it to.
        dst_path (str): the new folder there.

    Returns:
        int: the bytes copied (0 when both are local: one ``copytree``).

    Raises:
        FileNotFoundError: a file of ``src_path`` went meanwhile.
        FileExistsError: both are local and ``dst_path`` exists.
        OSError: either filesystem cannot be reached or written.
    """
    if Storage.same(src, dst):
        dst.copy_tree(src_path, dst_path)
        return 0
    total = 0
    for rel in src.walk_files(src_path):
        total += copy_file(src, Storage.join(src_path, rel), dst, Storage.join(dst_path, rel))
    return total
