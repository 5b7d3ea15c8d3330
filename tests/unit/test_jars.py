"""Delta's jars: resolved by Ivy at the first start, named directly afterwards (wlcore.session)."""

import json
from pathlib import Path

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


def _local_repository(root) -> str:
    """A Maven repository in folder ``root`` holding ``com.example:fake:1.0`` (a jar and its pom);
    returns its ``file://`` URL."""
    import zipfile

    folder = root / "com" / "example" / "fake" / "1.0"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "fake-1.0.jar", "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    (folder / "fake-1.0.pom").write_text(
        "<project><modelVersion>4.0.0</modelVersion><groupId>com.example</groupId>"
        "<artifactId>fake</artifactId><version>1.0</version></project>"
    )
    return root.as_uri()


def test_a_metastore_driver_is_resolved_from_the_repositories_and_ivy_folder_spark_is_given(tmp_path, monkeypatch):
    """spark.jars.repositories and spark.jars.ivy reach the driver's resolution as Spark's own
    resolution of spark.jars.packages reads them (a local repository: no network)."""
    from wlcore.session import ivy_retrieve

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repository = _local_repository(tmp_path / "repo")
    conf = {
        "spark.jars.repositories": f"https://repo.invalid/none, {repository}",
        "spark.jars.ivy": str(tmp_path / "ivy"),
    }
    (jar,) = ivy_retrieve("com.example:fake:1.0", conf)
    assert jar == str(tmp_path / "cache" / "wlc" / "jars" / "com.example" / "fake" / "1.0" / "fake-1.0.jar")
    assert (tmp_path / "ivy" / "cache" / "com.example" / "fake").is_dir()  # Spark's <spark.jars.ivy>/cache
    (tmp_path / "repo" / "com").rename(tmp_path / "gone")
    assert ivy_retrieve("com.example:fake:1.0", conf) == [jar]  # resolved once: named from the cache folder


def test_a_metastore_driver_is_resolved_through_an_ivy_settings_file(tmp_path, monkeypatch):
    from wlcore.session import ivy_retrieve

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repository = _local_repository(tmp_path / "repo")
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(
        f'<ivysettings><caches defaultCacheDir="{tmp_path / "own-cache"}"/><settings defaultResolver="mine"/>'
        f'<resolvers><ibiblio name="mine" m2compatible="true" root="{repository}"/></resolvers></ivysettings>'
    )
    (jar,) = ivy_retrieve("com.example:fake:1.0", {"spark.jars.ivySettings": str(settings)})
    assert jar.endswith("fake-1.0.jar")
    assert (tmp_path / "own-cache" / "com.example").is_dir()  # the file's own cache, as Spark keeps it


def test_ivy_settings_that_name_no_file_or_a_repository_without_the_artifact_are_refused(tmp_path, monkeypatch):
    import pytest

    from wlcore.errors import ConfigError
    from wlcore.session import ivy_options, ivy_retrieve

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match=r"spark.jars.ivySettings '/no/such.xml' names no file.*config/wlc.yaml"):
        ivy_options({"spark.jars.ivySettings": "/no/such.xml"}, tmp_path)
    settings = tmp_path / "ivysettings.xml"
    empty = (tmp_path / "empty").as_uri()
    settings.write_text(
        '<ivysettings><settings defaultResolver="mine"/>'
        f'<resolvers><ibiblio name="mine" m2compatible="true" root="{empty}"/></resolvers></ivysettings>'
    )
    with pytest.raises(
        ConfigError, match="could not resolve com.example:fake:1.0 from the repositories of spark.jars.ivySettings"
    ):
        ivy_retrieve(
            "com.example:fake:1.0", {"spark.jars.ivySettings": str(settings), "spark.jars.ivy": str(tmp_path / "ivy")}
        )
    assert not list((tmp_path / "cache").rglob("*.jar"))  # nothing half-resolved is named later


def test_repositories_are_chained_after_the_settings_files_default_resolver(tmp_path):
    import xml.etree.ElementTree as ET

    from wlcore.session import ivy_options

    settings = tmp_path / "mine.xml"
    settings.write_text('<ivysettings><settings defaultResolver="corp"/></ivysettings>')
    options = ivy_options(
        {"spark.jars.ivySettings": f"file://{settings}", "spark.jars.repositories": "https://a,https://b"}, tmp_path
    )
    assert options == ["-settings", str(tmp_path / "ivysettings.xml")]  # no -cache: the file's own
    root = ET.parse(tmp_path / "ivysettings.xml").getroot()
    assert root.find("include").get("file") == str(settings)
    chain = root.find("resolvers/chain")
    assert root.find("settings").get("defaultResolver") == chain.get("name")
    assert [(r.tag, r.get("ref") or r.get("root")) for r in chain] == [
        ("resolver", "corp"),
        ("ibiblio", "https://a"),
        ("ibiblio", "https://b"),
    ]
    # without any Ivy setting: Ivy's defaults (Maven Central) and Spark's Ivy folder, as before
    assert ivy_options({}, tmp_path) == ["-cache", str(Path.home() / ".ivy2.5.2" / "cache")]
