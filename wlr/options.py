"""How a replica replays, as the last ``replicate()`` call asked (shared by its set-up and rounds)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wlcore.target import Target, parse_until


@dataclass
class ReplayOptions:
    """Options of replay (see :meth:`wlr.Replica.replicate`).

    Attributes:
        collapse: each table's run of DML lands as one commit a segment (False: one commit a
            master transaction, and no compacted batches).
        compacted: replay through level-1/2 compacted batches where they fit.
        start_snapshot: the snapshot (its transaction id) a new replica starts from; None: the
            newest at or before the target.
        parallelism: tables applied at once (``replica.parallelism``).
        rewrite_bytes: keyed tables up to this size (bytes) take a collapsed segment as one whole
            rewrite (:mod:`wlr.apply`, ``replica.rewrite_bytes``; 0: always a MERGE).
        deltars_bytes: tables up to this size (bytes) that delta-rs writes exactly take a segment
            through delta-rs, with no Spark job (:mod:`wlr.apply`, ``replica.deltars_bytes``; 0: never).
        relay_wanted: True/False: turn relaying on/off at the next round; None: as recorded.
        level0_until: a compacted batch failed: its range (up to this transaction id) is
            replayed from level 0 (-2: none).
    """

    collapse: bool = True
    compacted: bool = True
    start_snapshot: int | None = None
    parallelism: int = 4
    rewrite_bytes: int = 16 * 1024 * 1024
    deltars_bytes: int = 256 * 1024 * 1024
    relay_wanted: bool | None = None
    level0_until: int = -2

    @classmethod
    def of(cls, cfg) -> "ReplayOptions":
        """The defaults of the ``replica`` settings ``cfg`` (:class:`wlcore.settings.ReplicaSettings`)."""
        return cls(
            cfg.collapse, parallelism=cfg.parallelism, rewrite_bytes=cfg.rewrite_bytes, deltars_bytes=cfg.deltars_bytes
        )

    @property
    def use_compacted(self) -> bool:
        """True when replay may use compacted batches (``collapse`` and ``compacted``)."""
        return self.collapse and self.compacted


@dataclass(frozen=True)
class ReplicateCall:
    """One ``replicate()`` call, its ``until`` parsed once (see :meth:`wlr.Replica.replicate` for
    each option).

    Attributes:
        target: ``until`` parsed (:func:`wlcore.target.parse_until`).
        until: the target as the caller gave it (messages name it so).
        follow, timeout, collapse, snapshot, compacted, relay, tables, where, empty, metrics_port:
            as :meth:`wlr.Replica.replicate` takes them (timeout in seconds).
        service: following as a service (``wlr replicate --follow``): a failure of the first
            catch-up is retried by the follower (:class:`wlr.follow.Follower`), not raised.
    """

    target: Target
    until: int | str | datetime | None = None
    follow: bool | None = None
    timeout: float | None = None
    collapse: bool | None = None
    snapshot: int | None = None
    compacted: bool = True
    relay: bool | None = None
    tables: str | list[str] | None = None
    where: dict[str, str] | None = None
    empty: bool = False
    metrics_port: int | str | None = None
    service: bool = False

    @classmethod
    def of(cls, until: int | str | datetime | None = None, **options: Any) -> ReplicateCall:
        """The call for ``until`` (parsed here, once) and ``options`` (keywords of :meth:`wlr.Replica.replicate`).

        Raises:
            TargetError: ``until`` is malformed.
            TypeError: an option that :meth:`wlr.Replica.replicate` does not take.
        """
        return cls(parse_until(until), until, **options)
