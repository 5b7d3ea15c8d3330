"""Settings and key=value state files."""

import pytest

from wlcore import settings as config
from wlcore.errors import ConfigError
from wlcore.storage import Storage


def test_kv_round_trip(tmp_path):
    st = Storage.of(str(tmp_path))
    values = {"snapshot": "", "logs": "/x/wlc_logs", "state": 1, "beat": "0.5", "write": None}
    path = str(tmp_path / "wlc.config")
    st.write_atomic(path, config.format_kv(values))
    assert config.parse_kv(st.read_text(path)) == {
        "snapshot": "",
        "logs": "/x/wlc_logs",
        "state": "1",
        "beat": "0.5",
        "write": "",
    }
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # nothing left aside


def test_kv_rejects_garbage():
    with pytest.raises(ConfigError, match="wlc.config:2"):
        config.parse_kv("state=1\nnonsense\n", "wlc.config")
    with pytest.raises(ConfigError):
        config.format_kv({"a": "line\nbreak"})


def test_settings_merge_and_env(tmp_path, monkeypatch):
    extra = tmp_path / "x.yaml"
    extra.write_text("master:\n  beat: 7\n")
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    monkeypatch.setenv("WLC_DBFARM", str(tmp_path / "farm"))
    s = config.settings()
    assert s.master.beat == 7
    assert s.capture.settle == 1.0  # untouched defaults survive the merge
    assert config.dbfarm() == str(tmp_path / "farm")
    assert config.dbfarm("rel").endswith("/rel")


