"""Shipping of a master: ``Master.ship()`` and ``ship_stop()`` over :mod:`wlcore.ship`."""

from __future__ import annotations

from typing import Callable

from wlcore.ship import Shipper, ShipReport, dest_root
from wlcore.ship.copies import add_copy
from wlcore.storage import Storage


class MasterShipping:
    """The shippers of one :class:`wlc.Master` (MonetDB's log-shipping agent): one pass, or
    following shippers kept by destination until :meth:`stop`.

    Args:
        storage: the storage of the dbfarm.
        path: the database folder.
        dbname: the database name.
    """

    def __init__(self, storage: Storage, path: str, dbname: str):
        self.storage = storage
        self.path = path
        self.dbname = dbname
        self._shippers: dict[str, Shipper] = {}  # {destination root: its following shipper}

    def ship(self, to: str, follow: bool = False, flush: Callable[[], object] | None = None) -> ShipReport | Shipper:
        """Copy the master's published batches and snapshots to ``to`` (see :meth:`wlc.Master.ship`).

        Args:
            to: destination folder or URL (another folder or mount, or ``s3://bucket/path``).
            follow: False: one pass; True: one pass now, then keep shipping in a background
                thread whenever a batch is published, until :meth:`stop`.
            flush: called first (the capturing master's flush), or None.

        The destination is noted in ``<db>/wlc.copies``: ``wlc prune`` prunes it by its own retention.

        Returns:
            ShipReport (one pass), or, following, the :class:`Shipper`.

        Raises:
            ShipError: the destination holds another database's copy, or a batch did not
                verify there (nothing unverified is published; ship again).
        """
        if flush is not None:
            flush()
        shipper = Shipper(self.storage, self.path, self.dbname, to)
        report = shipper.once()
        add_copy(self.storage, self.path, to)  # wlc prune prunes it too
        if not follow:
            return report
        if shipper.to in self._shippers:
            self._shippers.pop(shipper.to).stop()
        self._shippers[shipper.to] = shipper.follow()
        return shipper

    def stop(self, to: str | None = None) -> None:
        """Stop following shippers (each after the pass under way).

        Args:
            to (str | None): the destination of the one to stop (None: all).
        """
        for url in [u for u in self._shippers if to is None or u == dest_root(to)]:
            self._shippers.pop(url).stop()
