"""Files on the shared filesystem, through fsspec: listing, reading, atomic writes and renames.

Everything wlc and wlr write outside Delta tables goes through here, so a dbfarm and its
logs may live on any filesystem fsspec knows (local and mounted folders, S3-compatible
object stores through s3fs). On local and network-mounted folders writes are made
crash-safe the Litestream way: write aside, fsync, rename, fsync the folder. Where rename
is not atomic (object stores), a published folder ``X`` becomes visible only once its
commit marker ``X.committed``, written last beside it, exists: readers list published
folders with :meth:`Storage.published`.
"""
from __future__ import annotations

import os
import posixpath
import shutil
import uuid
from typing import Iterable

import fsspec
from fsspec.implementations.local import LocalFileSystem


MARKER = ".committed"  # the commit marker of a published folder where rename is not atomic
OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "abfs", "az", "memory"}  # one PUT is atomic, rename is a copy


def protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    proto = fs.protocol
    return set(proto) if isinstance(proto, (tuple, list)) else {proto}


class Storage:
    """A filesystem plus helpers. ``Storage.of(path)`` picks the filesystem from the path or URL."""

    def __init__(self, fs: fsspec.AbstractFileSystem):
        self.fs = fs
        self.local = isinstance(fs, LocalFileSystem)
        self.object_store = bool(protocols(fs) & OBJECT_STORES)
        self.s3 = bool(protocols(fs) & {"s3", "s3a"})

    @classmethod
    def of(cls, path: str) -> "Storage":
        """The storage of ``path`` (a folder or a URL such as ``s3://bucket/key``).

        S3 URLs use the ``storage.s3`` settings (endpoint, keys, region; empty: the AWS
        default chain), the same ones Spark's s3a is given (:func:`wlcore.session.s3a_conf`).
        """
        options = {}
        if str(path).startswith(("s3://", "s3a://")):
            options = s3_options()
            path = "s3://" + str(path).split("://", 1)[1]
        fs, _ = fsspec.core.url_to_fs(path, **options)
        return cls(fs)

    @staticmethod
    def same(a: "Storage", b: "Storage") -> bool:
        """True when ``a`` and ``b`` reach the same filesystem (a copy between them is a plain copy)."""
        return a.local and b.local or a.fs is b.fs

    # paths --------------------------------------------------------------------------
    @staticmethod
    def join(*parts: str) -> str:
        return posixpath.join(*[str(p) for p in parts])

    def uri(self, path: str) -> str:
        """The path as Spark wants it (``file:`` URI for local folders, ``s3a://`` for S3)."""
        if self.local and "://" not in path:
            return "file://" + os.path.abspath(path)
        if self.s3:
            return "s3a://" + (path.split("://", 1)[1] if "://" in path else path.lstrip("/"))
        if "://" not in path:
            proto = sorted(protocols(self.fs))[0]
            return f"{proto}://{path.lstrip('/')}"
        return path

    def url(self, path: str) -> str:
        """The path as a URL fsspec opens again (``s3://bucket/key``; local paths as they are)."""
        if self.local or "://" in path:
            return path
        return f"{'s3' if self.s3 else sorted(protocols(self.fs))[0]}://{path.lstrip('/')}"

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

    def published(self, path: str) -> list[str]:
        """Base names in ``path`` that are published: every name not hidden (staging folders
        are) on local storage, where a folder appears by one rename; elsewhere only those whose
        commit marker ``<name>.committed`` is there too (markers themselves are not listed)."""
        names = self.listdir(path)
        if self.local:
            return [n for n in names if not n.startswith(".")]
        have = set(names)
        return [n for n in names if not n.startswith(".") and not n.endswith(MARKER) and n + MARKER in have]

    def is_published(self, path: str) -> bool:
        """True when the folder or file ``path`` is published (see :meth:`published`)."""
        if self.local:
            return os.path.exists(path)
        return self.fs.exists(path.rstrip("/") + MARKER)

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open(path, "rb") as fh:
            return fh.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def walk_files(self, path: str) -> Iterable[str]:
        """Every file below ``path``, as paths relative to it, sorted."""
        out = []
        base = path if self.local else self.fs._strip_protocol(path).rstrip("/")
        for root, _dirs, files in self.fs.walk(path):
            for name in files:
                out.append(posixpath.relpath(posixpath.join(root, name), base))
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
        elif self.object_store:  # one PUT replaces the object whole
            self.fs.pipe_file(path, data)
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

    def publish_dir(self, staging: str, final: str) -> None:
        """Make the complete folder ``staging`` visible as ``final`` at once: one rename on
        local storage; elsewhere a move (skipped when ``staging`` is ``final``) and then
        the commit marker written last. Raises FileExistsError when ``final`` is published."""
        if self.local:
            self.fsync_tree(staging)
            self.rename(staging, final)
            return
        if self.is_published(final):
            raise FileExistsError(final)
        if staging.rstrip("/") != final.rstrip("/"):
            self.rm(final)  # what a move cut short left there: never published, never read
            self.fs.mv(staging, final, recursive=True)
        self.fs.pipe_file(final.rstrip("/") + MARKER, b"")

    def unpublish(self, path: str) -> None:
        """Delete the published folder ``path``: its commit marker first (readers stop seeing
        it), then its files."""
        if not self.local:
            marker = path.rstrip("/") + MARKER
            if self.fs.exists(marker):
                self.fs.rm(marker)
        self.rm(path)

    def staging_for(self, final: str, tag: str) -> str:
        """Where to assemble the folder ``final`` before :meth:`publish_dir`: a hidden sibling
        ``.<tag>-<name>`` on local storage (resumed by the next try), else ``final`` itself
        (invisible until its marker is written)."""
        if not self.local:
            return final
        parent, name = posixpath.split(final.rstrip("/"))
        return posixpath.join(parent, f".{tag}-{name}")

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

    def size(self, path: str) -> int | None:
        """Size of the file ``path`` in bytes, None when it is not there."""
        try:
            return int(self.fs.size(path))
        except (FileNotFoundError, OSError):
            return None

    def mtime_ms(self, path: str) -> int | None:
        """Modification time of the file ``path`` in whole milliseconds since the epoch (as
        Hadoop's ``FileStatus.getModificationTime``), None when the store does not say."""
        if self.local:
            return os.stat(path).st_mtime_ns // 1_000_000
        info = self.fs.info(path)
        stamp = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
        if stamp is None:
            return None
        if hasattr(stamp, "timestamp"):
            return int(stamp.timestamp() * 1000)
        return int(float(stamp) * 1000)

    def copy_tree(self, src: str, dst: str) -> None:
        """Copy the folder ``src`` to ``dst`` (which must not exist)."""
        if self.local:
            shutil.copytree(src, dst)
        else:
            self.fs.copy(src, dst, recursive=True)


