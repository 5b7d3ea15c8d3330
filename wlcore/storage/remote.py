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
from .base import MARKER, FileStat, Storage, protocols
from .lock import HeldLock

_appends = threading.Lock()  # append_text's read-modify-write: one at a time in this process


class RemoteStorage(Storage):
    """Any fsspec filesystem that is neither local nor an object store (rename is a copy or
    not atomic; writes go aside then move). It holds no locks."""

    def _proto(self) -> str:
        return sorted(protocols(self.fs))[0]

    def uri(self, path: str) -> str:
        """The path with the filesystem's protocol (``<proto>://path``) when it has none."""
        if "://" not in path:
            return f"{self._proto()}://{path.lstrip('/')}"
        return path

    def url(self, path: str) -> str:
        """As :meth:`uri`: the path with the filesystem's protocol when it has none."""
        if "://" in path:
            return path
        return f"{self._proto()}://{path.lstrip('/')}"

    # queries ------------------------------------------------------------------------
    def listdir(self, path: str) -> list[str]:
        """fsspec ``ls``'s base names, sorted; ``[]`` for a missing folder."""
        try:
            return sorted(posixpath.basename(p.rstrip("/")) for p in self.fs.ls(path, detail=False))
        except FileNotFoundError:
            return []

    def subdirs(self, path: str) -> list[str]:
        """fsspec ``ls`` entries of type ``directory``, sorted; ``[]`` for a missing folder."""
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
        themselves are not listed)."""
        names = self.listdir(path)
        have = set(names)
        return [n for n in names if not n.startswith(".") and not n.endswith(MARKER) and n + MARKER in have]

    def is_published(self, path: str) -> bool:
        """The commit marker ``<path>.committed`` exists."""
        return self.fs.exists(path.rstrip("/") + MARKER)

    def walk_files(self, path: str) -> Iterable[str]:
        """fsspec ``walk`` below ``path``, names relative to it without the protocol, sorted."""
        out = []
        base = self.fs._strip_protocol(path).rstrip("/")
        for root, _dirs, files in self.fs.walk(path):
            for name in files:
                out.append(posixpath.relpath(posixpath.join(root, name), base))
        return sorted(out)

    def tree_size(self, path: str) -> int:
        """fsspec ``du``: the sizes of one recursive listing added up (missing: 0)."""
        try:
            return int(self.fs.du(path, total=True, withdirs=False))
        except FileNotFoundError:
            return 0

    def mtime_ms(self, path: str) -> int | None:
        """From fsspec ``info`` (``mtime``, ``LastModified`` or ``last_modified``); None when the store gives none."""
        return _mtime_ms(self.fs.info(path))

    def stat(self, path: str) -> FileStat:
        """One fsspec ``info``: its ``size``, and its time as :meth:`mtime_ms` reads it."""
        info = self.fs.info(path)
        return FileStat(int(info["size"]), _mtime_ms(info))

    # writes -------------------------------------------------------------------------
    def write_atomic(self, path: str, data: bytes | str) -> None:
        """Write a hidden file aside, then move it over ``path``."""
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
        """fsspec ``mv`` (a copy then a delete on most stores: not atomic)."""
        if self.fs.exists(dst):
            raise FileExistsError(dst)
        self.fs.mv(src, dst, recursive=True)

    def publish_dir(self, staging: str, final: str) -> None:
        """A move (skipped when ``staging`` is ``final``), then the commit marker written last."""
        if self.is_published(final):
            raise FileExistsError(final)
        if staging.rstrip("/") != final.rstrip("/"):
            self.rm(final)  # what a move cut short left there: never published, never read
            self.fs.mv(staging, final, recursive=True)
        self.fs.pipe_file(final.rstrip("/") + MARKER, b"")

    def mark_published(self, path: str) -> None:
        """Writes the commit marker ``<path>.committed`` when it is not there yet."""
        if not self.is_published(path):
            self.fs.pipe_file(path.rstrip("/") + MARKER, b"")

    def unpublish(self, path: str) -> None:
        """The commit marker first (readers stop seeing it), then the files."""
        marker = path.rstrip("/") + MARKER
        if self.fs.exists(marker):
            self.fs.rm(marker)
        self.rm(path)

    def staging_for(self, final: str, tag: str) -> str:
        """``final`` itself: invisible until its marker is written."""
        return final

    def copy_tree(self, src: str, dst: str) -> None:
        """fsspec ``copy``, recursive, within this filesystem."""
        self.fs.copy(src, dst, recursive=True)

    # copies between stores ----------------------------------------------------------
    def copy_file_to(self, path: str, dst: Storage, dst_path: str) -> int:
        """Hands the copy to ``dst`` (:meth:`get_remote_file`): it streams from this store."""
        return dst.get_remote_file(self, path, dst_path)

    def put_local_file(self, local_path: str, path: str) -> int:
        """fsspec ``put_file``; returns the local file's size."""
        self.fs.put_file(local_path, path)
        return os.path.getsize(local_path)

    def get_remote_file(self, src: Storage, src_path: str, path: str) -> int:
        """Streams from ``src`` into this store in 4 MiB chunks; returns the written object's size."""
        with src.fs.open(src_path, "rb") as r, self.fs.open(path, "wb") as w:
            shutil.copyfileobj(r, w, 1 << 22)
        return int(self.fs.size(path))

    # locks --------------------------------------------------------------------------
    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """Refused: this filesystem has neither file locks nor conditional writes."""
        raise LockUnsupportedError(
            f"{what}: {self.url(path)} is on a {self._proto()} filesystem, which can hold "
            "no lock, and the work is not done unlocked; use a local or mounted folder, or "
            "an S3 store with conditional writes"
        )


class ObjectStorage(RemoteStorage):
    """An object store: one PUT replaces an object whole, so :meth:`write_atomic` is one PUT.
    Locks are leases (:mod:`wlcore.storage.lease`) where the store offers conditional writes
    (:class:`wlcore.storage.s3.S3Storage`); this generic one refuses them."""

    object_store = True
    empty_folders = False  # a folder is the common prefix of its objects

    def write_atomic(self, path: str, data: bytes | str) -> None:
        """One PUT replaces the object whole."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.makedirs(posixpath.dirname(path))
        self.fs.pipe_file(path, data)

    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """Refused: a lease needs conditional writes (If-None-Match / If-Match), which wlc
        uses only on S3 stores."""
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
