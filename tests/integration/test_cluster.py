"""A Spark standalone cluster on 127.0.0.1: capture and a replica as two applications at once.

The test starts a standalone master and one worker (2 cores) with pyspark's own
``spark-class``, runs ``wlc capture`` and ``wlr replicate`` against it (``spark.cores.max`` 1
each, so neither starves the other), writes the master from this process's local session,
checks the replica equals the master, and stops every process it started by its process id.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from wlcore.settings import parse_kv

from ..waiting import wait_until
from .helpers import master_rows, rows

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(1800)]
ROOT = str(Path(__file__).resolve().parents[2])


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    import pyspark

    spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
    return subprocess.Popen(
        [spark_class, *args], stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def _wait_for(path: Path, text: str, seconds: float, proc: subprocess.Popen) -> None:
    def written() -> bool:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        assert proc.poll() is None, f"{proc.args[1]} exited:\n{path.read_text(errors='replace')[-3000:]}"
        return False

    wait_until(written, seconds, lambda: f"{text!r}:\n{path.read_text(errors='replace')[-3000:]}", interval=0.2)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: spark-class and the JVM it starts
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture
def cluster(tmp_path):
    """``spark://127.0.0.1:<port>`` of a standalone master with one 2-core worker."""
    # the daemons live seconds: C1 only (as the test settings give every process the tests start)
    env = dict(
        os.environ,
        SPARK_LOG_DIR=str(tmp_path),
        SPARK_WORKER_DIR=str(tmp_path / "work"),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1",
    )
    port = _port()
    url = f"spark://127.0.0.1:{port}"
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_port()),
        ],
        tmp_path / "master.log",
        env,
    )
    worker = None
    try:
        _wait_for(tmp_path / "master.log", "I have been elected leader", 120, master)
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "3g",
                "--webui-port",
                str(_port()),
                url,
            ],
            tmp_path / "worker.log",
            env,
        )
        _wait_for(tmp_path / "worker.log", "Successfully registered with master", 120, worker)
        yield url
    finally:
        for proc in (worker, master):
            if proc is not None:
                _stop(proc)


def test_capture_and_replica_share_a_standalone_cluster(spark, dbfarm, cluster, tmp_path):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(f"""capture:\n  settle: 0.2\n  poll_interval: 0.2\nspark:\n  master: "{cluster}"\n  conf:
    spark.cores.max: "1"\n    spark.executor.memory: 1g\n    spark.driver.memory: 1g
    spark.driver.host: 127.0.0.1\n    spark.driver.extraJavaOptions: "-Duser.timezone=UTC -XX:TieredStopAtLevel=1"
    spark.executor.extraJavaOptions: "-XX:TieredStopAtLevel=1"\n""")
    env = dict(os.environ, PYTHONPATH=ROOT, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("WLC_CONFIG", None)
    made = subprocess.run(
        [sys.executable, "-m", "wlc", "--config", str(cfg), "master", dbfarm, "cm", "--beat", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    capture = subprocess.Popen(
        [sys.executable, "-m", "wlc", "--config", str(cfg), "capture", dbfarm, "cm"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        config = Path(dbfarm, "cm", "wlc.config")

        def published(pred) -> bool:
            if pred(config.read_text()):
                return True
            assert capture.poll() is None, capture.stdout.read()[-3000:]
            return False

        wait_until(lambda: published(lambda text: "heartbeat=" in text), 240, "capture's first heartbeat", interval=0.2)
        t = os.path.join(dbfarm, "cm", "s", "t")
        spark.sql(f"CREATE TABLE delta.`{t}` (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
        spark.sql(f"INSERT INTO delta.`{t}` VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        spark.sql(f"UPDATE delta.`{t}` SET v = 'B' WHERE id = 2")
        spark.sql(f"DELETE FROM delta.`{t}` WHERE id = 3")
        wait_until(
            lambda: published(lambda text: parse_kv(text).get("tick") == "3"),
            240,
            "capture on the cluster to publish transaction 3",
            interval=0.2,
        )
        assert parse_kv(config.read_text()).get("tick") == "3", "capture on the cluster did not publish"
        # the replica is a second application on the cluster while capture runs
        rep = subprocess.run(
            [sys.executable, "-m", "wlr", "--config", str(cfg), "replicate", dbfarm, "cm", "cr", "--until", "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert rep.returncode == 0, (rep.stdout + rep.stderr)[-3000:]
        assert "cr: at transaction 3" in rep.stdout
    finally:
        if capture.poll() is None:
            capture.send_signal(signal.SIGTERM)  # it flushes, stops its application and exits 0
        out, _ = capture.communicate(timeout=120)
    assert capture.returncode == 0, out[-3000:]
    assert rows(spark.read.format("delta").load(os.path.join(dbfarm, "cr", "s", "t"))) == master_rows(spark, t)
