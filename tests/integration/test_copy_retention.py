"""Shipped copies and relay folders pruned by their own retention, by the master's rules: a
replica reading the pruned copy or relay still reaches every promised point, what was pruned
is not shipped again, and wlc prune / wlr status say what each copy still promises."""

from __future__ import annotations

import os
import re
from datetime import timedelta

import pytest

import wlc
import wlr
from wlc import cli as wlc_cli
from wlcore.logstore import LogStore
from wlcore.ship import prune_if_due
from wlcore.storage import Storage
from wlr import cli as wlr_cli
from wlr.errors import TargetError

from .helpers import master_rows, rows, sql

pytestmark = pytest.mark.spark

SHORT = {"level0": "1d", "snapshots": "1d"}  # two days later: only the newest snapshot's chain stays


def _insert(spark, path: str, *ids: int) -> int:
    for i in ids:
        sql(spark, f"INSERT INTO delta.`{path}` VALUES ({i}, 'v{i}')")
    return wlc.tick()


def _history(spark, master) -> tuple[str, int]:
    """Table s.t: inserts, a snapshot, more inserts, a snapshot (returned), more inserts."""
    t = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{t}` (k INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'k')")
    _insert(spark, t, 1, 2)
    wlc.snapshot()
    _insert(spark, t, 3)
    base = wlc.snapshot().txn
    _insert(spark, t, 4, 5)
    return t, base


def _batches(folder: str) -> list[str]:
    logs = os.path.join(folder, "wlc_logs")
    return [b.name for b in LogStore(Storage.of(logs), folder, logs, "m").batches()]


def test_a_shipped_copy_pruned_by_its_own_retention_still_reaches_what_it_promises(
    spark, master, dbfarm, tmp_path, capsys, monkeypatch
):
    t, base = _history(spark, master)
    dest = str(tmp_path / "far" / "m")
    wlc.ship(dest)
    shipped, at_master = _batches(dest), _batches(master.path)
    later = master.clock() + timedelta(days=2)
    # a shipping pass that runs while the prune deletes (after its first folder went) copies none of them again
    kind, calls, meanwhile = type(Storage.of(dest)), [], []
    unpublish = kind.unpublish

    def unpublish_then_ship(self, path):
        calls.append(path)
        if len(calls) == 2:
            meanwhile.append(wlc.ship(dest))
        return unpublish(self, path)

    with monkeypatch.context() as patch:
        patch.setattr(kind, "unpublish", unpublish_then_ship)
        report = wlc.prune_copy(dest, now=later, retention=SHORT)
    assert len(calls) > 2 and meanwhile[0].batches == [] and meanwhile[0].snapshots == []
    # the batches before the newest snapshot went, in the copy only; the snapshots before it too
    assert report.deleted and all(b in shipped for b in report.deleted if not b.startswith("wlc_snapshot/"))
    assert _batches(master.path) == at_master
    assert sorted(os.listdir(os.path.join(dest, "wlc_snapshot"))) == [str(base)]
    assert report.promise["earliest"]["txn"] == base
    assert f"earliest reachable point: transaction {base}" in "\n".join(report.lines())
    # a replica reading the copy alone reaches every promised point: the end, and each transaction after the base
    rep = wlr.replicate("m", replica="r", logs=dest, follow=False)
    assert rep.tick() == wlc.tick() and rows(rep.table("s.t")) == master_rows(spark, t)
    mid = wlr.replicate("m", replica="mid", logs=dest, until=base + 1, follow=False)
    assert mid.tick() == base + 1
    with pytest.raises(TargetError, match=f"earliest reachable point.*transaction {base}"):
        wlr.replicate("m", replica="old", logs=dest, until=base - 1, follow=False)
    # a shipping pass prunes its copy again once storage.ship_prune (1 h) has passed since the last
    # prune, unless another process prunes it at that moment
    assert prune_if_due(dest, "m", now=later + timedelta(minutes=30)) is None
    with Storage.of(dest).lock(os.path.join(dest, ".wlc-prune.lock"), blocking=False, what="a test"):
        assert prune_if_due(dest, "m", now=later + timedelta(hours=2)) is None
    assert prune_if_due(dest, "m", now=later + timedelta(hours=2)).deleted == []  # nothing more to delete
    # what the copy pruned is not shipped again; what is new is
    kept = _batches(dest)
    assert wlc.ship(dest).batches == [] and _batches(dest) == kept
    last = _insert(spark, t, 6)
    again = wlc.ship(dest)
    assert len(again.batches) == 1 and _batches(dest) == kept + again.batches
    assert wlr.replicate("m", replica="r", logs=dest, follow=False).tick() == last
    # wlc prune: the master's own folder, then every copy it ships to, each saying what it promises
    assert wlc_cli.main(["prune", dbfarm, "m", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"master m ({master.path}):" in out and f"shipped copy {dest} (retention: level0 1d, " in out, out
    assert out.count("earliest reachable point") == 2 and "would delete 0 folders" in out, out
    # wlr status of the replica reading the copy says what the copy still promises
    assert wlr_cli.main(["status", dbfarm, "r"]) == 0
    out = capsys.readouterr().out
    assert re.search(f"source promises +earliest reachable point: transaction {base} ", out), out
    # wlc ship --retention stores the copy's own, and the master notes the copy for wlc prune
    dest2 = str(tmp_path / "far2" / "m")
    assert wlc_cli.main(["ship", dbfarm, "m", dest2, "--retention", "level0=2h,snapshots=off"]) == 0
    assert "level0=2h\nsnapshots=off" in open(os.path.join(dest2, "wlc.retention")).read()
    assert open(os.path.join(master.path, "wlc.copies")).read().split() == [dest, dest2]
    # --retention needs the copy it is for
    assert wlc_cli.main(["prune", dbfarm, "m", "--retention", "level0=1h"]) == 2
    assert "name the copy with --copy URL" in capsys.readouterr().err


def test_a_relay_pruned_by_its_replica_still_serves_its_promise(spark, master, dbfarm, capsys):
    t, base = _history(spark, master)
    r1 = wlr.replicate("m", replica="r1", relay=True, follow=False)
    relay = os.path.join(r1.path, "wlr_relay")
    relayed = _batches(relay)
    later = master.clock() + timedelta(days=2)
    report = wlr.prune("r1", now=later, retention=SHORT)
    assert report.deleted and set(_batches(relay)) < set(relayed)
    assert report.promise["earliest"]["txn"] == base
    r2 = wlr.replicate(source="r1", replica="r2", follow=False)
    assert r2.tick() == r1.tick() and rows(r2.table("s.t")) == master_rows(spark, t)
    # the relay's next rounds relay what is new, never what it pruned
    kept = _batches(relay)
    last = _insert(spark, t, 6)
    wlr.replicate("m", replica="r1", follow=False)
    assert _batches(relay)[: len(kept)] == kept and len(_batches(relay)) == len(kept) + 1
    assert wlr.replicate(source="r1", replica="r2", follow=False).tick() == last
    # the command line: wlr prune, and wlr status of the relay saying what it promises
    assert wlr_cli.main(["prune", dbfarm, "r1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"relay {relay} (retention: level0 1d, " in out and "would delete 0 folders" in out, out
    assert wlr_cli.main(["status", dbfarm, "r1"]) == 0
    out = capsys.readouterr().out
    assert re.search(f"relay promises +earliest reachable point: transaction {base} ", out), out
    # a replica that relays nothing: a clear refusal naming the fix
    wlr.replicate("m", replica="plain", follow=False)
    assert wlr_cli.main(["prune", dbfarm, "plain"]) == 2
    assert "relays nothing" in capsys.readouterr().err
