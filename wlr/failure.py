"""A replica's failure record: stored in ``wlr.config``, raised, retried, recovered or skipped.

Semantics (PostgreSQL's logical replication apply worker): replay stops at the first
failure and keeps it (``error_batch``, ``error_txn``, ``error_table``, ``error_cause``);
every later ``replicate()`` retries from there, so a fixed cause lets replay go on and the
recovery is logged; ``accept()`` skips exactly the failed transaction, as
``ALTER SUBSCRIPTION ... SKIP``, and only when the failure is tied to that one transaction.
A failure of the logs themselves (a batch missing, damaged or out of place) has no
transaction (``error_txn`` empty) and cannot be skipped: the logs must be repaired.
"""

from __future__ import annotations

from typing import Callable

from wlcore.logstore import LogStore
from wlcore.state import ReplicaState

from .errors import ReplicaStateError, ReplicationError
from .planner import manifest_of


def stored(state: ReplicaState) -> ReplicationError | None:
    """The failure kept in ``state``.

    Args:
        state (ReplicaState): the replica's state.

    Returns:
        ReplicationError | None: the error to raise again; None when no failure is kept.
    """
    if not state.error_cause:
        return None
    return ReplicationError(state.error_batch, state.error_txn, state.error_table or None, state.error_cause)


def described(state: ReplicaState) -> dict[str, str] | None:
    """The failure kept in ``state`` as ``wlr status`` shows it.

    Args:
        state (ReplicaState): the replica's state.

    Returns:
        dict[str, str] | None: ``batch``, ``txn``, ``table`` and ``cause``, each as its
        ``wlr.config`` text, those that are set; None when none is.
    """
    values = {
        "batch": state.error_batch,
        "txn": state.error_txn,
        "table": state.error_table,
        "cause": state.error_cause,
    }
    return {k: str(v) for k, v in values.items() if v is not None and v != ""} or None


def record(state: ReplicaState, batch: int | None, txn: int | None, table: str | None, cause: str) -> ReplicationError:
    """Put the failure into ``state`` (PostgreSQL's apply worker keeps the failed transaction
    the same way); the caller saves it. The replica's state becomes ``failed``.

    Args:
        state (ReplicaState): the replica's state.
        batch (int | None): the level-0 batch the failure is in.
        txn (int | None): the transaction that failed (None: a failure of the logs themselves).
        table (str | None): the table it failed on (None: none).
        cause (str): the error's text (made one line).

    Returns:
        ReplicationError: the error to raise.
    """
    cause, table = _one_line(cause), _one_line(table or "")  # wlr.config holds one line a key
    state.set_error(batch, txn, table, cause)
    state.state = "failed"
    return ReplicationError(batch, txn, table or None, cause)


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


def clear_if_passed(state: ReplicaState, read_up_to: int) -> str | None:
    """Clear a stored failure that replay has now got past (PostgreSQL's apply worker retries
    the same way).

    A transaction's failure is passed once ``tick`` reaches it; a batch's failure once
    replay read that batch.

    Args:
        state (ReplicaState): the replica's state, changed in place (the caller saves it).
        read_up_to (int): the highest batch number read without error.

    Returns:
        str | None: the ``RECOVERED ...`` log line; None when nothing was cleared.
    """
    if not state.error_cause:
        return None
    txn, batch = state.error_txn, state.error_batch
    if txn is not None:
        passed = state.tick >= txn
    else:
        passed = batch is None or read_up_to >= batch
    if not passed:
        return None
    cause = state.error_cause
    clear(state)
    where = place(txn, batch)
    return f"RECOVERED at {where}: replay passed it on retry (the failure was: {cause})"


def place(txn: int | None, batch: int | None) -> str:
    """Where a failure is, as ``wlr.log`` lines name it.

    Args:
        txn (int | None): the transaction that failed (None: a failure of the logs).
        batch (int | None): the level-0 batch it is in (None: not known).

    Returns:
        str: ``transaction <txn>``, else ``batch <batch>``, else ``the logs``.
    """
    if txn is not None:
        return f"transaction {txn}"
    return f"batch {batch}" if batch is not None else "the logs"


