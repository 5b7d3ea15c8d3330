"""Timers around product functions, from outside: a benchmark wraps the functions it wants to
see (module functions, methods, class- and static methods) in its own process, runs the product,
reads the seconds and calls per label, and puts the originals back. Nothing of the product is
changed on disk.

A label's seconds are the wall time of its calls summed over every thread (threads applying
tables in parallel add up), a call nested inside another call of the same label counted once.
"""

from __future__ import annotations

import functools
import importlib
import threading
import time
from collections import defaultdict


class Probe:
    """Timers on named product functions.

    ``probe.wrap("wlcore.batch", "read_manifest", "read manifests")`` times
    ``wlcore.batch.read_manifest`` wherever it is called through its module; a function another
    module imported by name is wrapped there (``probe.wrap("wlr.replay", "plan", "plan")``);
    ``probe.wrap("wlr.replay", "Round._progress", ...)`` wraps a method of a class.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, module: str, name: str, label: str) -> None:
        owner: object = importlib.import_module(module)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        raw = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        fn = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            active = self._local.__dict__.setdefault("active", set())
            if label in active:
                return fn(*args, **kwargs)
            active.add(label)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - t0
                active.discard(label)
                with self._lock:
                    self.seconds[label] += took
                    self.calls[label] += 1

        new = type(raw)(timed) if isinstance(raw, (classmethod, staticmethod)) else timed
        setattr(owner, attr, new)
        self._undo.append((owner, attr, raw))

    def remove(self) -> None:
        """Put every wrapped function back."""
        for owner, attr, raw in reversed(self._undo):
            setattr(owner, attr, raw)
        self._undo.clear()

    def totals(self) -> dict[str, tuple[float, int]]:
        """``{label: (seconds, calls)}``."""
        return {k: (self.seconds[k], self.calls[k]) for k in self.seconds}