def test_settings_bad_yaml(tmp_path, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    monkeypatch.setenv("WLC_CONFIG", str(bad))
    with pytest.raises(ConfigError, match="mapping"):
        config.settings()


@pytest.mark.parametrize("name", ["../etc", "a/b", "a b", "1abc", "", "x`y", "sys.tmp"])
def test_check_name_refuses_paths(name):
    with pytest.raises(ConfigError):
        config.check_name(name, "table")


def test_number():
    assert config.number("2.5", "beat") == 2.5
    for bad in (-1, "x", None, True, float("nan")):
        with pytest.raises(ConfigError):
            config.number(bad, "beat")


def test_misspelled_key_names_the_nearest(tmp_path, monkeypatch):
    extra = tmp_path / "x.yaml"
    extra.write_text("replica:\n  paralelism: 2\n")
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    with pytest.raises(ConfigError, match=r"unknown setting 'replica.paralelism'; did you mean 'replica.parallelism'"):
        config.settings()
    extra.write_text("replca:\n  beat: 2\n")
    with pytest.raises(ConfigError, match=r"did you mean 'replica'"):
        config.settings()
    extra.write_text("replica: 3\n")
    with pytest.raises(ConfigError, match=r"'replica' must be a mapping"):
        config.settings()


def test_spark_conf_takes_any_spark_setting(tmp_path, monkeypatch):
    extra = tmp_path / "x.yaml"
    extra.write_text("spark:\n  conf:\n    spark.cores.max: '2'\n")
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    assert config.settings().spark.conf["spark.cores.max"] == "2"


def test_defaults_ship_inside_the_package():
    path = config.defaults_file("wlc.yaml")
    assert path.is_file() and path.parent.parent.name == "wlcore"
    assert config.defaults_file("log4j2.properties").is_file()


def test_working_folder_config_overrides_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("WLC_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "wlc.yaml").write_text("master:\n  beat: 9\n")
    assert config.settings().master.beat == 9
    extra = tmp_path / "later.yaml"  # WLC_CONFIG is merged after it
    extra.write_text("master:\n  beat: 11\n")
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    assert config.settings().master.beat == 11


def test_command_line_config_option(tmp_path, monkeypatch, capsys):
    from wlr import cli

    monkeypatch.delenv("WLC_CONFIG", raising=False)  # --config sets it; restored after the test
    bad = tmp_path / "bad.yaml"
    bad.write_text("capture:\n  setle: 1\n")
    with pytest.raises(SystemExit) as exc:
        cli.main(["--config", str(bad), "status", str(tmp_path), "r"])
    assert exc.value.code == 2
    assert "did you mean 'capture.settle'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["--config", str(tmp_path / "missing.yaml"), "status", str(tmp_path), "r"])
    assert exc.value.code == 2 and "no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, size",
    [("0", 0), ("16777216", 2**24), ("16 MiB", 2**24), ("64MB", 64 * 10**6), ("1.5 KiB", 1536), ("2gib", 2**31)],
)
def test_sizes_in_bytes(tmp_path, monkeypatch, text, size):
    extra = tmp_path / "x.yaml"
    extra.write_text(f"replica:\n  rewrite_bytes: {text}\n")
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    assert config.settings().replica.rewrite_bytes == size


@pytest.mark.parametrize("text", ["-1", "ten", "16 MiBs", "0.5", "true"])
def test_a_bad_size_names_the_setting_and_the_forms(tmp_path, monkeypatch, text):
    extra = tmp_path / "x.yaml"
    extra.write_text(f"replica:\n  rewrite_bytes: {text}\n")
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    with pytest.raises(ConfigError, match=r"replica.rewrite_bytes.*size in bytes >= 0 \(a number, or with KiB"):
        config.settings()


def test_a_shared_metastore_url_becomes_spark_s_hive_settings():
    from wlcore.session import metastore_conf, metastore_packages

    derby = metastore_conf("jdbc:derby://127.0.0.1:1527/metastore")
    assert derby["spark.sql.catalogImplementation"] == "hive"
    assert derby["spark.hadoop.javax.jdo.option.ConnectionURL"] == "jdbc:derby://127.0.0.1:1527/metastore;create=true"
    assert derby["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.apache.derby.jdbc.ClientDriver"
    assert metastore_packages("jdbc:derby://h:1527/m") == ["org.apache.derby:derbyclient:10.16.1.1"]
    given = metastore_conf("jdbc:derby://h:1527/m;create=false")["spark.hadoop.javax.jdo.option.ConnectionURL"]
    assert given == "jdbc:derby://h:1527/m;create=false"  # the URL's own choice stays
    pg = metastore_conf("jdbc:postgresql://h/hive?user=u")
    assert pg["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    assert metastore_packages("jdbc:postgresql://h/hive")[0].startswith("org.postgresql:postgresql:")
    thrift = metastore_conf("thrift://h:9083")
    assert thrift == {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": "thrift://h:9083"}
    assert metastore_packages("thrift://h:9083") == []
    with pytest.raises(ConfigError, match=r"spark.metastore 'mysql://h/m' is not a metastore URL: give jdbc:derby"):
        metastore_conf("mysql://h/m")


def test_a_shared_catalog_is_the_metastore_setting_or_hive_in_spark_conf(tmp_path, monkeypatch):
    from wlr.catalog import shared_catalog

    assert not shared_catalog()  # the default: each session's own in-memory catalog
    texts = ("spark:\n  metastore: thrift://h:9083\n", "spark:\n  conf:\n    spark.sql.catalogImplementation: hive\n")
    for n, text in enumerate(texts):
        cfg = tmp_path / f"wlc-{n}.yaml"
        cfg.write_text(text)
        monkeypatch.setenv("WLC_CONFIG", str(cfg))
        assert shared_catalog(), text


def test_a_delta_log_store_unsafe_on_s3_is_named_with_the_fix():
    from wlcore.session import s3_log_store_problem

    assert s3_log_store_problem({}) is None  # Delta's default for s3a://: one writing driver
    assert s3_log_store_problem({"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}) is None
    said = s3_log_store_problem({"spark.delta.logStore.class": "io.delta.storage.HDFSLogStore"})
    assert said is not None and said.startswith(
        "spark.delta.logStore.class is io.delta.storage.HDFSLogStore, which does not commit safely to S3; "
        "remove it from spark.conf in config/wlc.yaml"
    )
    # the scheme's own setting is the one Delta uses for s3a://
    both = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore",
            "spark.delta.logStore.class": "io.delta.storage.HDFSLogStore"}  # fmt: skip
    assert s3_log_store_problem(both) is None
