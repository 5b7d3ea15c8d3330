"""Exceptions raised by wlr (replay)."""
from __future__ import annotations

from wlc.errors import ConfigError, WlcError


class TargetError(ConfigError):
    """``until`` is malformed, or names a point the replica has already passed."""


class ReplicaStateError(WlcError):
    """The replica is not in a state the call needs (not a replica, of another master, nothing to accept)."""


class ReplicationTimeout(WlcError):
    """``replicate(until=...)`` waited ``timeout`` seconds and its target was not published."""


class ReplicationError(WlcError):
    """Replay stopped at a transaction it could not apply.

    Attributes: ``batch`` (batch number), ``txn`` (transaction id), ``table``
    (``schema.table`` or None), ``cause`` (text). Raised again by every ``replicate()``,
    in any process, until the cause is fixed or ``wlr.accept()`` skips that transaction.
    """

    def __init__(self, batch: int | None, txn: int | None, table: str | None, cause: str):
        self.batch, self.txn, self.table, self.cause = batch, txn, table, cause
        where = f"transaction {txn}" if txn is not None else "replay"
        if table:
            where += f" on table {table}"
        if batch is not None:
            where += f" (batch {batch})"
        super().__init__(f"replication stopped at {where}: {cause}. Fix the cause and call "
                         "replicate() again, or skip exactly this transaction with wlr.accept()")
