"""Shared fixtures: one Spark session per test process (per worker under pytest-xdist), a fresh dbfarm per test."""

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
def spark(tmp_path_factory):
    """The test run's Spark session, with s3a (the S3 tests read their server through it);
    the processes the tests start keep ``spark.s3a: auto`` and start without the AWS SDK."""
    import yaml

    import wlc

    base = os.environ["WLC_CONFIG"]
    with open(base) as fh:
        cfg = yaml.safe_load(fh) or {}
    cfg.setdefault("spark", {})["s3a"] = True
    # this session lives for the whole run: C2's compiled code pays off here (the settings
    # give the short-lived processes the tests start C1 only)
    conf = cfg["spark"].setdefault("conf", {})
    java = conf.get("spark.driver.extraJavaOptions", "").split()
    conf["spark.driver.extraJavaOptions"] = " ".join(o for o in java if not o.startswith("-XX:TieredStopAtLevel="))
    with_s3a = tmp_path_factory.mktemp("config") / "wlc-test-s3a.yaml"
    with_s3a.write_text(yaml.safe_dump(cfg))
    os.environ["WLC_CONFIG"] = str(with_s3a)
    try:
        # a warehouse folder of its own: a schema made without a location lands there, not in
        # the user's cache folder (the default), where a master of another test worker would see it
        session = wlc.spark_session(**{"spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse"))})
    finally:
        os.environ["WLC_CONFIG"] = base
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def published_logs_keep_their_promises(request):
    """After every test that has a ``tmp_path``, every master log it published there holds
    consecutive transaction ids whose times and batch watermarks never go back (tests/watermarks.py)."""
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is not None:
        from tests.watermarks import problems

        found = problems(str(root))
        assert not found, "published logs broke capture's promises:\n  " + "\n  ".join(found[:20])


@pytest.fixture
def dbfarm(tmp_path, monkeypatch):
    farm = tmp_path / "dbfarm"
    farm.mkdir()
    monkeypatch.setenv("WLC_DBFARM", str(farm))
    yield str(farm)
    _forget_databases()


def _forget_databases() -> None:
    """Close the master and replica a test left current, and drop the schemas masters
    registered in the one session's catalog: the next test's dbfarm must find those names
    free (the folders are this test's, about to go)."""
    import wlc
    import wlr

    for mod in (wlc, wlr):
        cur = getattr(mod, "_current", None)
        if cur is not None:
            cur.close()
            mod._current = None
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


@pytest.fixture(scope="session")
def s3_server():
    """An S3-compatible server (moto's server mode) on 127.0.0.1, started for this test run
    and stopped by its process id; yields its endpoint URL."""
    from tests.s3server import start, stop

    proc, endpoint = start()
    try:
        yield endpoint
    finally:
        stop(proc)


@pytest.fixture
def s3(s3_server, tmp_path, monkeypatch):
    """A fresh bucket on the test's S3 server, with ``storage.s3`` pointing there (through a
    WLC_CONFIG file merged from the test settings) and, when a Spark session runs, its s3a
    settings too; yields ``s3://<bucket>``."""
    import uuid

    import yaml

    from wlcore.storage import Storage

    base = yaml.safe_load((ROOT / "tests" / "wlc-test.yaml").read_text())
    base["storage"] = {"s3": {"endpoint_url": s3_server, "key": "testing", "secret": "testing", "region": "us-east-1"}}
    cfg = tmp_path / "wlc-s3.yaml"
    cfg.write_text(yaml.safe_dump(base))
    monkeypatch.setenv("WLC_CONFIG", str(cfg))
    import boto3

    bucket = f"wlc-{uuid.uuid4().hex[:10]}"
    boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)
    Storage.of(f"s3://{bucket}").fs.invalidate_cache()
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        from wlcore.session import configure_s3a

        configure_s3a(session)
    yield f"s3://{bucket}"
    _forget_databases()  # a master in the bucket registers its schemas too
