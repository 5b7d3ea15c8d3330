"""Waiting for something another thread or process does: a poll with a deadline, never a sleep
that hopes the other side is done."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, what: str | Callable[[], str], interval: float = 0.1) -> T:
    """Call ``predicate`` until it returns a true value, and return that value.

    Args:
        predicate: called with no argument, first at once, then every ``interval`` seconds; an
            exception it raises (an ``assert`` that the process it waits for still runs, say) ends
            the wait and propagates.
        timeout: seconds to wait at most (a float, monotonic clock).
        what: what is waited for, in words ("capture to publish transaction 3"), or a callable
            returning them, called only on a time-out (to add the output seen so far).
        interval: seconds between two calls (0: call again at once, for a predicate that blocks
            a moment itself, e.g. on a queue).

    Returns:
        The first true value ``predicate`` returned.

    Raises:
        AssertionError: ``predicate`` returned no true value within ``timeout`` seconds; the
            message names ``what`` and the time waited.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"waited {timeout:g} s for {detail}, in vain")
        if interval:
            time.sleep(interval)  # the poll's interval, with a deadline
