"""Spark's start-up output: into a log file, not onto the terminal.

PySpark starts Spark's JVM with ``spark-submit`` (``pyspark.java_gateway.launch_gateway``),
which inherits the Python process's stdout and stderr. Before a session exists it prints
Ivy's resolution of the Maven packages (Delta's jars: about 90 lines at every start, even
when every jar is cached), the JDK's ``WARNING: Using incubator modules`` and whatever
log4j writes before its configuration applies. :func:`quiet_start` starts the JVM itself
with its output on a pipe: until the session is made, the lines go to :func:`startup_log`;
afterwards they reach stderr as before (Spark's warnings and errors stay visible), except
SLF4J's notes (printed when s3a's classes first load), which go to the log too. When Ivy
downloads (the first start on a machine) one line says so on stderr and names the log.
When the start fails, everything captured is written to stderr, then the error is raised.

``WLC_VERBOSE=1`` in the environment, or :func:`show_everything` (the command lines'
``--verbose``), leaves the output on the terminal, as PySpark alone does.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from .utc import utcnow

VERBOSE_ENV = "WLC_VERBOSE"
LOG_BYTES = 2_000_000  # the log is rolled over to <name>.1 beyond this
# lines the JVM prints after the start that are no news to the user (SLF4J's "no binding found" notes when
# Hadoop's S3 classes first load); they go to the start-up log too
NOISE = (b"SLF4J:",)
_shown = threading.Event()  # set by show_everything(): this process shows Spark's start-up output


def show_everything() -> None:
    """Leave Spark's start-up output on the terminal in this process from now on (the
    command lines' ``--verbose``). The environment is not changed."""
    _shown.set()


def verbose() -> bool:
    """True after :func:`show_everything`, or when ``WLC_VERBOSE`` is set to anything but
    empty, ``0``, ``false`` or ``no``."""
    return _shown.is_set() or os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def startup_log() -> Path:
    """The file Spark's start-up output goes to: ``spark-start.log`` in
    :func:`wlc.config.cache_folder` (each start appended under a header line naming its
    time and process id; rolled over to ``spark-start.log.1`` beyond 2 MB)."""
    from .settings import cache_folder

    return cache_folder() / "spark-start.log"


@contextmanager
def quiet_start(builder):
    """Around ``builder.getOrCreate()``: when that call is to start Spark's JVM, start it
    here with its output going to :func:`startup_log` until the block ends.

    Args:
        builder (pyspark.sql.SparkSession.Builder): the configured builder (its settings,
            Maven packages included, are passed to ``spark-submit`` as PySpark would).

    Nothing changes when the JVM already runs in this process, when :func:`verbose`, when
    PySpark is given a gateway from outside (``PYSPARK_GATEWAY_PORT``) or when the log's
    folder cannot be made: the block then runs as PySpark alone would.

    Raises:
        whatever starting the JVM or the block raises (PySpark's ``JAVA_GATEWAY_EXITED``
        when ``spark-submit`` exits, e.g. a package that cannot be resolved), after the
        captured output was written to stderr.
    """
    from pyspark import SparkConf, SparkContext

    options = getattr(builder, "_options", None)
    if (
        verbose()
        or SparkContext._gateway is not None
        or not isinstance(options, dict)
        or "PYSPARK_GATEWAY_PORT" in os.environ
    ):
        yield
        return
    path = startup_log()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield
        return
    try:
        pump = _Pump(path)
    except OSError:  # the log cannot be written: the output stays where PySpark puts it
        yield
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in options.items():
        conf.set(str(key), str(value))
    ok = False
    try:
        pump.launch(conf)
        yield
        ok = True
    finally:
        pump.started(ok)


class _Pump(threading.Thread):
    """Reads the JVM's stdout and stderr (one pipe): into the log while Spark starts, then
    to this process's stderr (file descriptor 2, where the JVM wrote before)."""

    def __init__(self, path: Path):
        super().__init__(name="wlc-spark-output", daemon=True)
        self.path = path
        self._log = logging.handlers.RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=1, encoding="utf-8")
        self._log.setFormatter(logging.Formatter("%(message)s"))
        self._read, self._write = os.pipe()
        self._lock = threading.Lock()
        self._starting = True
        self._lines: list[bytes] = []
        self._said = False

    def launch(self, conf) -> None:
        """Start the JVM (``spark-submit``) with ``conf`` and hand its gateway to PySpark."""
        from pyspark import SparkContext
        from pyspark.java_gateway import launch_gateway

        self._note(
            f"=== {utcnow().isoformat(timespec='seconds')} pid {os.getpid()}: Spark starts ({sys.argv[0] or 'python'})"
        )
        self.start()
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": self._write, "stderr": self._write})
        finally:
            os.close(self._write)  # the JVM holds its own copy; EOF when it exits
        SparkContext._ensure_initialized(gateway=gateway)

    def run(self) -> None:
        with os.fdopen(self._read, "rb") as stream:
            for raw in iter(stream.readline, b""):
                with self._lock:
                    if self._starting:
                        self._capture(raw)
                        continue
                    if raw.startswith(NOISE):  # SLF4J's notes when s3a's classes load: the log, not stderr
                        self._note(raw.decode("utf-8", "replace").rstrip("\r\n"))
                        continue
                _to_stderr(raw)

    def _capture(self, raw: bytes) -> None:
        self._lines.append(raw)
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        self._note(line)
        if not self._said and line.lstrip().startswith("downloading "):
            self._said = True
            print(
                f"downloading Spark's jars from Maven Central (once; they are cached); progress in {self.path}",
                file=sys.stderr,
                flush=True,
            )

    def _note(self, line: str) -> None:
        self._log.emit(logging.makeLogRecord({"msg": line, "levelno": logging.INFO}))

    def started(self, ok: bool) -> None:
        """The session is made (``ok``) or its start failed: later lines go to stderr; on a
        failure what was captured goes there first (after the JVM's last words when it exited)."""
        if not ok and self.is_alive():
            self.join(timeout=2.0)  # an exited JVM's pipe ends at once; a live one is left running
        with self._lock:
            self._starting = False
            self._log.close()
            if not ok:
                _to_stderr(b"".join(self._lines))
            self._lines = []


def _to_stderr(data: bytes) -> None:
    try:
        sys.stderr.flush()
        view = memoryview(data)
        while view:
            view = view[os.write(2, view) :]
    except (OSError, ValueError):  # stderr closed: the output has nowhere to go
        pass
