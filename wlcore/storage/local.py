"""Local and network-mounted folders: crash-safe writes the Litestream way (write aside,
fsync, rename, fsync the folder), a folder published by one rename, file locks (filelock)."""

from __future__ import annotations

import os
import posixpath
import shutil
from typing import IO, Callable, Iterable

from filelock import FileLock, Timeout

from ..errors import LockHeldError
from ..watch import FolderWatch
from .base import FileStat, HeldLock, Storage

_ASIDE = ".pruned-"  # the hidden name prefix a folder is renamed to before it is deleted (unpublish)


class LocalStorage(Storage):
    """Files on a local or mounted folder (fsspec's ``LocalFileSystem``)."""

    local = True

    def same_filesystem(self, other: Storage) -> bool:
        """True when ``other`` (Storage) is a :class:`LocalStorage` too: every local path is one filesystem."""
        return isinstance(other, LocalStorage)

    def absolute(self, path: str) -> str:
        """``os.path.abspath`` (a URL is returned as it is)."""
        return path if "://" in path else os.path.abspath(path)

    def os_path(self, path: str) -> str | None:
        """``path`` (str) made absolute: the folder is this machine's (a ``file:`` URL loses its scheme)."""
        return os.path.abspath(path.removeprefix("file://"))

    def uri(self, path: str) -> str:
        """``path`` (str: a local path, relative or absolute, or a URL) as the ``file://`` URI
        Spark reads; a URL is returned as it is."""
        if "://" in path:
            return path
        return "file://" + os.path.abspath(path)

    def url(self, path: str) -> str:
        """``path`` unchanged: a local path is its own URL."""
        return path

    # queries ------------------------------------------------------------------------
    def listdir(self, path: str) -> list[str]:
        """``os.listdir``, sorted; ``[]`` for a missing folder or a file.

        Args:
            path (str): the folder.

        Returns:
            list[str]: the base names of its entries (hidden ones too), sorted.
        """
        try:
            return sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def subdirs(self, path: str) -> list[str]:
        """``os.scandir``'s folders, sorted; ``[]`` for a missing folder or a file.

        Args:
            path (str): the folder.

        Returns:
            list[str]: the base names of the folders in it, sorted.
        """
        try:
            with os.scandir(path) as it:
                return sorted(e.name for e in it if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def published(self, path: str) -> list[str]:
        """Every name not hidden: a folder appears here by one rename of its hidden staging folder.

        Args:
            path (str): the folder.

        Returns:
            list[str]: the base names not starting with ``.``, sorted; ``[]`` when ``path`` is missing.
        """
        return [n for n in self.listdir(path) if not n.startswith(".")]

    def is_published(self, path: str) -> bool:
        """The folder exists: a local folder is published by the rename that made it.

        Args:
            path (str): the folder or file.

        Returns:
            bool: something is at ``path``.
        """
        return os.path.exists(path)

    def walk_files(self, path: str) -> Iterable[str]:
        """Every file below ``path`` relative to it, sorted (hidden files too).

        Args:
            path (str): the folder.

        Returns:
            Iterable[str]: the relative paths (``/``-separated), sorted; empty when ``path`` is missing.
        """
        out, folders = [], [("", path)]  # os.scandir: a fifth of fsspec's walk for many small folders
        while folders:
            rel, folder = folders.pop()
            try:
                entries = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((rel + entry.name + "/", entry.path))
                else:
                    out.append(rel + entry.name)
        return sorted(out)

    def open_read(self, path: str) -> IO[bytes]:
        """The file ``path`` opened to read bytes: Python's ``open``, half of fsspec's cost for the
        many small files replay verifies. Raises FileNotFoundError when it is not there."""
        return open(path, "rb")

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
        """``os.stat``'s modification time in milliseconds (never None here).

        Args:
            path (str): the file.

        Returns:
            int: milliseconds since the epoch (1970-01-01 UTC), truncated.

        Raises:
            FileNotFoundError: nothing is at ``path``.
        """
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
        skip: tuple[str, ...] = (),
    ) -> FolderWatch | None:
        """A :class:`wlcore.watch.FolderWatch` on ``path`` (None when it is missing and not
        ``create``); see :meth:`Storage.watcher`."""
        if not create and not os.path.isdir(path):
            return None
        return FolderWatch(
            path, recursive=recursive, polling=polling, interval=interval, accept=accept or (lambda p: True), skip=skip
        )

    # writes -------------------------------------------------------------------------
    def write_atomic(self, path: str, data: bytes | str, durable: bool = True) -> None:
        """Write aside, fsync, rename over ``path``, fsync the folder (Litestream's way).

        Args:
            path (str): the file to write (replaced when it exists; its folder made when missing).
            data (bytes | str): the whole new contents; text is written as UTF-8.
            durable (bool): False: no fsync (a cache a crash may lose or leave empty; 1 ms less).

        Raises:
            OSError: the folder cannot be written (the hidden file aside may be left behind).
        """
        parent, tmp, data = self._aside(path, data)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if durable:
            self.fsync_dir(parent)

    def append_text(self, path: str, text: str) -> None:
        """``open(path, "a")``: one write at the end of the file."""
        self.makedirs(posixpath.dirname(path) or ".")
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)

    def rename(self, src: str, dst: str) -> None:
        """``os.rename`` (atomic on one filesystem), then the target folder fsynced.

        Args:
            src (str): the file or folder to rename.
            dst (str): its new path, on the same filesystem.

        Raises:
            FileExistsError: something is at ``dst`` already (a published name is never overwritten).
            FileNotFoundError: nothing is at ``src``.
        """
        if os.path.exists(dst):
            raise FileExistsError(dst)
        os.rename(src, dst)
        self.fsync_dir(posixpath.dirname(dst))

    def publish_dir(self, staging: str, final: str) -> None:
        """fsync everything below ``staging``, then one rename to ``final``.

        Args:
            staging (str): the complete folder, hidden (:meth:`staging_for`).
            final (str): the name readers see.

        Raises:
            FileExistsError: ``final`` exists (it is published).
            FileNotFoundError: ``staging`` does not exist.
        """
        self.fsync_tree(staging)
        self.rename(staging, final)

    def mark_published(self, path: str) -> None:
        """Nothing: a local folder is visible as it is written."""

    def unpublish(self, path: str) -> None:
        """Renames the folder aside to the hidden ``.pruned-<name>`` (one rename: readers see
        it whole or not at all), then deletes it; a leftover of an interrupted try at that
        name, never read, is deleted first.

        Args:
            path (str): the published folder; nothing is done when it is missing.
        """
        if not os.path.lexists(path):
            return
        parent, name = posixpath.split(path.rstrip("/"))
        aside = posixpath.join(parent, f"{_ASIDE}{name}")
        self.rm(aside)
        self.rename(path, aside)
        self.rm(aside)

    def staging_for(self, final: str, tag: str) -> str:
        """A hidden sibling ``.<tag>-<name>`` (resumed by the next try).

        Args:
            final (str): the folder to publish.
            tag (str): a short word naming the writer (``ship``, ``compact``).

        Returns:
            str: ``<parent of final>/.<tag>-<name of final>``.
        """
        parent, name = posixpath.split(final.rstrip("/"))
        return posixpath.join(parent, f".{tag}-{name}")

    def fsync_dir(self, path: str) -> None:
        """fsync the folder ``path`` (its entries made durable); a failure is ignored (some filesystems refuse).

        Args:
            path (str): the folder.
        """
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
        """fsync every file and folder below ``path``.

        Args:
            path (str): the folder.

        Raises:
            OSError: a file below it cannot be opened or synced.
        """
        for root, _dirs, files in os.walk(path):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self.fsync_dir(root)

    def copy_tree(self, src: str, dst: str) -> None:
        """``shutil.copytree`` (the target must not exist).

        Args:
            src (str): the folder to copy.
            dst (str): the new folder.

        Raises:
            FileExistsError: ``dst`` exists.
            FileNotFoundError: ``src`` does not exist.
        """
        shutil.copytree(src, dst)

    # copies between stores ----------------------------------------------------------
    def copy_file_to(self, path: str, dst: Storage, dst_path: str) -> int:
        """Hands the copy to ``dst`` (:meth:`put_local_file`): it knows how to take a local file.

        Args:
            path (str): the local file to copy.
            dst (Storage): the storage to copy it to.
            dst_path (str): its path there.

        Returns:
            int: the bytes copied.

        Raises:
            FileNotFoundError: ``path`` is not there.
        """
        return dst.put_local_file(path, dst_path)

    def put_local_file(self, local_path: str, path: str) -> int:
        """``shutil.copyfile`` into place, parent folders created.

        Args:
            local_path (str): the local file to copy.
            path (str): its new path here (replaced when it exists).

        Returns:
            int: the bytes copied (the new file's size).

        Raises:
            FileNotFoundError: ``local_path`` is not there.
        """
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        shutil.copyfile(local_path, path)
        return os.path.getsize(path)

    def get_remote_file(self, src: Storage, src_path: str, path: str) -> int:
        """Downloads by ``src``'s fsspec ``get_file``, parent folders created.

        Args:
            src (Storage): the non-local storage holding the file.
            src_path (str): the file there.
            path (str): the local path to write (replaced when it exists).

        Returns:
            int: the bytes copied (the local file's size).

        Raises:
            FileNotFoundError: ``src_path`` is not there.
        """
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        src.fs.get_file(src_path, path)
        return os.path.getsize(path)

    # locks --------------------------------------------------------------------------
    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """A file lock (``flock`` through the filelock library): the OS lets go of it when the
        holding process ends, however it ends. The lock file is created when missing and left
        after release; taking the lock writes nothing into it (a probe that takes and releases
        the lock changes nothing). See :meth:`Storage.lock` for the contract.

        Args:
            path (str): the lock file (its folder made when missing).
            blocking (bool): wait for another holder to let go (False: one try).
            timeout (float | None): seconds to wait when ``blocking``; None waits for ever.
            what (str): what the lock guards, named by the error (e.g. ``"capture of db"``).

        Returns:
            HeldLock: the lock, held; release it with ``release()`` or a ``with`` block.

        Raises:
            LockHeldError: another process (or another holder in this one) holds it, and the
                wait, if any, ran out.
        """
        self.makedirs(posixpath.dirname(path) or ".")
        lock = FileLock(path, thread_local=False)
        wait = (-1 if timeout is None else timeout) if blocking else 0
        try:
            lock.acquire(timeout=wait)
        except Timeout:
            raise LockHeldError(path, what) from None
        return HeldLock(path, lock.release)
