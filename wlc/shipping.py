"""Shipping of a master: ``Master.ship()`` and ``ship_stop()`` over :mod:`wlcore.ship`."""
from __future__ import annotations

from wlcore.ship import Shipper, dest_root


class MasterShipping:
    """The shipping calls of :class:`wlc.Master` (a mixin: the master has ``storage``,
    ``path``, ``dbname``, ``running`` and ``flush``)."""

    def ship(self, to: str, follow: bool = False):
        """Copy this master's published batches and snapshots to ``to`` (see :mod:`wlcore.ship`).

        Args:
            to: destination folder or URL: another local folder or mount, or
                ``s3://bucket/path`` (endpoint and keys from ``storage.s3`` in config).
                Replicas then read it with ``wlr.replicate(master, logs=to)``.
            follow: False: one pass, after a flush when this process captures. True: one
                pass now, then keep shipping in a background thread whenever a batch is
                published, until :meth:`ship_stop` or :meth:`close`.

        Returns:
            ShipReport (one pass: ``batches``, ``snapshots``, ``bytes``, ``seconds``), or,
            following, the :class:`Shipper` (``report`` adds up, ``stop()``).

        Raises:
            ShipError: the destination holds another database's copy, or a batch did not
                verify there (nothing unverified is published; ship again).
        """
        if getattr(self, "running", False):
            self.flush()
        shipper = Shipper(self.storage, self.path, self.dbname, to)
        report = shipper.once()
        if not follow:
            return report
        shippers = self.__dict__.setdefault("_shippers", {})
        if shipper.to in shippers:
            shippers.pop(shipper.to).stop()
        shippers[shipper.to] = shipper.follow()
        return shipper

    def ship_stop(self, to: str | None = None) -> None:
        """Stop following shippers: the one to ``to``, or all."""
        shippers = self.__dict__.get("_shippers", {})
        for url in [u for u in shippers if to is None or u == dest_root(to)]:
            shippers.pop(url).stop()
