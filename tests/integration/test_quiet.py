"""Quiet by default: commands that start Spark print the product's own lines only, and Spark's
own files stay out of the folder a program runs from."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import wlc

from ..waiting import wait_until
from .helpers import sql

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
NOISE = (
    "ivy",
    ":: resolving",
    "WARNING: Using incubator",
    "setLogLevel",
    "Closing down",
    "sys.exit(main())",
    "UserWarning",
)


def _env(cache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache))
    env.pop("WLC_VERBOSE", None)
    return env


def _capture_until_interrupted(args: list[str], cwd: Path, env: dict) -> tuple[int, list[str]]:
    """Run ``python -m wlc capture ...`` until it says it captures, then Ctrl-C it; its
    exit status and every line it printed (stdout and stderr, as a terminal shows them)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "wlc", *args],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_until(
            lambda: any(line.startswith("capturing ") for line in lines) or proc.poll() is not None,
            240,
            lambda: f"capture to start: {''.join(lines)[-3000:]}",
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=30)
    return proc.returncode, [line.rstrip("\n") for line in lines]


def test_commands_that_start_spark_print_their_own_lines_only(spark, master, dbfarm, tmp_path):
    t = master.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
    last = sql(spark, f"INSERT INTO delta.`{t}` VALUES (1)")
    assert wlc.flush() == last
    master.close()
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    env = _env(cache)

    # capture restarted on a master: Spark's start, py4j closing at exit (and no warning: capturing an
    # existing master is what wlc capture is for)
    rc, lines = _capture_until_interrupted(["capture", dbfarm, "m"], work, env)
    assert rc == 0, "\n".join(lines)
    assert len(lines) == 2, "\n".join(lines)  # the session's start is in wlc.log and commands.log, not here
    assert lines[0].startswith(f"capturing {dbfarm}/m into ")
    assert lines[1] == f"capture stopped at transaction {last}"
    assert re.search(r" wlc\.master INFO m: capture session \w+ begins", (cache / "wlc" / "commands.log").read_text())

    replay = subprocess.run(
        [sys.executable, "-m", "wlr", "replicate", dbfarm, "m", "r", "--until", str(last)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replay.returncode == 0, replay.stderr[-3000:]
    assert replay.stderr == ""
    assert re.fullmatch(rf"r: at transaction {last} \(\S+\)\n", replay.stdout), replay.stdout

    for text in ["\n".join(lines), replay.stdout]:
        assert not [n for n in NOISE if n.lower() in text.lower()], text
    startup = (cache / "wlc" / "spark-start.log").read_text()  # where Spark's start-up output went
    # both starts logged there; only the first resolved Delta's jars (the second named them: wlcore.session)
    assert startup.count("Spark starts") == 2 and "incubator" in startup
    assert startup.count(":: resolving dependencies") == 1
    assert os.listdir(work) == []  # nothing of Spark's in the folder the commands ran from


def test_spark_files_go_to_the_cache_folder_not_the_working_folder(tmp_path):
    """A program making a table by name (with a Hive catalog, which brings Derby) leaves no
    spark-warehouse/, derby.log or metastore_db/ in its working folder. Its threads asking for a
    session at once (as replay's do) start one JVM, not one each."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    code = textwrap.dedent("""
        import os, subprocess, threading
        import wlc
        conf = {"spark.sql.catalogImplementation": "hive"}
        threads = [threading.Thread(target=wlc.spark_session, kwargs=conf) for _ in range(3)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        jvms = subprocess.run(["pgrep", "-P", str(os.getpid()), "java"], capture_output=True, text=True)
        assert len(jvms.stdout.split()) == 1, jvms.stdout
        spark = wlc.spark_session(**conf)
        spark.sql("CREATE TABLE t (id INT) USING delta")
        spark.sql("INSERT INTO t VALUES (1)")
        assert spark.table("t").count() == 1
        print("OK")
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=_env(cache), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout == "OK\n" and out.stderr == ""
    assert os.listdir(work) == []
    (here,) = (cache / "wlc" / "work").iterdir()  # the working folder's own
    assert here.name.startswith("work-")
    assert (here / "spark-warehouse" / "t" / "_delta_log").is_dir()
    assert (here / "derby" / "derby.log").is_file() and (here / "derby" / "metastore_db").is_dir()


def test_ctrl_c_stops_a_catch_up_between_transactions_and_says_how_to_go_on(spark, master, dbfarm, tmp_path):
    """Ctrl-C while ``wlr replicate`` applies: it stops after the transaction being applied, says
    on one line where the replica is and the command that goes on, and exits 130 (no traceback)."""
    import yaml

    from wlcore.state import read_replica_state
    from wlcore.storage import Storage

    t = master.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT) USING delta")
    for k in range(12):
        spark.sql(f"INSERT INTO delta.`{t}` VALUES ({k})")
    last = wlc.flush()
    master.close()
    cfg = yaml.safe_load(Path(os.environ["WLC_CONFIG"]).read_text())
    # a Spark commit per transaction (~1 s each here): the catch-up is still applying when Ctrl-C comes
    cfg["replica"] |= {"collapse": False, "parallelism": 1, "deltars_bytes": 0, "rewrite_bytes": 0}
    (tmp_path / "wlc.yaml").write_text(yaml.safe_dump(cfg))
    env = dict(_env(tmp_path / "cache"), WLC_CONFIG=str(tmp_path / "wlc.yaml"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "wlr", "replicate", dbfarm, "m", "r"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    st = Storage.of(dbfarm)
    try:
        wait_until(
            lambda: proc.poll() is not None or (read_replica_state(st, f"{dbfarm}/r") or _NONE).tick >= 1,
            240,
            "the catch-up to apply its first transactions",
            interval=0.05,
        )
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert out == "" and "Traceback" not in err, err[-3000:]
    (line,) = err.splitlines()
    tick = read_replica_state(st, f"{dbfarm}/r").tick
    assert tick < last  # stopped before the end ...
    assert re.fullmatch(
        rf"r: stopped by Ctrl-C at transaction {tick} \(\S+\); go on with: wlr replicate {dbfarm} m r", line
    ), line  # ... where it says, and it says how to go on


class _NONE:
    tick = -1
