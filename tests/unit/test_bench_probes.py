"""The benchmarks time named product functions (bench/probe.py): every name they wrap must still
exist, or `make bench-scale` fails after a refactoring (it did once, after the applier's engines
were split). No Spark session: importing Delta's Python API is enough."""

from __future__ import annotations

import pytest

from bench import many_runs
from bench.probe import Probe

TARGETS = sorted(
    {
        target
        for work in (many_runs.LOGS_WORK, many_runs.SEGMENT_WORK, many_runs.FLOOR_WORK)
        for targets in work.values()
        for target in targets
    }
    | {("wlr.replay", "Round.run")}
)


@pytest.mark.parametrize(("module", "name"), TARGETS, ids=[f"{m}:{n}" for m, n in TARGETS])
def test_every_function_a_benchmark_times_exists(module, name):
    probe = Probe()
    try:
        probe.wrap(module, name, "label")
    finally:
        probe.remove()
