"""Exceptions raised by wlr (replay)."""

from __future__ import annotations

from wlcore.errors import (  # noqa: F401 (wlr.TargetError, wlr.ReplicationTimeout)
    ConfigError,
    NotFoundError,
    ReplicationTimeout,
    TargetError,
    WlcError,
)


class ApplyError(Exception):
    """A transaction cannot be applied; the message is the cause."""


class TargetWarning(UserWarning):
    """``until`` was taken to mean something the caller may not have meant: a date alone is
    the start of that day, UTC. The message says what it was taken as."""


class NoStartError(TargetError):
    """A new replica has nowhere to start: the master's snapshots and first batches were pruned
    (or never taken) and no snapshot covers what came before. A service (``wlr replicate
    --follow``) says so once and tries again with backoff: a snapshot taken on the master
    (``wlc snapshot``) lets it start."""


class ReplicaStateError(WlcError):
    """The replica is not in a state the call needs (not a replica, of another master, nothing to accept)."""


class ReadOnlyError(ReplicaStateError):
    """A Spark SQL statement wrote through a replica table's name (``INSERT``, ``UPDATE``,
    ``DELETE``, ``MERGE``, ``TRUNCATE``, ``ALTER``), which Spark or Delta refused: the replica's
    tables are read-only, as a PostgreSQL hot standby's are ("cannot execute INSERT in a
    read-only transaction"). Nothing reached the replica.

    Args:
        message: the message, naming the replica, its table and its master.
        replica: the replica's database name (kept as ``replica``).
        table: the replica table ``schema.table`` the name reads (kept as ``table``).
        spark_error: the exception Spark raised (kept as ``spark_error``; its message names
            Spark's or Delta's condition, e.g. ``EXPECT_TABLE_NOT_VIEW``).
    """

    def __init__(self, message: str, replica: str, table: str, spark_error: BaseException):
        super().__init__(message)
        self.replica, self.table, self.spark_error = replica, table, spark_error


class DivergedError(ReplicaStateError):
    """The source's history is not the one this replica followed: the master was restored
    from a copy (or its logs were reset) and wrote other transactions under ids the replica
    had already applied (the "Ruh Roh" of CouchDB's transitive checkpoints).

    Args:
        message: the message, with the fix as a Python call.
        txn: the first transaction id the two histories disagree on (kept as ``txn``).
        cli: the message with the fix as a command (None: ``message``).
    """

    def __init__(self, message: str, txn: int, cli: str | None = None):
        super().__init__(message, cli=cli)
        self.txn = txn


class PromotionError(ReplicaStateError):
    """A replica cannot be promoted to master as it stands (PostgreSQL's ``pg_promote`` of a
    standby that has not replayed all the primary's WAL loses what it has not replayed): it is
    not caught up with everything its master published, its replay failed, or it is no
    complete copy (a selective replica, or one still being made). Nothing was changed.

    Args:
        message: the message, with the fix as a Python call.
        left_out: the published transaction ids the new history would leave out (kept as
            ``left_out``; empty when the refusal is about something else).
        cli: the message with the fix as a command (None: ``message``).
    """

    def __init__(self, message: str, left_out: list[int] | None = None, cli: str | None = None):
        super().__init__(message, cli=cli)
        self.left_out = list(left_out or [])


class ReplicationError(WlcError):
    """Replay stopped at a transaction it could not apply (PostgreSQL's apply worker stops the
    same way). Every later ``replicate()``, in any process, retries; a transaction's failure
    can also be skipped with ``wlr.accept()``.

    Args:
        batch: the level-0 batch number the failure is in (None: not known); kept as ``batch``.
        txn: the transaction id; None when the failure is in the logs themselves (a batch
            missing, damaged or out of place); kept as ``txn``.
        table: ``schema.table`` it failed on, or None; kept as ``table``.
        cause: the error's text; kept as ``cause``.
    """

    def __init__(self, batch: int | None, txn: int | None, table: str | None, cause: str):
        self.batch, self.txn, self.table, self.cause = batch, txn, table, cause
        if txn is None:
            where = f"batch {batch}" if batch is not None else "replay"
            fix = (
                "Repair the logs (restore the batch from a copy, or move a foreign folder out) and call "
                "replicate() again; accept() cannot skip a batch"
            )
            cli = (
                "Repair the logs (restore the batch from a copy, or move a foreign folder out) and run "
                "wlr replicate again; wlr accept cannot skip a batch"
            )
        else:
            where = f"transaction {txn}"
            if table:
                where += f" on table {table}"
            if batch is not None:
                where += f" (batch {batch})"
            fix = "Fix the cause and call replicate() again, or skip exactly this transaction with wlr.accept()"
            cli = (
                "Fix the cause and run wlr replicate again, or skip exactly this transaction with: "
                "wlr accept <dbfarm> <replica>"
            )
        super().__init__(
            f"replication stopped at {where}: {cause}. {fix}", cli=f"replication stopped at {where}: {cause}. {cli}"
        )


class NoSuchTableError(NotFoundError):
    """The table is not on the replica at its last consistent tick.

    Args:
        message: the message, naming the nearest tables.
        table: the name asked for (kept as ``table``).
        nearest: the replica's closest table names (difflib), best first (kept as ``nearest``).
        cli: the message as the command line says it (None: ``message``).
    """

    def __init__(self, message: str, table: str, nearest: list[str], cli: str | None = None):
        super().__init__(message, cli=cli)
        self.table, self.nearest = table, nearest


class TableExistsError(WlcError):
    """The table a restore would create is already on the master, and replacing it was not asked for."""


class RestoreError(WlcError):
    """Restoring a table into a master failed while writing it; the message names the step,
    the cause and what was undone."""
