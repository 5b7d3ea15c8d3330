"""A follower retries a failure by itself (as PostgreSQL's apply worker): a batch damaged while
it follows stops it at that transaction, it tries again with backoff (shown in wlr.config,
wlr.log, status and metrics), never skips it, and goes on once the batch is restored."""

from __future__ import annotations

import glob
import os
import shutil

import pytest
import yaml

import wlr
from wlr.monitor import format_replica_status

from ..scrape import scrape, value
from ..waiting import wait_until
from .helpers import master_rows, rows, sql

pytestmark = pytest.mark.spark
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_batch_damaged_while_following_is_retried_until_restored(spark, master, dbfarm, tmp_path, monkeypatch):
    base = yaml.safe_load(open(os.path.join(ROOT, "tests", "wlc-test.yaml")).read())
    base["replica"].update(beat=0.5, retry_max=2)  # tries after 0.5, 1, 2, 2... seconds
    cfg = tmp_path / "wlc-retry.yaml"
    cfg.write_text(yaml.safe_dump(base))
    monkeypatch.setenv("WLC_CONFIG", str(cfg))
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")
    rep = wlr.replicate("m", replica="r", dbfarm=dbfarm, metrics_port=0)  # following in the background
    assert rep.following() and rep.tick() == 1
    r = {"database": "m", "replica": "r"}
    failures0 = value(scrape(rep.metrics_port), "wlr_failures_total", 0.0, kind="transaction", **r)
    with rep._follower.mutex:  # the follower's next round waits until the batch is damaged
        bad = sql(spark, f"INSERT INTO delta.`{p}` VALUES (2)")
        after = sql(spark, f"INSERT INTO delta.`{p}` VALUES (3)")
        part = glob.glob(os.path.join(master.logs, "m_*", "rows", "s.t", f"wlc_version={bad}", "*.parquet"))[0]
        shutil.copy(part, tmp_path / "kept.parquet")
        with open(part, "r+b") as fh:
            fh.truncate(10)

    def retried(n: int):
        def check() -> dict | None:
            st = rep.status()
            return st if st["error"] and st["retries"] >= n else None

        return check

    st = wait_until(retried(3), 60, "three retries of the damaged transaction")
    assert rep.following()  # the follower did not end at the failure
    assert st["state"] == "failed" and st["error"]["txn"] == str(bad) and "checksum" in st["error"]["cause"]
    assert st["retry_at"] is not None and st["tick"] == bad - 1  # never skipped: 3 waits behind it
    text = format_replica_status(st, dbfarm)
    assert "retry" in text and f"attempt {st['retries']} failed; next at" in text
    log = open(os.path.join(dbfarm, "r", "wlr.log")).read()
    assert f"retry 1 of transaction {bad}" in log and f"retry 3 of transaction {bad}" in log
    assert "in 0.5 s" in log and "in 1 s" in log and "in 2 s" in log  # doubling, up to replica.retry_max
    m = scrape(rep.metrics_port)
    assert value(m, "wlr_state", state="failed", **r) == 1
    assert value(m, "wlr_retries_total", kind="transaction", **r) >= 3
    assert value(m, "wlr_failures_total", kind="transaction", **r) - failures0 >= 1
    assert value(m, "wlr_retry_attempts", **r) >= 3
    assert value(m, "wlr_next_retry_timestamp_seconds", **r) == pytest.approx(st["retry_at"].timestamp(), abs=5)

    shutil.copy(tmp_path / "kept.parquet", part)  # the batch restored: the follower goes on by itself
    wait_until(lambda: rep.tick() == after, 60, f"the follower to apply transaction {after} by itself")
    assert rep.following()
    wait_until(lambda: rep.status()["state"] == "following", 30, "the follower's state to say following again")
    st = rep.status()
    assert st["error"] is None and st["retries"] == 0 and st["retry_at"] is None and st["skipped"] == []
    assert rows(rep.table("s.t")) == master_rows(spark, p) == [(1,), (2,), (3,)]
    assert "RECOVERED at transaction" in open(os.path.join(dbfarm, "r", "wlr.log")).read()
    m = scrape(rep.metrics_port)
    assert value(m, "wlr_state", state="following", **r) == 1 and value(m, "wlr_retry_attempts", **r) == 0
    rep.close()


def test_following_as_a_service_retries_a_failed_first_catch_up(spark, master, dbfarm, tmp_path, monkeypatch):
    """``wlr replicate --follow`` (a call with ``service``) does not end when its first catch-up
    meets a damaged batch: the follower retries it and goes on once the batch is restored."""
    from wlr.replay import ReplicateOptions

    base = yaml.safe_load(open(os.path.join(ROOT, "tests", "wlc-test.yaml")).read())
    base["replica"].update(beat=0.5, retry_max=1)
    cfg = tmp_path / "wlc-retry.yaml"
    cfg.write_text(yaml.safe_dump(base))
    monkeypatch.setenv("WLC_CONFIG", str(cfg))
    p = master.table_path("s.t")
    sql(spark, f"CREATE TABLE delta.`{p}` (i INT) USING delta")
    bad = sql(spark, f"INSERT INTO delta.`{p}` VALUES (1)")
    part = glob.glob(os.path.join(master.logs, "m_*", "rows", "s.t", f"wlc_version={bad}", "*.parquet"))[0]
    shutil.copy(part, tmp_path / "kept.parquet")
    with open(part, "r+b") as fh:
        fh.truncate(10)
    rep = wlr.Replica("m", replica="r", dbfarm=dbfarm)
    rep.run(ReplicateOptions.of(None, follow=True, service=True))  # no ReplicationError: the follower has it
    try:
        assert rep.following()
        wait_until(lambda: rep.status()["retries"] >= 2, 60, "two retries of the damaged transaction")
        assert rep.tick() == bad - 1
        shutil.copy(tmp_path / "kept.parquet", part)
        wait_until(lambda: rep.tick() == bad, 60, f"the follower to apply transaction {bad} by itself")
        assert rows(rep.table("s.t")) == [(1,)] and rep.status()["error"] is None
    finally:
        rep.close()
    last = sql(spark, f"INSERT INTO delta.`{p}` VALUES (2)")  # without the service, a failure is raised as before
    part2 = glob.glob(os.path.join(master.logs, "m_*", "rows", "s.t", f"wlc_version={last}", "*.parquet"))[0]
    with open(part2, "r+b") as fh:
        fh.truncate(10)
    again = wlr.Replica("m", replica="r", dbfarm=dbfarm)
    with pytest.raises(wlr.ReplicationError):
        again.replicate(follow=True)
    assert not again.following()
    again.close()
