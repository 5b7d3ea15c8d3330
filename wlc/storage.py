"""Files on the shared filesystem, through fsspec: listing, reading, atomic writes and renames.

Everything wlc and wlr write outside Delta tables goes through here, so a dbfarm may live
on any filesystem fsspec knows. On local and network-mounted folders writes are made
crash-safe the Litestream way: write aside, fsync, rename, fsync the folder.
"""
from __future__ import annotations

import os
import posixpath
import uuid
from typing import Iterable

import fsspec
from fsspec.implementations.local import LocalFileSystem


class Storage:
    """A filesystem plus helpers. ``Storage.of(path)`` picks the filesystem from the path or URL."""

    def __init__(self, fs: fsspec.AbstractFileSystem):
        self.fs = fs
        self.local = isinstance(fs, LocalFileSystem)

    @classmethod
    def of(cls, path: str) -> "Storage":
        fs, _ = fsspec.core.url_to_fs(path)
        return cls(fs)

    # paths --------------------------------------------------------------------------
    @staticmethod
    def join(*parts: str) -> str:
        return posixpath.join(*[str(p) for p in parts])

    def uri(self, path: str) -> str:
        """The path as Spark wants it (``file:`` URI for local folders)."""
        if self.local and "://" not in path:
            return "file://" + os.path.abspath(path)
        return path

    # queries ------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def isdir(self, path: str) -> bool:
        return self.fs.isdir(path)

    def listdir(self, path: str) -> list[str]:
        """Base names in ``path`` (empty when it does not exist)."""
        if self.local:
            try:
                return sorted(os.listdir(path))
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            return sorted(posixpath.basename(p.rstrip("/")) for p in self.fs.ls(path, detail=False))
        except FileNotFoundError:
            return []

    def subdirs(self, path: str) -> list[str]:
        if self.local:
            try:
                with os.scandir(path) as it:
                    return sorted(e.name for e in it if e.is_dir())
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            return sorted(posixpath.basename(i["name"].rstrip("/"))
                          for i in self.fs.ls(path, detail=True) if i["type"] == "directory")
        except FileNotFoundError:
            return []

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open(path, "rb") as fh:
            return fh.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def walk_files(self, path: str) -> Iterable[str]:
        """Every file below ``path``, as paths relative to it, sorted."""
        out = []
        for root, _dirs, files in self.fs.walk(path):
            for name in files:
                out.append(posixpath.relpath(posixpath.join(root, name), path))
        return sorted(out)

    # writes -------------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def write_atomic(self, path: str, data: bytes | str) -> None:
        """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        parent = posixpath.dirname(path)
        self.makedirs(parent)
        tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
        if self.local:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            self.fsync_dir(parent)
        else:
            with self.fs.open(tmp, "wb") as fh:
                fh.write(data)
            self.fs.mv(tmp, path)

    def rename(self, src: str, dst: str) -> None:
        """Rename a file or folder; fails if ``dst`` exists (a published name is never overwritten)."""
        if self.local:
            if os.path.exists(dst):
                raise FileExistsError(dst)
            os.rename(src, dst)
            self.fsync_dir(posixpath.dirname(dst))
        else:
            if self.fs.exists(dst):
                raise FileExistsError(dst)
            self.fs.mv(src, dst, recursive=True)

    def fsync_dir(self, path: str) -> None:
        if not self.local:
            return
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
        """fsync every file below ``path`` (local only): data reaches the disk before a publish rename."""
        if not self.local:
            return
        for root, _dirs, files in os.walk(path):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self.fsync_dir(root)

    def rm(self, path: str) -> None:
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def copy_tree(self, src: str, dst: str) -> None:
        """Copy the folder ``src`` to ``dst`` (which must not exist)."""
        if self.local:
            import shutil
            shutil.copytree(src, dst)
        else:
            self.fs.copy(src, dst, recursive=True)
