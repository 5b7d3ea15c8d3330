"""Epochs: which history of a master a transaction id belongs to (pure, no I/O).

A master's database id (``dbid``) names it for ever; transaction ids alone do not name its
history. If the master is restored from a copy (or its logs are reset) and writes again,
it hands out the same ids to different transactions: the "Ruh Roh" of CouchDB's checkpoints, CouchDB's
reason to pair a sequence number with a random session id.

So every capture session of a master is an *epoch*, a random id, and the master keeps its
epoch *history*, as PostgreSQL keeps its timeline history: ``first txn:epoch`` entries,
oldest first (``0:9f3a...,151:07bc...``): transactions from ``first`` on, until the next
entry, were written in that epoch. A session that ends without publishing a transaction
leaves no entry (the next one takes its place). The history is in ``wlc.config``
(``epochs``), in every batch manifest and every snapshot.

A replica keeps the history of the last transaction it applied. Its source (the master, a
shipped copy or a relay) continues the same history while both agree on every transaction
up to the lower of their two ticks; a master restored from an older copy starts a new epoch
at its own tick + 1, and every replica that had gone further disagrees there and stops.
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import MasterState

History = list[tuple[int, str]]  # (first txn, epoch id), first ascending

_ENTRY = re.compile(r"^(-?\d+):([0-9a-f]{1,64})$")


def new_epoch() -> str:
    """A fresh random epoch id (64 bits, hex)."""
    return secrets.token_hex(8)


def parse(text: str | None) -> History:
    """An epoch history's text as entries: ``"0:ab12,151:cd34"`` as ``[(0, "ab12"), (151, "cd34")]``.

    Args:
        text (str | None): ``first:epoch`` entries joined by commas (None or empty: no history).

    Returns:
        History: ``[(first txn, epoch id)]``, first ascending; ``[]`` for empty text.

    Raises:
        ValueError: an entry is malformed or the firsts do not ascend.
    """
    out: History = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        m = _ENTRY.match(part)
        if not m:
            raise ValueError(f"malformed epoch history entry {part!r} (expected <first txn>:<hex id>)")
        first = int(m.group(1))
        if out and first <= out[-1][0]:
            raise ValueError(f"epoch history is out of order at {part!r}")
        out.append((first, m.group(2)))
    return out


def format(history: History) -> str:  # noqa: A001 (the module's own name for the inverse of parse)
    """The history as text, ``first:epoch`` entries joined by commas (the inverse of :func:`parse`).

    Args:
        history (History): ``[(first txn, epoch id)]``, first ascending.

    Returns:
        str: the text ("" for no entry).
    """
    return ",".join(f"{first}:{epoch}" for first, epoch in history)


def begin(history: History, first: int, epoch: str) -> History:
    """The history once a session ``epoch`` starts (PostgreSQL's new timeline on promotion).

    Args:
        history (History): the history so far, ``[(first txn, epoch id)]`` ascending.
        first (int): the session's first transaction id (the published tick + 1).
        epoch (str): the session's epoch id (:func:`new_epoch`).

    Returns:
        History: ``history`` with ``(first, epoch)`` appended; an entry at ``first`` or later
        (one that holds no transaction) is replaced.
    """
    kept = [(f, e) for f, e in history if f < first]
    return kept + [(first, epoch)]


def start_session(config: "MasterState") -> str:
    """Begin a capture session of the master whose ``wlc.config`` is ``config``; its first
    transaction will be the published tick + 1.

    Args:
        config (MasterState): the master's :class:`wlcore.state.MasterState`, updated in
            place (``epoch``, ``epochs``); the caller saves it.

    A promoted master that has written nothing yet keeps the epoch its promotion began
    (``promoted_tick`` is its tick, :mod:`wlcore.promotion`): the one its promotion report and
    the old master's fence name.

    Returns:
        str: a line for the master's log naming the epoch and the history.

    Raises:
        ValueError: ``epochs`` in ``config`` is malformed (:func:`parse`).
    """
    first = config.tick + 1
    history = parse(config.epochs)
    if config.promoted_tick == config.tick and config.epoch and history[-1:] == [(first, config.epoch)]:
        return f"capture session continues epoch {config.epoch} of the promotion at transaction {first}"
    epoch = new_epoch()
    config.epoch, config.epochs = epoch, format(begin(history, first, epoch))
    return f"capture session {epoch} begins at transaction {first} (epochs {config.epochs})"


def at(history: History, txn: int) -> str | None:
    """The epoch transaction ``txn`` was written in.

    Args:
        history (History): an epoch history, ``[(first txn, epoch id)]`` ascending.
        txn (int): a transaction id.

    Returns:
        str | None: the epoch of the last entry starting at or before ``txn``; None when it is
        before every entry.
    """
    found = None
    for first, epoch in history:
        if first > txn:
            break
        found = epoch
    return found


def upto(history: History, txn: int) -> History:
    """The entries that cover transactions ``<= txn``.

    Args:
        history (History): an epoch history, ``[(first txn, epoch id)]`` ascending.
        txn (int): the last transaction id to cover.

    Returns:
        History: the entries whose first transaction is ``<= txn``.
    """
    return [(f, e) for f, e in history if f <= txn]


def diverged(mine: History, mine_tick: int, theirs: History, their_tick: int) -> int | None:
    """The first transaction id two histories disagree on, up to the lower tick (as PostgreSQL
    compares timeline histories, or CouchDB a sequence number's session id).

    Args:
        mine (History): this side's epoch history (a replica's).
        mine_tick (int): the last transaction this side holds.
        theirs (History): the other side's epoch history (its source's).
        their_tick (int): the last transaction the other side holds.

    Returns:
        int | None: the first transaction id written in different epochs; None when they
        agree up to the lower tick (one simply stands further than the other) or when either
        history is unknown (written before epochs existed).
    """
    if not mine or not theirs:
        return None
    limit = min(mine_tick, their_tick)
    a, b = upto(mine, limit), upto(theirs, limit)
    for (fa, ea), (fb, eb) in zip(a, b):
        if (fa, ea) != (fb, eb):
            return min(fa, fb)
    if len(a) != len(b):
        return (a[len(b)] if len(a) > len(b) else b[len(a)])[0]
    return None
