"""Settings and key=value state files."""
import pytest

from wlc import config
from wlc.errors import ConfigError
from wlc.storage import Storage


def test_kv_round_trip(tmp_path):
    st = Storage.of(str(tmp_path))
    values = {"snapshot": "", "logs": "/x/wlc_logs", "state": 1, "beat": "0.5", "write": None}
    path = str(tmp_path / "wlc.config")
    st.write_atomic(path, config.format_kv(values))
    assert config.parse_kv(st.read_text(path)) == {"snapshot": "", "logs": "/x/wlc_logs", "state": "1",
                                                   "beat": "0.5", "write": ""}
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
    assert s["master"]["beat"] == 7
    assert s["capture"]["settle"] == 1.0  # untouched defaults survive the merge
    assert config.dbfarm() == str(tmp_path / "farm")
    assert config.dbfarm("rel") .endswith("/rel")


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
