"""Shared fixtures: one Spark session per test run, a fresh dbfarm per test."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("WLC_CONFIG", str(ROOT / "tests" / "wlc-test.yaml"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def spark():
    import wlc

    session = wlc.spark_session()
    yield session
    session.stop()


@pytest.fixture
def dbfarm(tmp_path, monkeypatch):
    farm = tmp_path / "dbfarm"
    farm.mkdir()
    monkeypatch.setenv("WLC_DBFARM", str(farm))
    yield str(farm)
    import wlc
    import wlr
    for mod in (wlc, wlr):
        cur = getattr(mod, "_current", None)
        if cur is not None:
            cur.close()
            mod._current = None
    # masters register their schemas in the one session's catalog: the next test's dbfarm
    # must find those names free (the folders are this test's, about to go)
    from pyspark.sql import SparkSession
    session = SparkSession.getActiveSession()
    if session is not None:
        for db in session.catalog.listDatabases():
            if db.name != "default":
                session.sql(f"DROP SCHEMA IF EXISTS `{db.name}` CASCADE")


@pytest.fixture
def master(spark, dbfarm):
    """Master database ``m`` with beat 0 (a batch per transaction), closed after the test."""
    import wlc

    m = wlc.master("m", dbfarm=dbfarm)
    wlc.beat(0)
    yield m
    m.close()
