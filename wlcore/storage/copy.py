"""Copies between any two storages (local folders, object stores): the source picks how,
the destination writes (:meth:`Storage.copy_file_to`)."""

from __future__ import annotations

from .base import Storage


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
