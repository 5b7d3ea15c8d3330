"""Master tables capture holds back: one table that cannot be read never stops capture of the others.

A table whose commits or rows cannot be read (a corrupt or missing file, a permission
error, a damaged commit) is *held*: its cursor stays where it was, the other tables'
transactions go on being published, and it is read again with backoff (the poll interval,
doubling up to ``capture.retry_max`` seconds), as PostgreSQL's apply worker retries.
``wlc status``, ``wlc.log`` and the ``wlc.master`` log name it with its cause.

The watermark: while a table is held, every published watermark stays before its first
commit not yet read (or, when its log itself cannot be read, before the last moment it was
read completely), so no replay by instant passes a commit capture has not seen. Once the
table can be read again its transactions are published with the next ids. Those
committed before transactions already published are *captured late*: their ``time`` is
their place in the order of publication (just after the transaction published before them)
and their ``committed`` keeps the commit time. Ids and times therefore stay in one order,
and replay refuses an instant between a late transaction's commit and its place (no exact
state of the master exists in its replica there); every other instant stays a consistent cut.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

_EPS = timedelta(microseconds=1)


@dataclass
class Hold:
    """A held table: ``cause``, held ``since`` (UTC), the watermark stays before ``bound``
    (None: no bound known), ``attempts`` made, next attempt at ``next_try`` (monotonic s)."""

    table: str
    cause: str
    since: datetime
    bound: datetime | None
    attempts: int = 1
    next_try: float = 0.0
    next_at: datetime | None = None  # the next attempt as a UTC instant (for status)
    kind: str = "log"  # what could not be read: "log" (released by a scan) or "rows" (by a write)


class Holds:
    """The held tables of one capture, with their backoff (PostgreSQL's apply worker retries the same way).

    Args:
        interval (float): seconds before the first retry (at least 0.05); doubled at each attempt.
        longest (float): the longest wait between two attempts, seconds (``capture.retry_max``).
    """

    def __init__(self, interval: float, longest: float):
        self.interval, self.longest = max(interval, 0.05), max(longest, interval)
        self.held: dict[str, Hold] = {}

    def hold(self, table: str, cause: str, bound: datetime | None, now: datetime, kind: str = "log") -> Hold:
        """Hold ``table`` (again), its next attempt after the backoff.

        Args:
            table (str): the table's qualified name.
            cause (str): why it cannot be read, one line.
            bound (datetime | None): the watermark (UTC) stays before it (None: no bound known; a
                hold again keeps the earlier bound).
            now (datetime): the current instant (UTC): held ``since`` on the first hold.
            kind (str): what could not be read, ``"log"`` (its commits: a scan that reads them
                releases it) or ``"rows"`` (its change rows: only a write of them releases it).

        Returns:
            Hold: the hold.
        """
        old = self.held.get(table)
        if old is not None:
            bound = old.bound if bound is None or (old.bound is not None and old.bound < bound) else bound
        attempts = old.attempts + 1 if old else 1
        wait = min(self.interval * 2 ** (attempts - 1), self.longest)
        hold = Hold(
            table,
            cause,
            old.since if old else now,
            bound,
            attempts,
            time.monotonic() + wait,
            now + timedelta(seconds=wait),
            kind,
        )
        self.held[table] = hold
        return hold

    def due(self, table: str) -> bool:
        """True when ``table`` is not held, or its next attempt is due.

        Args:
            table (str): the table's qualified name.
        """
        hold = self.held.get(table)
        return hold is None or time.monotonic() >= hold.next_try

    def release(self, table: str, kind: str | None = None) -> bool:
        """The table was read again: release it when what held it was read.

        Args:
            table (str): the table's qualified name.
            kind (str | None): what was read: its log (``"log"``), its rows (``"rows"``), or None:
                whatever held it.

        Returns:
            bool: True when that released it.
        """
        hold = self.held.get(table)
        if hold is None or (kind is not None and hold.kind != kind):
            return False
        del self.held[table]
        return True

    def watermark(self, watermark: datetime) -> datetime:
        """``watermark`` kept before every held table's bound (1 microsecond before the earliest).

        Args:
            watermark (datetime): the watermark capture would publish (UTC).

        Returns:
            datetime: the watermark to publish.
        """
        bounds = [h.bound for h in self.held.values() if h.bound is not None]
        return min([watermark] + [b - _EPS for b in bounds])

    def status(self) -> dict[str, str]:
        """``{table: text}`` for status: the cause, since when, the attempts and the next one."""
        return {
            t: (
                f"{h.cause} (held since {h.since.isoformat()}, {h.attempts} attempt"
                f"{'s' if h.attempts != 1 else ''}, next at {h.next_at.isoformat() if h.next_at else '-'})"
            )
            for t, h in sorted(self.held.items())
        }


def place_in_order(items: list, last: datetime | None) -> None:
    """Give ``items`` times that never go back: an item committed before ``last`` (the
    transaction published or staged before it) or before the item ahead of it takes the time
    just after, keeping its commit time in ``committed`` (it is captured late).

    Args:
        items (list[Planned]): planned transactions, in the order they get their ids; changed in place.
        last (datetime | None): the time of the last transaction published or staged (UTC; None: none).
    """
    for item in items:
        if last is not None and item.time < last:
            item.committed = item.committed or item.time
            item.time = last + _EPS
        last = item.time
