"""The wait of ``replicate(until=...)`` for a target the master has not published yet.

Said at once (``say``: a warning on the ``wlr.replica`` logger and a line in ``wlr.log``,
which the command line prints), with what the master has published and whether capture is
alive; then shown as a progress bar over the timeout on a terminal or in a notebook (tqdm),
or, where no bar is shown (a log file, a pipe), as a line every ``every`` seconds. When
the timeout ends, :meth:`TargetWait.timed_out` states capture's liveness as read.
"""

from __future__ import annotations

import time
from typing import Callable

from .planner import Target
from .target import Published, meaning


class TargetWait:
    """One ``replicate(until=...)`` call's wait for its target.

    Args:
        target (Target): the target.
        until (int | str | datetime | None): the target as the caller gave it (for the messages).
        timeout (float): seconds the call waits (``replica.timeout``).
        say (Callable[[str], None]): writes one line for people (the replica's log at WARNING level).
        every (float): seconds between lines where no progress bar is shown.
        clock (Callable[[], float]): monotonic seconds (tests give their own).
    """

    def __init__(
        self,
        target: Target,
        until,
        timeout: float,
        say: Callable[[str], None],
        every: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.target, self.until, self.timeout, self.say = target, until, timeout, say
        self.every, self.clock = every, clock
        self.started: float | None = None
        self._last_line = 0.0
        self.bar = None

    @property
    def waiting(self) -> bool:
        """True once the wait has been said (the target was found not published)."""
        return self.started is not None

    def update(self, pub: Published) -> None:
        """The target is not published yet: the first call says so; later calls move the bar or,
        without one, write a line every ``every`` seconds.

        Args:
            pub (Published): what the source has published now.
        """
        now = self.clock()
        named = meaning(self.until, self.target)
        if self.started is None:
            self.started = self._last_line = now
            self.say(f"waiting for {named}: {pub.describe()}; waiting up to {self.timeout:g} s (replica.timeout)")
            from tqdm.auto import tqdm

            # a bar on a terminal or in a notebook only (disable=None); lines elsewhere
            self.bar = tqdm(
                total=round(self.timeout),
                desc=f"waiting for {self._short()}",
                unit="s",
                disable=None,
                leave=False,
                bar_format="{desc}: {bar} {n:.0f}/{total:.0f} s{postfix}",
            )
        elapsed = now - self.started
        if self.bar is not None and not self.bar.disable:
            self.bar.n = min(round(elapsed), self.bar.total)
            self.bar.set_postfix_str(self._status(pub), refresh=True)
        elif now - self._last_line >= self.every:
            self._last_line = now
            self.say(f"still waiting for {named} ({elapsed:.0f} of {self.timeout:g} s): {pub.describe()}")

    def timed_out(self, pub: Published, replica_tick: int, cli: bool = False) -> str:
        """The message when the timeout ended: what was waited for, where the replica and
        the master stand, capture's liveness as read, and how to wait longer.

        Args:
            pub (Published): what the source has published, read at the end of the wait.
            replica_tick (int): the replica's last applied transaction (-1: none).
            cli (bool): word the fix for the command line (``wlr replicate``, ``--config``)
                instead of the Python API (``replicate()``, ``timeout=``).

        Returns:
            str: the message (a :class:`wlr.ReplicationTimeout` carries it).
        """
        text = (
            f"waited {self.timeout:g} s for {meaning(self.until, self.target)}; the replica is at transaction "
            f"{replica_tick} and {pub.describe()}. "
        )
        if cli:
            return text + (
                "Run wlr replicate again or set a larger replica.timeout (in a --config FILE) to wait "
                "longer, or choose a published target (wlr log <dbfarm> <master> lists them)"
            )
        return text + (
            "Call replicate() again or give a larger timeout= (replica.timeout) to wait longer, or "
            "choose a published target (wlr.transactions() lists them)"
        )

    def close(self) -> None:
        """Take the progress bar away."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _short(self) -> str:
        return f"transaction {self.target.upto_txn}" if self.target.kind == "txn" else meaning(self.until, self.target)

    @staticmethod
    def _status(pub: Published) -> str:
        wm = "stopped" if pub.stopped else (pub.watermark.strftime("%H:%M:%S") if pub.watermark else "none")
        return ", ".join(p for p in (f"published {pub.tick}", f"watermark {wm}", pub.capture_text()) if p)
