"""Named crash points for fault tests.

``WLC_CRASH_AT=<name>[,<name>...]`` in the environment makes the process kill itself with
SIGKILL when the real code path reaches a point of that name, so a test can prove that a
crash exactly there loses and repeats nothing. Unset (always, outside tests), a crash point
costs one dictionary look-up.
"""

from __future__ import annotations

import os
import signal

ENV = "WLC_CRASH_AT"


def crash_point(name: str) -> None:
    """Kill this process (SIGKILL, no clean-up) when ``name`` is listed in ``$WLC_CRASH_AT``
    (the fault tests' crash points).

    Args:
        name (str): the crash point's name (``compact.staged``, ``ship.verified``...).
    """
    wanted = os.environ.get(ENV)
    if wanted and name in wanted.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
