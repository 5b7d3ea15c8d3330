"""Prometheus metrics without Spark: the port setting, the server, gauges read at scrape time,
a log folder's size by level, a shipped copy's distance, the commands' options, and the
Grafana dashboard in the docs using only metrics that are exported."""

from __future__ import annotations

import json
import os
import re
import socket

import pytest
import yaml

from wlcore import metrics
from wlcore.metrics import Family, Live, LogUsage, MetricsError, port_of
from wlcore.settings import settings
from wlcore.ship import ShipMetrics
from wlcore.state import MasterState, write_master_state
from wlcore.storage import Storage

from ..scrape import scrape, value

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "docs", "how-to", "grafana-dashboard.json")


def test_ports_as_given_and_as_set():
    assert port_of(None) is None and port_of("off") is None and port_of("") is None
    assert port_of(9187) == 9187 and port_of("0") == 0
    for bad in ("http", -1, 70000, True):
        with pytest.raises(MetricsError, match="port number from 0 to 65535"):
            port_of(bad)
    assert settings().metrics.port is None and settings().metrics.host == "127.0.0.1"  # off by default


def test_a_bad_metrics_port_setting_is_refused(tmp_path, monkeypatch):
    from wlcore.errors import ConfigError

    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({"metrics": {"port": "ninety"}}))
    monkeypatch.setenv("WLC_CONFIG", str(cfg))
    with pytest.raises(ConfigError, match=r"metrics\.port"):
        settings()


class _Source:
    def __init__(self, value: float, fail: bool = False):
        self.value, self.fail = value, fail

    def samples(self):
        if self.fail:
            raise OSError("the state file is being replaced")
        yield "test_live_value", {"database": f"d{self.value:g}"}, self.value


def test_gauges_are_read_at_scrape_time_and_an_unreadable_source_is_left_out():
    live = Live([Family("test_live_value", "a value read at scrape time", ("database",))])
    good, bad = _Source(1), _Source(2, fail=True)
    live.add(good)
    live.add(bad)
    port = metrics.serve(0)
    assert port is not None and metrics.serve(0) == port  # one server for the port asked
    got = scrape(port)
    assert value(got, "test_live_value", database="d1") == 1
    assert not [k for k in got if k[0] == "test_live_value" and ("database", "d2") in k[1]]
    good.value = 5
    assert value(scrape(port), "test_live_value", database="d5") == 5  # read again at every scrape
    live.remove(good)
    assert not [k for k in scrape(port) if k[0] == "test_live_value"]


def test_a_port_taken_by_another_process_is_refused_with_the_fix():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsError, match=f"cannot serve metrics on 127.0.0.1:{port}") as err:
            metrics.serve(port)
        assert "metrics_port=" in str(err.value) and "--metrics-port" in err.value.cli


def test_log_usage_counts_batches_and_bytes_by_level(tmp_path):
    logs = tmp_path / "logs"
    for name, size in (("m_000000000000", 10), ("m_000000000001", 20), ("m_L1_000000000000_000000000001", 25)):
        os.makedirs(logs / name)
        (logs / name / "manifest.json").write_bytes(b"x" * size)
    os.makedirs(logs / ".m_000000000002.tmp")  # staging: not published
    os.makedirs(logs / "other_000000000000")  # another database's batch
    usage = LogUsage(Storage.of(str(tmp_path)), str(logs), "m")
    assert usage.by_level() == {0: (2, 30), 1: (1, 25), 2: (0, 0)}
    import shutil

    shutil.rmtree(logs / "m_000000000000")  # pruned
    assert usage.by_level() == {0: (1, 20), 1: (1, 25), 2: (0, 0)}


def test_a_shipped_copy_says_how_far_behind_it_is(tmp_path):
    st = Storage.of(str(tmp_path))
    src, dst = str(tmp_path / "m"), str(tmp_path / "copy")
    for n in range(3):
        os.makedirs(os.path.join(src, "wlc_logs", f"m_{n:012d}"))
        with open(os.path.join(src, "wlc_logs", f"m_{n:012d}", "manifest.json"), "w") as fh:
            fh.write("{}")
    write_master_state(st, src, MasterState.of(state=1, batches=3, tick=2))
    ship = ShipMetrics(st, src, "m", dst)
    got = {name: v for name, _labels, v in ship.samples()}
    assert got["wlc_ship_behind_batches"] == 3 and 0 <= got["wlc_ship_behind_seconds"] < 60
    os.makedirs(dst)
    write_master_state(st, dst, MasterState.of(state=1, batches=3, tick=2))
    got = {name: v for name, _labels, v in ship.samples()}
    assert got == {"wlc_ship_behind_batches": 0, "wlc_ship_behind_seconds": 0.0}


def test_metrics_port_is_for_the_following_commands(tmp_path, capsys):
    from wlc.cli import main as wlc_main
    from wlr.cli import main as wlr_main

    assert wlr_main(["replicate", str(tmp_path), "m", "r", "--metrics-port", "9187"]) == 2
    assert "--metrics-port serves metrics while following: add --follow" in capsys.readouterr().err
    assert wlc_main(["ship", str(tmp_path), "m", str(tmp_path / "c"), "--metrics-port", "9187"]) == 2
    assert "add --follow" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # nothing made


def _exported() -> set[str]:
    """Every sample name the three sides export (counters with _total, histograms' series)."""
    from prometheus_client import REGISTRY

    import wlc.metrics as capture_metrics
    import wlcore.ship as ship_metrics
    import wlr.monitor as replica_metrics

    names: set[str] = set()
    for side in (capture_metrics, replica_metrics, ship_metrics):
        side.EVENTS()  # made at first use
        names |= set(side.LIVE.families)
    for family in REGISTRY.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        names |= {family.name + s for s in suffixes}
    return names


def test_every_metric_the_grafana_dashboard_uses_is_exported():
    board = json.load(open(DASHBOARD))
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    used = {n for e in exprs for n in re.findall(r"\b((?:wlc|wlr)_[a-z_]+)\b", e)}
    assert len(used) >= 10, used  # lag, apply time, throughput and failures of a master and its replicas
    missing = used - _exported()
    assert not missing, f"the dashboard uses metrics nobody exports: {sorted(missing)}"
    titles = " ".join(p["title"].lower() for p in board["panels"])
    for topic in ("lag", "apply", "throughput", "fail"):
        assert topic in titles, f"no panel on {topic}"
