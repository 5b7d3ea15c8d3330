"""Files on the shared filesystem, through fsspec: listing, reading, atomic writes and
renames, published folders, locks.

Everything wlc and wlr write outside Delta tables goes through :class:`Storage`, so a
dbfarm and its logs may live on any filesystem fsspec knows. ``Storage.of(path)`` gives the
implementation for a path or URL: :class:`LocalStorage` (local and mounted folders),
:class:`S3Storage` (S3-compatible object stores), :class:`ObjectStorage` (other object
stores), :class:`RemoteStorage` (other filesystems). The interface and each method's error
contract are in :mod:`wlcore.storage.base`; which implementation a path or URL gets is decided
here (:func:`storage_for`, :func:`storage_of`).
"""

from __future__ import annotations

import fsspec
from fsspec.implementations.local import LocalFileSystem

from .base import MARKER, OBJECT_STORES, FileStat, HeldLock, Storage, copy_file, copy_tree, protocols
from .local import LocalStorage
from .remote import ObjectStorage, RemoteStorage
from .s3 import S3Storage

__all__ = [
    "MARKER",
    "OBJECT_STORES",
    "FileStat",
    "HeldLock",
    "LocalStorage",
    "ObjectStorage",
    "RemoteStorage",
    "S3Storage",
    "Storage",
    "copy_file",
    "copy_tree",
    "protocols",
    "s3_options",
    "storage_for",
    "storage_of",
]


def storage_for(fs: fsspec.AbstractFileSystem) -> Storage:
    """The implementation for the fsspec filesystem ``fs``: local folders, S3, another object
    store, or any other filesystem."""
    if isinstance(fs, LocalFileSystem):
        return LocalStorage(fs)
    names = protocols(fs)
    if names & {"s3", "s3a"}:
        return S3Storage(fs)
    if names & OBJECT_STORES:
        return ObjectStorage(fs)
    return RemoteStorage(fs)


def storage_of(path: str) -> Storage:
    """The storage of ``path``; see :meth:`Storage.of`."""
    options = {}
    if str(path).startswith(("s3://", "s3a://")):
        options = s3_options()
        path = "s3://" + str(path).split("://", 1)[1]
    fs, _ = fsspec.core.url_to_fs(path, **options)
    return storage_for(fs)


def s3_options() -> dict:
    """fsspec/s3fs options from the ``storage.s3`` settings."""
    from ..settings import settings

    cfg = settings().storage.s3
    options: dict = {"use_listings_cache": False}  # other processes publish: list afresh every time
    if cfg.endpoint_url:
        options["endpoint_url"] = cfg.endpoint_url
    if cfg.key:
        options["key"], options["secret"] = cfg.key, cfg.secret
    if cfg.region:
        options.setdefault("client_kwargs", {})["region_name"] = cfg.region
    return options
