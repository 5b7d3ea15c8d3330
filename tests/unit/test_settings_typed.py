"""Settings as one typed object: validated once when loaded, units in the types, no writes to os.environ."""

import argparse
import os

import pytest
from pydantic import ValidationError

from wlcore import settings as config
from wlcore.errors import ConfigError
from wlcore.settings import Every


def test_typed_values_with_their_units():
    s = config.settings()
    assert isinstance(s.capture.poll_interval, float) and isinstance(s.replica.parallelism, int)
    assert s.master.compact.level1 == Every(3600) and s.master.retention.level0 is None
    assert s.capture.table_features == ["change_feed"] and s.spark.s3a in (True, False, "auto")
    with pytest.raises(ValidationError):
        s.capture.settle = 5  # one object shared by every reader: frozen


def test_loaded_once_and_again_when_a_file_changes(tmp_path, monkeypatch):
    extra = tmp_path / "x.yaml"
    extra.write_text("master:\n  beat: 7\n")
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    first = config.settings()
    assert config.settings() is first and first.master.beat == 7
    extra.write_text("master:\n  beat: 8\n")  # same size, at once: the contents tell
    assert config.settings() is first  # loaded once per process: an edit is read by reload()
    config.reload()
    assert config.settings().master.beat == 8
    monkeypatch.setenv("WLC_DBFARM", str(tmp_path / "other"))
    assert config.settings().dbfarm == str(tmp_path / "other")


def test_an_unchanged_file_is_not_read_again(tmp_path, monkeypatch):
    extra = tmp_path / "x.yaml"
    extra.write_text("master:\n  beat: 7\n")
    old = extra.stat().st_mtime_ns - 10_000_000_000
    os.utime(extra, ns=(old, old))  # written long before it is read: its status tells
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    first = config.settings()
    reads = []
    monkeypatch.setattr(config, "_read", lambda path: reads.append(path) or path.read_text())
    assert config.settings() is first and reads == []
    os.utime(extra, ns=(old + 1, old + 1))  # touched and reloaded: read again, the same text keeps the settings
    config.reload()
    assert config.settings() is first and extra in reads
    extra.write_text("master:\n  beat: 8\n")
    config.reload()
    assert config.settings().master.beat == 8


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("capture:\n  poll_interval: 0\n", "capture.poll_interval must be >= 0.01 seconds, not 0"),
        ("capture:\n  settle: soon\n", "capture.settle must be a number of seconds, not 'soon'"),
        ("master:\n  compact:\n    level1: 4 transactions\n", "master.compact.level1 must be a number of seconds"),
        ("replica:\n  parallelism: 0\n", "replica.parallelism must be a whole number >= 1, not 0"),
        ("spark:\n  s3a: maybe\n", "spark.s3a must be true, false or auto, not 'maybe'"),
        ("spark:\n  conf: 3\n", "setting 'spark.conf' must be a mapping"),
    ],
)
def test_a_bad_value_names_its_file_and_key(tmp_path, monkeypatch, yaml_text, message):
    extra = tmp_path / "x.yaml"
    extra.write_text(yaml_text)
    monkeypatch.setenv("WLC_CONFIG", str(extra))
    with pytest.raises(ConfigError) as exc:
        config.settings()
    assert str(exc.value).startswith(f"{extra}: ") and message in str(exc.value)


def test_config_option_is_chosen_in_the_loader_not_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("WLC_CONFIG", raising=False)
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("replica:\n  beat: 3\n")
    bad.write_text("replica:\n  beet: 3\n")
    try:
        with pytest.raises(SystemExit):
            config.use_config(argparse.Namespace(config=str(bad)))
        assert config.config_file() is None  # a refused file is not chosen
        config.use_config(argparse.Namespace(config=str(good)))
        assert config.config_file() == good.resolve() and config.settings().replica.beat == 3
        assert "WLC_CONFIG" not in os.environ
    finally:
        config.choose_config(None)
    assert config.settings().replica.beat == 5  # the packaged default again


def test_verbose_is_not_written_to_the_environment(monkeypatch):
    from wlcore import commands, session

    monkeypatch.delenv(session.VERBOSE_ENV, raising=False)
    monkeypatch.setattr(session, "_shown", session.threading.Event())
    monkeypatch.setattr(commands.logging, "basicConfig", lambda **kw: None)  # the test run's logging stays
    commands.setup_terminal(argparse.Namespace(verbose=True))
    assert session.verbose() and session.VERBOSE_ENV not in os.environ
