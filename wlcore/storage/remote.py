"""Filesystems where rename is not atomic (object stores, other fsspec filesystems): a published
folder ``X`` is visible only once its commit marker ``X.committed``, written last beside it,
exists. Locks: leases on object stores that offer conditional writes, else refused."""

from __future__ import annotations

import os
import posixpath
import shutil
import threading
from typing import Iterable

from ..errors import LockUnsupportedError
from .base import MARKER, FileStat, HeldLock, Storage, protocols

_appends = threading.Lock()  # append_text's read-modify-write: one at a time in this process


class RemoteStorage(Storage):
    """Any fsspec filesystem that is neither local nor an object store (rename is a copy or
    not atomic; writes go aside then move). It holds no locks."""

    def _proto(self) -> str:
        return sorted(protocols(self.fs))[0]

    def uri(self, path: str) -> str:
        """The path with the filesystem's protocol (``<proto>://path``) when it has none.

        Args:
            path (str): a path on this filesystem, with or without its protocol.

        Returns:
            str: the URL Spark and fsspec read.
        """
        if "://" not in path:
            return f"{self._proto()}://{path.lstrip('/')}"
        return path

    def url(self, path: str) -> str:
        """As :meth:`uri`: the path with the filesystem's protocol when it has none.

        Args:
            path (str): a path on this filesystem, with or without its protocol.

        Returns:
            str: the URL fsspec opens again.
        """
        if "://" in path:
            return path
        return f"{self._proto()}://{path.lstrip('/')}"

    # queries ------------------------------------------------------------------------
    def listdir(self, path: str) -> list[str]:
        """fsspec ``ls``'s base names, sorted; ``[]`` for a missing folder.

        Args:
            path (str): the folder (prefix).

        Returns:
            list[str]: the base names of its entries, commit markers and hidden names too.
        """
        try:
            return sorted(posixpath.basename(p.rstrip("/")) for p in self.fs.ls(path, detail=False))
        except FileNotFoundError:
            return []

    def subdirs(self, path: str) -> list[str]:
        """fsspec ``ls`` entries of type ``directory``, sorted; ``[]`` for a missing folder.

        Args:
            path (str): the folder (prefix).

        Returns:
            list[str]: the base names of the folders in it.
        """
        try:
            return sorted(
                posixpath.basename(i["name"].rstrip("/"))
                for i in self.fs.ls(path, detail=True)
                if i["type"] == "directory"
            )
        except FileNotFoundError:
            return []

    def published(self, path: str) -> list[str]:
        """Names not hidden whose commit marker ``<name>.committed`` is there too (markers
        themselves are not listed).

        Args:
            path (str): the folder (prefix).

        Returns:
            list[str]: the published base names, sorted; ``[]`` when ``path`` is missing.
        """
        names = self.listdir(path)
        have = set(names)
        return [n for n in names if not n.startswith(".") and not n.endswith(MARKER) and n + MARKER in have]

    def is_published(self, path: str) -> bool:
        """The commit marker ``<path>.committed`` exists.

        Args:
            path (str): the folder or file.

        Returns:
            bool: its commit marker is there.
        """
        return self.fs.exists(path.rstrip("/") + MARKER)

    def walk_files(self, path: str) -> Iterable[str]:
        """fsspec ``walk`` below ``path``, names relative to it without the protocol, sorted.

        Args:
            path (str): the folder (prefix).

        Returns:
            Iterable[str]: the relative paths, sorted; empty when ``path`` is missing.
        """
        base = self.fs._strip_protocol(path).rstrip("/")
        return sorted(posixpath.relpath(f, base) for f in self._files(path))

    def _files(self, path: str) -> list[str]:
        """Every file below the folder ``path`` (one recursive listing), without the empty
        ``<folder>/`` objects Hadoop's s3a writes as folder markers: on an object store a folder
        is the prefix of its objects, and such a key is no file of it (S3 has no ``<folder>``
        key to copy: ``NoSuchKey``)."""
        try:
            return [f for f in self.fs.find(path) if not f.endswith("/")]
        except FileNotFoundError:
            return []

    def tree_size(self, path: str) -> int:
        """fsspec ``du``: the sizes of one recursive listing added up (missing: 0)."""
        try:
            return int(self.fs.du(path, total=True, withdirs=False))
        except FileNotFoundError:
            return 0

    def mtime_ms(self, path: str) -> int | None:
        """From fsspec ``info`` (``mtime``, ``LastModified`` or ``last_modified``).

        Args:
            path (str): the file or object.

        Returns:
            int | None: milliseconds since the epoch (1970-01-01 UTC); None when the store gives none.

        Raises:
            FileNotFoundError: nothing is at ``path``.
        """
        return _mtime_ms(self.fs.info(path))

    def stat(self, path: str) -> FileStat:
        """One fsspec ``info``: its ``size``, its time as :meth:`mtime_ms` reads it, and its
        ETag where the store gives one."""
        info = self.fs.info(path)
        tag = info.get("ETag") or info.get("etag")
        return FileStat(int(info["size"]), _mtime_ms(info), str(tag) if tag else None)

    def read_bytes(self, path: str) -> bytes:
        """The whole object in one fsspec ``cat_file`` (one GET). An object replaced while it is
        read (``wlc.config`` rewritten by a shipper) gives the old or the new contents whole;
        opening it and reading would ask for a range of the ETag seen at the open and fail
        with ``FileExpired``. Raises FileNotFoundError when it is not there."""
        return self.fs.cat_file(path)

    # writes -------------------------------------------------------------------------
    def write_atomic(self, path: str, data: bytes | str, durable: bool = True) -> None:
        """Write a hidden file aside, then move it over ``path``.

        Args:
            path (str): the file to write (replaced when it exists).
            data (bytes | str): the whole new contents; text is written as UTF-8.
            durable (bool): unused (the store keeps what it accepted).
        """
        parent, tmp, data = self._aside(path, data)
        with self.fs.open(tmp, "wb") as fh:
            fh.write(data)
        self.fs.mv(tmp, path)

    def append_text(self, path: str, text: str) -> None:
        """Reads the file whole and writes it again with ``text`` at the end
        (:meth:`write_atomic`), one append of this process at a time."""
        with _appends:
            try:
                old = self.read_bytes(path)
            except FileNotFoundError:
                old = b""
            self.write_atomic(path, old + text.encode("utf-8"))

    def rename(self, src: str, dst: str) -> None:
        """fsspec ``mv`` (a copy then a delete on most stores: not atomic).

        Args:
            src (str): the file or folder to rename.
            dst (str): its new path.

        Raises:
            FileExistsError: something is at ``dst`` already.
            FileNotFoundError: nothing is at ``src``.
        """
        if self.fs.exists(dst):
            raise FileExistsError(dst)
        self._move(src, dst)

    def _move(self, src: str, dst: str) -> None:
        """Copy the file or every file below the folder ``src`` to the same place below ``dst``,
        then delete ``src``: fsspec's recursive ``mv`` copies the folder's own key too, which an
        object store does not have (S3: ``NoSuchKey``)."""
        if not self.fs.isdir(src):
            self.fs.mv(src, dst)
            return
        base = self.fs._strip_protocol(src).rstrip("/")
        files = self._files(src)
        if files:
            self.fs.copy(files, [dst.rstrip("/") + f[len(base) :] for f in files])
        self.fs.rm(src, recursive=True)

    def publish_dir(self, staging: str, final: str) -> None:
        """A move (skipped when ``staging`` is ``final``), then the commit marker written last.

        Args:
            staging (str): the complete folder (:meth:`staging_for`: ``final`` itself here).
            final (str): the name readers see once its marker ``<final>.committed`` is written.

        Raises:
            FileExistsError: ``final`` is published already (its marker is there).
        """
        if self.is_published(final):
            raise FileExistsError(final)
        if staging.rstrip("/") != final.rstrip("/"):
            self.rm(final)  # what a move cut short left there: never published, never read
            self._move(staging, final)
        self.fs.pipe_file(final.rstrip("/") + MARKER, b"")

    def mark_published(self, path: str) -> None:
        """Writes the commit marker ``<path>.committed`` when it is not there yet."""
        if not self.is_published(path):
            self.fs.pipe_file(path.rstrip("/") + MARKER, b"")

    def unpublish(self, path: str) -> None:
        """The commit marker first (readers stop seeing it), then the files.

        Args:
            path (str): the published folder; nothing is done when it is missing.
        """
        marker = path.rstrip("/") + MARKER
        if self.fs.exists(marker):
            self.fs.rm(marker)
        self.rm(path)

    def staging_for(self, final: str, tag: str) -> str:
        """``final`` itself: invisible until its marker is written.

        Args:
            final (str): the folder to publish.
            tag (str): the writer's word (unused here: the folder needs no hidden name).

        Returns:
            str: ``final``.
        """
        return final

    def copy_tree(self, src: str, dst: str) -> None:
        """fsspec ``copy``, recursive, within this filesystem.

        Args:
            src (str): the folder to copy.
            dst (str): the new folder (should not exist: files there are overwritten, others kept).
        """
        self.fs.copy(src, dst, recursive=True)

    # copies between stores ----------------------------------------------------------
    def copy_file_to(self, path: str, dst: Storage, dst_path: str) -> int:
        """Hands the copy to ``dst`` (:meth:`get_remote_file`): it streams from this store.

        Args:
            path (str): the file here.
            dst (Storage): the storage to copy it to.
            dst_path (str): its path there.

        Returns:
            int: the bytes copied.

        Raises:
            FileNotFoundError: ``path`` is not there.
        """
        return dst.get_remote_file(self, path, dst_path)

    def put_local_file(self, local_path: str, path: str) -> int:
        """fsspec ``put_file``.

        Args:
            local_path (str): the local file to upload.
            path (str): its path here (replaced when it exists).

        Returns:
            int: the bytes copied (the local file's size).
        """
        self.fs.put_file(local_path, path)
        return os.path.getsize(local_path)

    def get_remote_file(self, src: Storage, src_path: str, path: str) -> int:
        """Streams from ``src`` into this store in 4 MiB chunks.

        Args:
            src (Storage): the storage holding the file.
            src_path (str): the file there.
            path (str): its path here (replaced when it exists).

        Returns:
            int: the bytes copied (the written object's size).

        Raises:
            FileNotFoundError: ``src_path`` is not there.
        """
        with src.fs.open(src_path, "rb") as r, self.fs.open(path, "wb") as w:
            shutil.copyfileobj(r, w, 1 << 22)
        return int(self.fs.size(path))

    # locks --------------------------------------------------------------------------
    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """Refused: this filesystem has neither file locks nor conditional writes.

        Args:
            path (str): the lock's file.
            blocking (bool): ignored: no lock is ever taken.
            timeout (float | None): ignored (seconds).
            what (str): what the lock would guard, named by the error.

        Returns:
            HeldLock: never.

        Raises:
            LockUnsupportedError: always; the message names a local folder or S3 instead.
        """
        raise LockUnsupportedError(
            f"{what}: {self.url(path)} is on a {self._proto()} filesystem, which can hold "
            "no lock, and the work is not done unlocked; use a local or mounted folder, or "
            "an S3 store with conditional writes"
        )


