"""Files on the shared filesystem, through fsspec: listing, reading, atomic writes and
renames, published folders, locks.

Everything wlc and wlr write outside Delta tables goes through :class:`Storage`, so a
dbfarm and its logs may live on any filesystem fsspec knows. ``Storage.of(path)`` gives the
implementation for a path or URL: :class:`LocalStorage` (local and mounted folders),
:class:`S3Storage` (S3-compatible object stores), :class:`ObjectStorage` (other object
stores), :class:`RemoteStorage` (other filesystems). The interface and each method's error
contract are in :mod:`wlcore.storage.base`.
"""

from .base import MARKER, OBJECT_STORES, FileStat, HeldLock, Storage, copy_file, copy_tree, protocols
from .factory import s3_options, storage_for, storage_of
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