def clear(state: ReplicaState) -> None:
    """Forget the stored failure (it was passed or skipped); the replica is idle again.

    Args:
        state (ReplicaState): the replica's state, changed in place (the caller saves it).
    """
    state.set_error(None, None, "", "")
    state.drop("retries")
    state.drop("retry_at")
    state.state = "idle"


def retry_delay(attempt: int, beat: float, most: float) -> float:
    """Seconds a follower waits before its ``attempt``-th try of a stored failure: ``beat``
    doubled at every attempt, at most ``most`` (PostgreSQL's apply worker restarts after a
    failure the same way, Litestream's replica client backs off likewise).

    Args:
        attempt (int): the attempt about to be waited for (1: the first retry).
        beat (float): seconds before the first retry (``replica.beat``; at least 0.1 is used).
        most (float): the longest wait, seconds (``replica.retry_max``).

    Returns:
        float: seconds to wait.
    """
    first = max(0.1, float(beat))
    return min(max(first, float(most)), first * 2.0 ** max(0, attempt - 1))


def kind(state: ReplicaState) -> str:
    """The kind of the stored failure, as metrics and the retry lines name it: ``logs`` (a batch
    missing, damaged or out of place: no transaction), ``transaction`` (a transaction failed
    to apply); ``""`` when none is stored.

    Args:
        state (ReplicaState): the replica's state.
    """
    if not state.error_cause:
        return ""
    return "logs" if state.error_txn is None else "transaction"


def skippable(state: ReplicaState, name: str) -> tuple[int, int | None]:
    """The transaction ``accept()`` may skip (PostgreSQL's ``ALTER SUBSCRIPTION ... SKIP``):
    the failed one, when it is the next to apply.

    Args:
        state (ReplicaState): the replica's state.
        name (str): the replica's name, for messages.

    Returns:
        tuple[int, int | None]: ``(txn, batch)`` of the failure.

    Raises:
        ReplicaStateError: no failure is stored; the failure is in the logs (a batch), not
            in one transaction; or it is not the next transaction to apply.
    """
    if not state.error_cause:
        raise ReplicaStateError(f"replica {name!r} has no failed transaction to accept")
    txn, batch = state.error_txn, state.error_batch
    if txn is None:
        msg = (
            f"the failure is in batch {batch} of the logs, not in one transaction ({state.error_cause}); "
            "{accept} skips only a transaction that failed to apply, and skipping an intact one would not "
            f"repair the logs. Restore the batch in {state.logs} from a copy (or move a foreign "
            "folder out), then {replicate} again"
        )
        raise ReplicaStateError(
            msg.format(accept="accept()", replicate="call replicate()"),
            cli=msg.format(accept="wlr accept", replicate="run wlr replicate"),
        )
    if txn != state.tick + 1:
        raise ReplicaStateError(f"the failure is not tied to the next transaction: {state.error_cause}")
    return txn, batch


def skip(state: ReplicaState, name: str, store: LogStore, current_version: Callable[[str], int]) -> int:
    """Skip the failed transaction in ``state`` (the caller saves it): it counts as handled.

    Args:
        state (ReplicaState): the replica's ``wlr.config`` values.
        name (str): the replica's name (in messages).
        store (LogStore): the log folder the failed batch is in (``logs`` of ``state``).
        current_version (Callable[[str], int]): a table's Delta version on the replica now
            (``"schema.table"``).

    Returns:
        int: the id of the skipped transaction (PostgreSQL's ``ALTER SUBSCRIPTION ... SKIP``).

    Raises:
        ReplicaStateError: as :func:`skippable`.
    """
    txn, batch = skippable(state, name)
    manifest = manifest_of(store, batch)
    rec = next((t for t in manifest.txns if t.txn == txn), None) if manifest else None
    clear(state)
    state.tick = txn
    state.skipped = [*state.skipped, txn]
    if rec is not None:
        state.clock = rec.time
        if rec.table in state.versions:
            state.set_version(rec.table, current_version(rec.table))
    if manifest is None or (manifest.txns and txn >= manifest.last_txn):
        state.batches = (batch if batch is not None else state.batches) + 1
    return txn
