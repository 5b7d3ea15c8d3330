"""The shipped copies a master knows of: ``<db>/wlc.copies``, one destination a line.

``wlc ship`` and :meth:`wlc.Master.ship` add their destination; ``wlc prune`` prunes the
master's own folder and then every copy listed, each by its own retention
(:func:`wlcore.ship.prune_copy`). Relays are not listed: their replica prunes them
(``wlr prune``).
"""

from __future__ import annotations

from ..storage import Storage
from .destination import dest_root

COPIES_FILE = "wlc.copies"
LOCK_FILE = "wlc.copies.lock"


def known_copies(storage: Storage, db_path: str) -> list[str]:
    """The destinations master ``db_path`` has shipped to, in the order first shipped.

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.

    Returns:
        list[str]: the destination folders or URLs (empty: none yet).
    """
    path = Storage.join(db_path, COPIES_FILE)
    if not storage.exists(path):
        return []
    return [line.strip() for line in storage.read_text(path).splitlines() if line.strip()]


def add_copy(storage: Storage, db_path: str, to: str) -> None:
    """Note that master ``db_path`` ships to ``to`` (nothing when it is listed already).

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.
        to (str): the destination folder or URL.

    Raises:
        ShipError: ``to`` is empty.
    """
    url = dest_root(to)
    if url in known_copies(storage, db_path):
        return
    with storage.lock(Storage.join(db_path, LOCK_FILE), blocking=True, what=f"the copies of {db_path}"):
        listed = known_copies(storage, db_path)
        if url not in listed:
            storage.write_atomic(Storage.join(db_path, COPIES_FILE), "".join(f"{u}\n" for u in listed + [url]))
