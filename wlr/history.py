"""A replica's epoch history against its source's (:mod:`wlcore.epochs`): replay refuses a
source that wrote other transactions under ids the replica already applied (a master restored
from a copy, its logs reset), as PostgreSQL refuses a timeline that forked before the
standby's position, and CouchDB a checkpoint of another session.
"""

from __future__ import annotations

from typing import Sequence

from wlcore import epochs
from wlcore.replica_state import ReplicaState

from .errors import DivergedError, ReplicaStateError
from .logs import Batch


def check(
    state: ReplicaState,
    their_text: str,
    their_tick: int,
    where: str,
    *,
    label: str,
    master: str,
    path: str,
    promoted: int | None = None,
) -> None:
    """Refuse a source whose epoch history disagrees with the replica's on a transaction both have.

    Args:
        state (ReplicaState): the replica's state (``epochs``, ``tick``).
        their_text (str): the source's epoch history as text (``first:epoch`` entries).
        their_tick (int): the last transaction that history covers.
        where (str): where it was read, for the message (``batch 7``, ``...'s wlc.config``).
        label (str): the source as messages name it (``the master``, ``the relay ...``).
        master (str): the master's name, for the fix the message gives.
        path (str): the replica's folder, for the message.
        promoted (int | None): the source's ``promoted_tick`` when it is a promoted master (its
            new history starts after it), for the message; None: not promoted.

    Raises:
        DivergedError: the histories disagree; ``txn`` is the first id they disagree on.
        ReplicaStateError: either history is damaged.
    """
    try:
        mine, theirs = epochs.parse(state.epochs), epochs.parse(their_text)
    except ValueError as exc:
        raise ReplicaStateError(
            f"the epoch history in {where} or in {path}'s wlr.config is damaged ({exc}); make a new replica"
        ) from None
    tick = state.tick
    at = epochs.diverged(mine, tick, theirs, their_tick)
    if at is None:
        return
    cause = (
        f"{label} wrote another history from transaction {at} on (epoch "
        f"{epochs.at(theirs, at)}) than this replica followed up to transaction {tick} (epoch "
        f"{epochs.at(mine, at)}): the master was restored from a copy or its logs were reset. "
        "Nothing was applied"
    )
    if promoted is not None and at == promoted + 1:
        cause = (
            f"{label} was promoted to master at transaction {promoted} and this replica applied transactions "
            f"{at}..{tick} of the old master that the new history leaves out (the first: {at}). Nothing was applied"
        )
    raise DivergedError(
        f"{cause}; make a new replica (wlr.replicate({master!r}, replica='<new name>')) or read from a "
        "source that kept this history (source=...)",
        at,
        cli=f"{cause}; make a new replica (wlr replicate <dbfarm> {master} <new name>) or read from a "
        "source that kept this history (--source)",
    )


def note(state: ReplicaState, batches: Sequence[Batch]) -> None:
    """Keep in ``state`` the epoch history of the batch holding the replica's tick (its manifest's).

    Args:
        state (ReplicaState): the replica's state; ``epochs`` and ``epoch`` are set in place
            (the caller saves it).
        batches (Sequence[Batch]): the batches of the round, ascending; nothing changes when
            none holds the tick or records a history.
    """
    tick = state.tick
    for b in reversed(batches):
        if b.manifest.epochs and b.manifest.first_txn <= tick:
            hist = epochs.upto(epochs.parse(b.manifest.epochs), tick)
            state.epochs = epochs.format(hist)
            state.epoch = epochs.at(hist, tick) or ""
            return
