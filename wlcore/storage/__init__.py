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
    "deltars_options",
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


def deltars_options(path: str) -> dict[str, str]:
    """delta-rs's ``storage_options`` for the table or folder ``path``, from the ``storage.s3``
    settings that fsspec and Spark's s3a use too, so one setting reaches all three.

    An S3 path gets the endpoint, keys and region set (an ``http://`` endpoint allowed), and
    ``conditional_put: etag``: a commit is put only where no other writer put that version
    (S3's ``If-None-Match``), delta-rs's safe single-writer mode without a lock table. Other
    paths get ``{}``.

    Args:
        path (str): a table or folder, path or URL (``s3://``, ``s3a://``, anything else).

    Returns:
        dict[str, str]: the options for ``DeltaTable(path, storage_options=...)``,
        ``write_deltalake`` and ``polars.read_delta``.
    """
    if not str(path).startswith(("s3://", "s3a://")):
        return {}
    from ..settings import settings

    cfg = settings().storage.s3
    options = {"conditional_put": "etag"}
    if cfg.endpoint_url:
        options["endpoint_url"] = cfg.endpoint_url
        if cfg.endpoint_url.startswith("http://"):
            options["allow_http"] = "true"
    if cfg.key:
        options["access_key_id"], options["secret_access_key"] = cfg.key, cfg.secret
    if cfg.region:
        options["region"] = cfg.region
    return options
