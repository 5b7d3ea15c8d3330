"""The conformance suite: for every scenario (a Delta feature, a kind of write, a writer
engine, a limit of the change feed), on a master whose capture keeps up (``live``) and on
one whose capture was away while the statements ran (``late``), replayed with collapse on
(``collapsed``) and off (``per_txn``), the replica table equals the master table: content
as a multiset, definition (types, nullability, comments, generation, identity, defaults,
partitioning, clustering, constraints, carried table features), DESCRIBE DETAIL, and what
delta-rs reads."""

from __future__ import annotations

import json
import os

import pytest

from .conftest import COLLAPSE, chosen
from .harness import MODES, SCHEMA

# the first test builds the whole conformance run (a session fixture: every scenario written,
# captured and replayed in both modes), which takes longer than pytest-timeout's default
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2700)]


@pytest.mark.parametrize("replay", list(COLLAPSE))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", chosen(), ids=lambda s: s.name)
def test_replica_equals_master(conformance, scenario, mode, replay):
    diffs = conformance.differences(scenario, mode, replay)
    assert not diffs, f"{scenario.name} ({mode}, {replay}):\n  " + "\n  ".join(diffs)


def _limits():
    return [s for s in chosen() if s.name.startswith("limit_")]


@pytest.mark.parametrize("scenario", _limits(), ids=lambda s: s.name)
def test_change_feed_limits_are_named_where_people_look(conformance, scenario):
    """The late master met each limit: ``wlc status`` (wlc.config), ``wlc.log`` and a
    warning name the table; the live master, keeping up, met none (but a change feed
    switched off, which is met whenever it happens)."""
    farm = conformance.farm
    table = f"{SCHEMA}.{scenario.name}"
    cfg = open(os.path.join(farm, "late", "wlc.config")).read()
    notes = json.loads(next(line.split("=", 1)[1] for line in cfg.splitlines() if line.startswith("feed_notes=")))
    assert table in notes, f"wlc status names no change-feed limit for {table}: {notes}"
    assert f"CHANGE FEED {table}: " in open(os.path.join(farm, "late", "wlc.log")).read()
    assert any(table in w for w in conformance.warned["late"])
    live_cfg = open(os.path.join(farm, "live", "wlc.config")).read()
    assert (f'{SCHEMA}.{scenario.name}"' in live_cfg) == (scenario.name == "limit_feed_off")


def test_every_version_is_published_once_and_watermarks_never_go_back(conformance):
    """Both masters published each Delta version of a scenario's table at most once, in order (a
    drop starts its versions again), and their logs keep capture's promises (tests/watermarks.py)."""
    from tests.fault.helpers import published
    from tests.watermarks import problems

    assert problems(conformance.farm) == []
    for mode in MODES:
        lives: dict[str, list[list[int]]] = {}  # each table's versions, a list per life between drops
        for rec in published(os.path.join(conformance.farm, mode, "wlc_logs"), mode):
            if rec.ddl == "drop":
                lives.setdefault(rec.table, [[]]).append([])
            elif rec.version is not None:
                lives.setdefault(rec.table, [[]])[-1].append(rec.version)
        for table, parts in lives.items():
            for versions in parts:
                assert versions == sorted(set(versions)), f"{mode}: {table} published versions {parts}"
