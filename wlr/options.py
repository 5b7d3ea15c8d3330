"""How a replica replays, as the last ``replicate()`` call asked (shared by its set-up and rounds)."""

from __future__ import annotations

from dataclasses import dataclass


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
        relay_wanted: True/False: turn relaying on/off at the next round; None: as recorded.
        level0_until: a compacted batch failed: its range (up to this transaction id) is
            replayed from level 0 (-2: none).
    """

    collapse: bool = True
    compacted: bool = True
    start_snapshot: int | None = None
    parallelism: int = 4
    relay_wanted: bool | None = None
    level0_until: int = -2

    @property
    def use_compacted(self) -> bool:
        """True when replay may use compacted batches (``collapse`` and ``compacted``)."""
        return self.collapse and self.compacted
