"""The SparkSession with Delta Lake, built from the settings' ``spark`` section (:mod:`wlc.config`)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .jars import DeltaJars
from .jvm_output import quiet_start
from .settings import LOCAL_FILE, cache_folder, defaults_file, settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_session(**conf: Any) -> SparkSession:
    """Return a SparkSession with Delta Lake configured; reuse the active one when there is one.

    Args:
        **conf: Spark settings (``"spark.sql.shuffle.partitions": "8"`` style keys given as
            keyword arguments with dots, e.g. ``spark_session(**{"spark.master": "spark://h:7077"})``)
            merged over the ``spark.conf`` section of the config. ``master`` and ``app_name``
            are accepted as shorthands for ``spark.master`` and ``spark.app.name``.

    Returns:
        the active session if one exists (``conf`` is then applied
        to its runtime SQL settings where Spark allows), else a new one.

    The Delta jars are resolved by ``delta.configure_spark_with_delta_pip`` (Maven Central,
    cached in ``~/.ivy2.5.2``) at the first start and named directly afterwards
    (:mod:`wlcore.jars`); that resolution and the rest of Spark's start-up output go to
    a log file, not the terminal (:mod:`wlcore.jvm_output`; ``WLC_VERBOSE=1`` shows them). The
    session time zone is UTC: every instant wlc/wlr report is UTC. Spark's own files go to
    :func:`wlc.config.cache_folder` unless ``spark.conf`` sets them: its warehouse
    (``spark.sql.warehouse.dir``: tables and schemas made by name without a location) to
    ``spark-warehouse/`` there, Derby's (``derby.log``, ``metastore_db`` of a Hive catalog) to
    ``derby/`` there (``-Dderby.system.home``), both in a folder of the working folder's own
    (:func:`work_folder`), so none lands in the working folder and two projects share nothing.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        with _STARTING:  # threads asking at once (replay's, at a follower's first round) start one JVM
            return _start(conf)
    for key, value in conf.items():
        if key.startswith("spark.sql.") or key.startswith("spark.databricks."):
            active.conf.set(key, str(value))
    return active


_STARTING = threading.Lock()


def _start(conf: dict[str, Any]) -> SparkSession:
    """:func:`spark_session` when no session is active in this thread: the process's session when
    Spark runs (its runtime settings from ``conf``), else a new one."""
    from pyspark.sql import SparkSession

    cfg = settings().spark
    from .features import session_defaults

    merged = {**session_defaults(), **{str(k): str(v) for k, v in cfg.conf.items()}}
    master = str(conf.pop("master", cfg.master))
    app_name = str(conf.pop("app_name", cfg.app_name))
    merged.update({k: str(v) for k, v in conf.items()})
    master = merged.pop("spark.master", master)
    app_name = merged.pop("spark.app.name", app_name)
    # Spark's log settings: config/log4j2.properties of the working folder, else the packaged ones
    log4j = LOCAL_FILE.parent / "log4j2.properties"
    log4j = log4j.resolve() if log4j.is_file() else defaults_file("log4j2.properties")
    if log4j.exists():
        _add_java_option(merged, "log4j.configurationFile", f"file:{log4j}")
    # Spark's own files in the user's cache folder, not in the working folder; one folder per
    # working folder, as before, so programs of two projects never share tables made by name
    here = work_folder()
    merged.setdefault("spark.sql.warehouse.dir", str(here / "spark-warehouse"))
    if "-Dderby.system.home=" not in merged.get("spark.driver.extraJavaOptions", ""):
        _add_java_option(merged, "derby.system.home", str(here / "derby"))
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    )
    packages = []
    if s3a_wanted():
        packages = s3a_packages()
        for key, value in s3a_conf().items():
            merged.setdefault(f"spark.hadoop.{key}", value)
    for key, value in merged.items():
        builder = builder.config(key, value)
    jars = DeltaJars(packages, merged)
    builder = jars.configure(builder)
    with quiet_start(builder):
        spark = builder.getOrCreate()
    jars.remember(spark)
    spark.sparkContext.setLogLevel(cfg.log_level)
    quiet_query_errors()
    return spark


QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def quiet_query_errors() -> None:
    """Keep PySpark's record of a failed statement off the terminal: PySpark 4 logs every
    ``AnalysisException`` it raises as a JSON line with the JVM's whole stack trace on stderr
    (its ``SQLQueryContextLogger`` and ``DataFrameQueryContextLogger``), on top of the exception,
    whose message says the same in one line. With ``WLC_VERBOSE=1`` the records stay.
    """
    import logging
    import os

    if os.environ.get("WLC_VERBOSE"):
        return
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # an older PySpark logs nothing of the kind
        return
    for name in QUERY_CONTEXT_LOGGERS:  # made as PySpark makes them: it calls them with its own arguments
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _add_java_option(conf: dict[str, str], name: str, value: str) -> None:
    """Append ``-D<name>=<value>`` to the driver's ``spark.driver.extraJavaOptions`` in
    ``conf`` (quoted when it holds a space: Spark splits the options as a shell does)."""
    opt = f"-D{name}={value}"
    if any(c.isspace() for c in opt):
        opt = '"' + opt.replace("\\", "\\\\").replace('"', '\\"') + '"'
    conf["spark.driver.extraJavaOptions"] = (conf.get("spark.driver.extraJavaOptions", "") + " " + opt).strip()


