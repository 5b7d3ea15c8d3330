"""Delta's jars: resolved by Ivy at the first start, named directly afterwards (wlcore.session)."""

import json

from wlcore.session import DeltaJars


class _Conf:
    def __init__(self, jars):
        self.jars = jars

    def get(self, key):
        return self.jars if key == "spark.jars" else None


class _Session:
    """What DeltaJars.remember reads of a started session: its SparkConf's spark.jars."""

    def __init__(self, jars):
        self.sparkContext = type("SC", (), {"getConf": lambda _self: _Conf(jars)})()


def _options(builder) -> dict:
    """What a ``SparkSession.Builder`` (no JVM started) was configured with."""
    return dict(builder._options)


def _builder():
    from pyspark.sql import SparkSession

    return SparkSession.Builder()


def test_the_first_start_resolves_and_later_ones_name_the_recorded_jars(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a, b = tmp_path / "a.jar", tmp_path / "b.jar"
    a.write_bytes(b"x")
    b.write_bytes(b"y")
    first = DeltaJars([], {})
    assert first.recorded is None
    assert "spark.jars.packages" in _options(first.configure(_builder()))  # Ivy resolves Delta's packages
    first.remember(_Session(f"file://{a},file://{b}"))
    later = DeltaJars([], {})
    assert later.recorded == [f"file://{a}", f"file://{b}"]
    options = _options(later.configure(_builder()))
    assert options["spark.jars"] == f"file://{a},file://{b}" and "spark.jars.packages" not in options
    # other packages or other Ivy settings are resolved anew
    assert DeltaJars(["org.apache.hadoop:hadoop-aws:3.5.0"], {}).recorded is None
    assert DeltaJars([], {"spark.jars.repositories": "https://repo.example"}).recorded is None
    assert DeltaJars([], {"spark.sql.shuffle.partitions": "4"}).recorded == later.recorded


def test_a_jar_gone_from_the_cache_or_a_damaged_record_resolves_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a = tmp_path / "a.jar"
    a.write_bytes(b"x")
    DeltaJars([], {}).remember(_Session(f"file://{a}"))
    assert DeltaJars([], {}).recorded == [f"file://{a}"]
    a.unlink()
    assert DeltaJars([], {}).recorded is None
    record = DeltaJars([], {}).record
    record.write_text("{not json")
    assert DeltaJars([], {}).recorded is None
    record.write_text(json.dumps({"jars": []}))
    assert DeltaJars([], {}).recorded is None