class ObjectStorage(RemoteStorage):
    """An object store: one PUT replaces an object whole, so :meth:`write_atomic` is one PUT.
    Locks are leases (:class:`wlcore.storage.s3.Lease`) where the store offers conditional writes
    (:class:`wlcore.storage.s3.S3Storage`); this generic one refuses them."""

    object_store = True
    empty_folders = False  # a folder is the common prefix of its objects

    def write_atomic(self, path: str, data: bytes | str, durable: bool = True) -> None:
        """One PUT replaces the object whole.

        Args:
            path (str): the object to write (replaced when it exists).
            data (bytes | str): the whole new contents; text is written as UTF-8.
            durable (bool): unused (the store keeps what it accepted).
        """
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.makedirs(posixpath.dirname(path))
        self.fs.pipe_file(path, data)

    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """Refused: a lease needs conditional writes (If-None-Match / If-Match), which wlc
        uses only on S3 stores (:meth:`wlcore.storage.s3.S3Storage.lock`).

        Args:
            path (str): the lock's object.
            blocking (bool): ignored: no lease is ever taken.
            timeout (float | None): ignored (seconds).
            what (str): what the lock would guard, named by the error.

        Returns:
            HeldLock: never.

        Raises:
            LockUnsupportedError: always; the message names a local folder or S3 instead.
        """
        raise LockUnsupportedError(
            f"{what}: {self.url(path)} is on a {self._proto()} object store, where wlc takes "
            "no lease (it needs S3's conditional writes), and the work is not done unlocked; "
            "use a local or mounted folder, or an S3 store"
        )


def _mtime_ms(info: dict) -> int | None:
    """Milliseconds since the epoch from an fsspec ``info`` (``mtime``, ``LastModified`` or
    ``last_modified``: a datetime or seconds); None when it gives none."""
    stamp = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
    if stamp is None:
        return None
    if hasattr(stamp, "timestamp"):
        return int(stamp.timestamp() * 1000)
    return int(float(stamp) * 1000)
