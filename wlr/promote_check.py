"""What a promotion would leave out: the published transactions a replica has not applied.

A replica may be promoted when it is caught up: no place it can read (its source, the master's
own folder) publishes a transaction after its tick, as PostgreSQL's ``pg_promote`` is safe
once a standby has replayed all the WAL it received. :func:`left_out` reads the places'
``wlc.config`` and the level-0 batches from the replica's next batch on (a batch published
just before capture was killed may not be in ``wlc.config`` yet); :func:`missing` is the rule,
pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from wlcore import batch as batchfmt
from wlcore.errors import BatchError, WlcError
from wlcore.replica_state import ReplicaState

from .source import Source


def missing(tick: int, claimed: Iterable[int], published: Iterable[int]) -> list[int]:
    """The transactions after ``tick`` that are published somewhere.

    Args:
        tick (int): the replica's last applied transaction (-1: none).
        claimed (Iterable[int]): the ticks places claim in their ``wlc.config`` (every
            transaction up to each is published there).
        published (Iterable[int]): transaction ids found in published batches.

    Returns:
        list[int]: the ids after ``tick``, ascending, without repeats.
    """
    ids = {t for t in published if t > tick}
    for top in claimed:
        ids.update(range(tick + 1, top + 1))
    return sorted(ids)


def ranges(ids: Sequence[int]) -> str:
    """``[3, 4, 5, 9]`` as ``"3..5, 9"`` (for messages).

    Args:
        ids (Sequence[int]): transaction ids, ascending.

    Returns:
        str: runs of consecutive ids as ``first..last``, joined by commas.
    """
    out: list[str] = []
    start = prev = None
    for i in [*ids, None]:
        if i is not None and prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}..{prev}")
        start = prev = i
    return ", ".join(out)


@dataclass
class LeftOut:
    """The published transactions a replica has not applied, and where they were seen.

    Attributes:
        txns: their ids, ascending.
        gtids: ``<database id>:<txn>`` of each (as :mod:`wlcore.batch` records them).
        seen: the places read (``master 'shop'``, ``relay 'r1'``).
        unreachable: the places that could not be read, with why.
    """

    txns: list[int] = field(default_factory=list)
    gtids: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)


def left_out(state: ReplicaState, places: Sequence[Source], master: str) -> LeftOut:
    """What promoting the replica in ``state`` would leave out of the new history.

    Args:
        state (ReplicaState): the replica's state (``tick``, ``batches``, ``dbid``).
        places (Sequence[Source]): where its master's transactions are published (its source,
            the master's folder); one that cannot be read is noted in ``unreachable``.
        master (str): the database's name (its batches' prefix).

    Returns:
        LeftOut: the transactions after the replica's tick published at any place.
    """
    out = LeftOut()
    claimed: list[int] = []
    found: dict[int, str] = {}
    for place in places:
        try:
            cfg = place.config()
            if cfg is None:
                out.unreachable.append(f"{place.label}: no wlc.config")
                continue
            claimed.append(cfg.tick)
            logs = place.logs(cfg)
            for _number, path in batchfmt.list_batches(place.storage, logs, master, max(0, state.batches - 1)):
                for rec in batchfmt.read_manifest(place.storage, path).txns:
                    found[rec.txn] = rec.gtid
            out.seen.append(place.label)
        except (OSError, BatchError, WlcError) as exc:
            out.unreachable.append(f"{place.label}: {type(exc).__name__}: {exc}")
    out.txns = missing(state.tick, claimed, found)
    out.gtids = [found.get(t) or f"{state.dbid}:{t}" for t in out.txns]
    return out