def copy_file(src: Storage, src_path: str, dst: Storage, dst_path: str) -> int:
    """Copy one file between two filesystems (or within one); returns the bytes copied.

    Raises:
        FileNotFoundError: ``src_path`` is not there (deleted meanwhile).
        OSError: either filesystem cannot be reached or written.
    """
    if src.local and dst.local:
        os.makedirs(os.path.dirname(dst_path) or ".", exist_ok=True)
        shutil.copyfile(src_path, dst_path)
        return os.path.getsize(dst_path)
    if src.local:
        dst.fs.put_file(src_path, dst_path)
        return os.path.getsize(src_path)
    if dst.local:
        os.makedirs(os.path.dirname(dst_path) or ".", exist_ok=True)
        src.fs.get_file(src_path, dst_path)
        return os.path.getsize(dst_path)
    with src.fs.open(src_path, "rb") as r, dst.fs.open(dst_path, "wb") as w:
        shutil.copyfileobj(r, w, 1 << 22)
    return int(dst.fs.size(dst_path))


def copy_tree(src: Storage, src_path: str, dst: Storage, dst_path: str) -> int:
    """Copy the folder ``src_path`` of ``src`` to ``dst_path`` of ``dst`` (any two
    filesystems); returns the bytes copied (0 when both are local: one ``copytree``).

    Raises:
        FileNotFoundError, OSError: as :func:`copy_file`; ``FileExistsError`` when both are
            local and ``dst_path`` exists.
    """
    if Storage.same(src, dst):
        dst.copy_tree(src_path, dst_path)
        return 0
    total = 0
    for rel in src.walk_files(src_path):
        total += copy_file(src, Storage.join(src_path, rel), dst, Storage.join(dst_path, rel))
    return total


def s3_options() -> dict:
    """fsspec/s3fs options from the ``storage.s3`` settings."""
    from .settings import settings

    cfg = settings().storage.s3
    options: dict = {"use_listings_cache": False}  # other processes publish: list afresh every time
    if cfg.endpoint_url:
        options["endpoint_url"] = cfg.endpoint_url
    if cfg.key:
        options["key"], options["secret"] = cfg.key, cfg.secret
    if cfg.region:
        options.setdefault("client_kwargs", {})["region_name"] = cfg.region
    return options
