"""What the command lines show: versions, warnings and loggers, Spark's start-up output (no Spark)."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wlc
from wlc.cli import main as wlc_main
from wlcore.batch import FORMAT_VERSION
from wlr.cli import main as wlr_main

from ..waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("main, prog", [(wlc_main, "wlc"), (wlr_main, "wlr")])
def test_version_names_the_release_and_the_batch_format(main, prog, capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"{prog} {wlc.__version__} (batch format {FORMAT_VERSION})\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", wlc.__version__)  # semantic versioning
    import wlr

    assert wlr.__version__ == wlc.__version__


def test_changelog_names_this_release_and_its_formats():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert releases and releases[0] == wlc.__version__, f"CHANGELOG.md's newest release is not {wlc.__version__}"
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", r) for r in releases), releases
    newest = text.split(f"## [{wlc.__version__}]", 1)[1].split("\n## [", 1)[0]
    assert f"batch format {FORMAT_VERSION}" in newest
    assert "wlc.config" in newest and "wlr.config" in newest  # the state files' formats too


def _run(code: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("WLC_VERBOSE", None)
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )


LINES = """
    import argparse, logging, warnings
    from wlcore.commands import setup_terminal
    setup_terminal(argparse.Namespace(verbose={verbose}))
    warnings.warn("database 'm' is already in master mode;\\n nothing changed", stacklevel=1)
    logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
    logging.getLogger("wlc.master").info("m: capture session 1a2b begins at transaction 0")
    logging.getLogger("wlc.ship").info("shipped batch 3")
    logging.getLogger("wlr.replica").info("r: at transaction 3")
    logging.getLogger("somelib").warning("a library's warning")
    try:
        raise PermissionError(13, "Permission denied", "/db/wlc_logs")
    except OSError:
        logging.getLogger("wlc.master").exception("capture of m cannot publish")
    from wlcore.session import verbose; print("1" if verbose() else "-")
"""


def test_command_lines_show_warnings_and_errors_as_one_line_and_log_the_rest(tmp_path):
    out = _run(LINES.format(verbose=False), tmp_path)
    assert out.returncode == 0, out.stderr
    log = tmp_path / "wlc" / "commands.log"
    assert out.stderr.splitlines() == [
        "warning: database 'm' is already in master mode; nothing changed",
        "warning: a library's warning",
        "error: capture of m cannot publish: [Errno 13] Permission denied: '/db/wlc_logs' "
        f"(traceback in {log}; --verbose shows it)",
    ]
    assert out.stdout == "-\n"
    text = log.read_text()  # the product's INFO lines and the traceback; no other library's INFO
    assert "wlc.master INFO m: capture session 1a2b begins" in text and "wlc.ship INFO shipped batch 3" in text
    assert "Traceback (most recent call last)" in text and "PermissionError" in text
    assert "Closing down" not in text


def test_verbose_shows_everything(tmp_path):
    out = _run(LINES.format(verbose=True), tmp_path)
    assert out.returncode == 0, out.stderr
    assert "UserWarning: database 'm' is already in master mode" in out.stderr  # Python's own form
    assert "py4j.clientserver INFO Closing down clientserver connection" in out.stderr
    assert "wlc.master INFO m: capture session" in out.stderr
    assert "Traceback (most recent call last)" in out.stderr
    assert out.stdout == "1\n"  # WLC_VERBOSE=1: Spark's start-up output on the terminal


def _pump_lines(tmp_path, ok: bool, capfd) -> tuple[str, str]:
    """Feed lines through the start-up pump as the JVM would; return (log text, stderr)."""
    from wlcore.session import _Pump

    log = tmp_path / "spark-start.log"
    pump = _Pump(log)
    pump.start()
    for line in [
        b"WARNING: Using incubator modules: jdk.incubator.vector\n",
        b":: resolving dependencies :: org.apache.spark#spark-submit-parent;1.0\n",
        b"\tdownloading https://repo1.maven.org/maven2/a.jar ...\n",
        b"\tdownloading https://repo1.maven.org/maven2/b.jar ...\n",
    ]:
        os.write(pump._write, line)
    wait_until(
        lambda: "b.jar" in (log.read_text() if log.exists() else ""),
        10,
        "the start-up log to hold b.jar",
        interval=0.02,
    )
    pump.started(ok)
    os.write(pump._write, b'SLF4J: Failed to load class "org.slf4j.impl.StaticLoggerBinder".\n')
    os.write(pump._write, b"12:00:01 ERROR SparkContext: after the start\n")
    os.close(pump._write)
    pump.join(timeout=10)
    return log.read_text(), capfd.readouterr().err


def test_spark_startup_output_goes_to_the_log_and_later_lines_to_stderr(tmp_path, capfd):
    log, err = _pump_lines(tmp_path, True, capfd)
    assert "Using incubator modules" in log and ":: resolving dependencies" in log and "b.jar" in log
    assert "after the start" not in log
    assert "SLF4J: Failed to load class" in log  # s3a's first use: its notes are no news on the terminal
    log_path = tmp_path / "spark-start.log"
    note = f"downloading Spark's jars from Maven Central (once; they are cached); progress in {log_path}"
    assert err.splitlines() == [note, "12:00:01 ERROR SparkContext: after the start"]


def test_a_failed_start_prints_what_spark_said(tmp_path, capfd):
    _log, err = _pump_lines(tmp_path, False, capfd)
    assert ":: resolving dependencies" in err and "Using incubator modules" in err and "after the start" in err


def _into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run ``python -m <args>`` with its stdout a pipe nobody reads any more (``... | head -1``
    after head exited): every write to it fails."""
    read, write = os.pipe()
    os.close(read)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        return subprocess.run(
            [sys.executable, "-m", *args],
            cwd=cwd,
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "wlc.config").write_text("state=1\ndbid=abc\ntick=4\n")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "wlr.config").write_text("master=m\ndbid=abc\ntick=4\nstate=idle\n")
    for args in (["wlr", "status", str(tmp_path), "r"], ["wlc", "status", str(tmp_path), "m"]):
        out = _into_closed_pipe(args, tmp_path)
        assert out.stderr == "", (args, out.stderr)  # no BrokenPipeError traceback, no "Exception ignored"
        assert out.returncode == 141, args  # 128 + SIGPIPE, as a shell reports a command whose reader left


def test_a_failed_statement_is_not_logged_as_json_on_the_terminal(monkeypatch):
    """PySpark 4 logs an AnalysisException it raises (a write to a replica's view) as a JSON line
    with the JVM's stack trace on stderr; sessions started here keep it off the terminal."""
    import logging

    from pyspark.logger import PySparkLogger

    from wlcore.session import QUERY_CONTEXT_LOGGERS, quiet_query_errors

    monkeypatch.delenv("WLC_VERBOSE", raising=False)
    loggers = [PySparkLogger.getLogger(name) for name in QUERY_CONTEXT_LOGGERS]
    for logger in loggers:
        monkeypatch.setattr(logger, "level", logging.NOTSET)
    assert all(logger.isEnabledFor(logging.ERROR) for logger in loggers)  # PySpark's: on stderr
    quiet_query_errors()
    assert not any(logger.isEnabledFor(logging.ERROR) for logger in loggers)
    assert all(PySparkLogger.getLogger(name) is logger for name, logger in zip(QUERY_CONTEXT_LOGGERS, loggers))