def work_folder() -> Path:
    """``<cache folder>/work/<name>-<hash>``: where a session started in the current working
    folder keeps Spark's warehouse and Derby's files (``name``: the working folder's name,
    ``hash``: 12 hex digits of SHA-256 of its absolute path)."""
    import hashlib
    import os

    cwd = os.path.abspath(os.getcwd())
    digest = hashlib.sha256(cwd.encode()).hexdigest()[:12]
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in os.path.basename(cwd))[:40] or "root"
    return cache_folder() / "work" / f"{name}-{digest}"


def s3a_wanted() -> bool:
    """``spark.s3a`` in config: true, false, or ``auto`` (the default): on when S3 is
    configured at all (``storage.s3`` has a value, or the dbfarm or ``replica.logs`` is an
    ``s3://`` URL), so that sessions without S3 do not load the AWS SDK (~700 MB once)."""
    cfg = settings()
    if isinstance(cfg.spark.s3a, bool):  # else "auto" (checked when the settings were loaded)
        return cfg.spark.s3a
    s3 = cfg.storage.s3
    urls = [cfg.dbfarm, cfg.replica.logs]
    return any((s3.endpoint_url, s3.key, s3.secret, s3.region)) or any(u.startswith(("s3://", "s3a://")) for u in urls)


def check_s3a(spark, url: str) -> None:
    """Refuse an S3 ``url`` when ``spark`` has no ``s3a`` filesystem (it was started without hadoop-aws).

    Args:
        spark (SparkSession): the session that would read or write ``url``.
        url (str): a folder or URL (nothing is checked unless it is ``s3://`` or ``s3a://``).

    Raises:
        ConfigError: ``url`` is on S3 and the session cannot reach it; the message names ``spark.s3a``.
    """
    if not str(url).startswith(("s3://", "s3a://")):
        return
    try:
        sc = spark.sparkContext
        sc._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass("s3a", sc._jsc.hadoopConfiguration())
    except Exception:  # noqa: BLE001 (Py4JJavaError: UnsupportedFileSystemException)
        from .errors import ConfigError

        raise ConfigError(
            f"{url} is on S3 but this Spark session has no s3a filesystem (hadoop-aws); set "
            "storage.s3 or spark.s3a: true in config/wlc.yaml and start a new Spark session"
        ) from None


def hadoop_version() -> str:
    """The Hadoop version pyspark ships (its ``hadoop-client-api`` jar), e.g. ``3.5.0``."""
    import glob
    import os
    import re

    import pyspark

    for jar in glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar")):
        m = re.search(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar$", jar)
        if m:
            return m.group(1)
    raise RuntimeError("pyspark ships no hadoop-client-api jar; set spark.s3a: false in config/wlc.yaml")


def s3a_packages() -> list[str]:
    """Maven coordinates for Spark's ``s3a://`` filesystem: ``hadoop-aws`` of pyspark's own
    Hadoop version (which brings the AWS SDK), resolved like Delta's jars."""
    return [f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"]


def s3a_conf() -> dict[str, str]:
    """Hadoop ``fs.s3a.*`` settings from the ``storage.s3`` settings (the ones s3fs is given):
    endpoint (path-style, TLS only for https), keys, region. Empty settings are left to
    s3a's defaults (the AWS credential chain)."""
    s3 = settings().storage.s3
    conf: dict[str, str] = {}
    endpoint = s3.endpoint_url
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        conf["fs.s3a.path.style.access"] = "true"
        conf["fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https")).lower()
    if s3.key:
        conf["fs.s3a.access.key"] = s3.key
        conf["fs.s3a.secret.key"] = s3.secret
        conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    if s3.region:
        conf["fs.s3a.endpoint.region"] = s3.region
    return conf


def configure_s3a(spark, bucket: str | None = None) -> None:
    """Apply :func:`s3a_conf` to a running session (settings changed after it started).

    Args:
        spark (SparkSession): the running session (its Hadoop configuration is changed).
        bucket (str | None): only this bucket (``fs.s3a.bucket.<bucket>.*``: a bucket's
            filesystem is made, and cached, at its first use); None: every bucket.
    """
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3a_conf().items():
        if bucket:
            key = key.replace("fs.s3a.", f"fs.s3a.bucket.{bucket}.", 1)
        hconf.set(key, value)


def active_session():
    """The active SparkSession, or a new one from config when none is active."""
    return spark_session()


def starting(purpose: str) -> None:
    """Say on stderr, before a call starts Spark in a process that has none, that it does and
    why (a start takes seconds, a first one with jars to fetch minutes): a Python program or a
    notebook otherwise waits without a word. Nothing when Spark runs already.

    Args:
        purpose (str): what Spark is started for, e.g. ``"to register r's tables"``.
    """
    if running_session() is not None:
        return
    from .jvm_output import startup_log

    print(
        f"starting Spark {purpose} (this takes a while; its start-up output goes to {startup_log()})",
        file=sys.stderr,
        flush=True,
    )


def running_session() -> Any:
    """The process's SparkSession when Spark runs in it, without starting one.

    Returns:
        SparkSession | None: the active session (or, in a thread that has none, the process's
        default one); None when no Spark context runs.
    """
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is None:
        return None
    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
