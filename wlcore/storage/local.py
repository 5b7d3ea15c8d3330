"""Local and network-mounted folders: crash-safe writes the Litestream way (write aside,
fsync, rename, fsync the folder), a folder published by one rename, file locks (filelock)."""

from __future__ import annotations

import os
import posixpath
import shutil
from typing import Callable, Iterable

from filelock import FileLock, Timeout

from ..errors import LockHeldError
from ..watch import FolderWatch
from .base import FileStat, Storage
from .lock import HeldLock

_ASIDE = ".pruned-"  # the hidden name prefix a folder is renamed to before it is deleted (unpublish)


class LocalStorage(Storage):
    """Files on a local or mounted folder (fsspec's ``LocalFileSystem``)."""

    local = True

    def same_filesystem(self, other: Storage) -> bool:
        """True for another :class:`LocalStorage` (every local path is one filesystem)."""
        return isinstance(other, LocalStorage)

    def absolute(self, path: str) -> str:
        """``os.path.abspath`` (a URL is returned as it is)."""
        if "://" in path:
            return path
        return os.path.abspath(path)

    def uri(self, path: str) -> str:
        """``file://`` and the absolute path (a URL is returned as it is)."""
        if "://" in path:
            return path
        return "file://" + os.path.abspath(path)

    def url(self, path: str) -> str:
        """The path itself: a local path is its own URL."""
        return path

    # queries ------------------------------------------------------------------------
    def listdir(self, path: str) -> list[str]:
        """``os.listdir``, sorted; ``[]`` for a missing folder or a file."""
        try:
            return sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def subdirs(self, path: str) -> list[str]:
        """``os.scandir``'s folders, sorted; ``[]`` for a missing folder or a file."""
        try:
            with os.scandir(path) as it:
                return sorted(e.name for e in it if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def published(self, path: str) -> list[str]:
        """Every name not hidden: a folder appears here by one rename of its hidden staging folder."""
        return [n for n in self.listdir(path) if not n.startswith(".")]

    def is_published(self, path: str) -> bool:
        """The folder exists: a local folder is published by the rename that made it."""
        return os.path.exists(path)

    def walk_files(self, path: str) -> Iterable[str]:
        """Every file below ``path`` relative to it, sorted (hidden files too)."""
        out = []
        for root, _dirs, files in self.fs.walk(path):
            for name in files:
                out.append(posixpath.relpath(posixpath.join(root, name), path))
        return sorted(out)

    def tree_size(self, path: str) -> int:
        """``os.walk``'s file sizes added up (a file: its size; missing: 0)."""
        if os.path.isfile(path):
            return os.path.getsize(path)
        total = 0
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(root, name))
                except FileNotFoundError:
                    pass  # deleted meanwhile: counts 0
        return total

    def mtime_ms(self, path: str) -> int | None:
        """``os.stat``'s modification time in milliseconds (never None here)."""
        return os.stat(path).st_mtime_ns // 1_000_000

    def stat(self, path: str) -> FileStat:
        """One ``os.stat``: its size, and its modification time in milliseconds."""
        st = os.stat(path)
        return FileStat(st.st_size, st.st_mtime_ns // 1_000_000)

    def watcher(
        self,
        path: str,
        *,
        recursive: bool,
        polling: bool,
        interval: float,
        accept: Callable[[str], bool] | None = None,
        create: bool = True,
    ) -> FolderWatch | None:
        """A :class:`wlcore.watch.FolderWatch` on ``path`` (None when it is missing and not
        ``create``); see :meth:`Storage.watcher`."""
        if not create and not os.path.isdir(path):
            return None
        if accept is None:
            return FolderWatch(path, recursive=recursive, polling=polling, interval=interval)
        return FolderWatch(path, recursive=recursive, polling=polling, interval=interval, accept=accept)

    # writes -------------------------------------------------------------------------
    def write_atomic(self, path: str, data: bytes | str) -> None:
        """Write aside, fsync, rename over ``path``, fsync the folder (Litestream's way)."""
        parent, tmp, data = self._aside(path, data)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self.fsync_dir(parent)

    def append_text(self, path: str, text: str) -> None:
        """``open(path, "a")``: one write at the end of the file."""
        self.makedirs(posixpath.dirname(path) or ".")
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)

    def rename(self, src: str, dst: str) -> None:
        """``os.rename`` (atomic on one filesystem), then the target folder fsynced."""
        if os.path.exists(dst):
            raise FileExistsError(dst)
        os.rename(src, dst)
        self.fsync_dir(posixpath.dirname(dst))

    def publish_dir(self, staging: str, final: str) -> None:
        """fsync everything below ``staging``, then one rename to ``final``."""
        self.fsync_tree(staging)
        self.rename(staging, final)

    def mark_published(self, path: str) -> None:
        """Nothing: a local folder is visible as it is written."""

    def unpublish(self, path: str) -> None:
        """Renames the folder aside to the hidden ``.pruned-<name>`` (one rename: readers see
        it whole or not at all), then deletes it; a leftover of an interrupted try at that
        name, never read, is deleted first."""
        if not os.path.lexists(path):
            return
        parent, name = posixpath.split(path.rstrip("/"))
        aside = posixpath.join(parent, f"{_ASIDE}{name}")
        self.rm(aside)
        self.rename(path, aside)
        self.rm(aside)

    def staging_for(self, final: str, tag: str) -> str:
        """A hidden sibling ``.<tag>-<name>`` (resumed by the next try)."""
        parent, name = posixpath.split(final.rstrip("/"))
        return posixpath.join(parent, f".{tag}-{name}")

    def fsync_dir(self, path: str) -> None:
        """fsync the folder ``path`` (its entries made durable); a failure is ignored (some filesystems refuse)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def fsync_tree(self, path: str) -> None:
        """fsync every file and folder below ``path``."""
        for root, _dirs, files in os.walk(path):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self.fsync_dir(root)

    def copy_tree(self, src: str, dst: str) -> None:
        """``shutil.copytree`` (the target must not exist)."""
        shutil.copytree(src, dst)

    # copies between stores ----------------------------------------------------------
    def copy_file_to(self, path: str, dst: Storage, dst_path: str) -> int:
        """Hands the copy to ``dst`` (:meth:`put_local_file`): it knows how to take a local file."""
        return dst.put_local_file(path, dst_path)

    def put_local_file(self, local_path: str, path: str) -> int:
        """``shutil.copyfile`` into place, parent folders created."""
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        shutil.copyfile(local_path, path)
        return os.path.getsize(path)

    def get_remote_file(self, src: Storage, src_path: str, path: str) -> int:
        """Downloads by ``src``'s fsspec ``get_file``, parent folders created."""
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        src.fs.get_file(src_path, path)
        return os.path.getsize(path)

    # locks --------------------------------------------------------------------------
    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """A file lock (``flock`` through the filelock library): the OS lets go of it when the
        holding process ends, however it ends. The lock file is created when missing and left
        after release; taking the lock writes nothing into it (a probe that takes and releases
        the lock changes nothing). See :meth:`Storage.lock` for the contract."""
        self.makedirs(posixpath.dirname(path) or ".")
        lock = FileLock(path, thread_local=False)
        wait = (-1 if timeout is None else timeout) if blocking else 0
        try:
            lock.acquire(timeout=wait)
        except Timeout:
            raise LockHeldError(path, what) from None
        return HeldLock(path, lock.release)
