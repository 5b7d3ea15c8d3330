"""The SparkSession with Delta Lake, built from the settings' ``spark`` section (:mod:`wlc.config`).

Delta's jars (and hadoop-aws) are resolved by Ivy once and then named directly
(:class:`DeltaJars`): ``delta.configure_spark_with_delta_pip`` asks Spark for Maven packages, and
Spark's Ivy resolves them at every JVM start, even when every jar is already in its cache (about
1.2-1.5 s on 2 cores, seen in the start-up log). The first start resolves them as before and
records the jars it got (Spark's own ``spark.jars`` after the resolution); later starts with the
same packages, versions and Ivy settings pass that list as ``spark.jars``, as ``spark-submit
--jars`` would, while every listed file is still there. A missing file or any change of what was
asked resolves again.

Spark's start-up output goes into a log file, not onto the terminal. PySpark starts Spark's JVM
with ``spark-submit`` (``pyspark.java_gateway.launch_gateway``), which inherits the Python
process's stdout and stderr. Before a session exists it prints Ivy's resolution of the Maven
packages (Delta's jars: about 90 lines at every start, even when every jar is cached), the JDK's
``WARNING: Using incubator modules`` and whatever log4j writes before its configuration applies.
:func:`quiet_start` starts the JVM itself with its output on a pipe: until the session is made,
the lines go to :func:`startup_log`; afterwards they reach stderr as before (Spark's warnings and
errors stay visible), except SLF4J's notes (printed when s3a's classes first load), which go to
the log too. When Ivy downloads (the first start on a machine) one line says so on stderr and
names the log. When the start fails, everything captured is written to stderr, then the error is
raised. ``WLC_VERBOSE=1`` in the environment, or :func:`show_everything` (the command lines'
``--verbose``), leaves the output on the terminal, as PySpark alone does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import logging.handlers
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settings import LOCAL_FILE, cache_folder, defaults_file, settings
from .utc import utcnow

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
    (:class:`wlcore.session.DeltaJars`); that resolution and the rest of Spark's start-up output go to
    a log file, not the terminal (:func:`wlcore.session.quiet_start`; ``WLC_VERBOSE=1`` shows them). The
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
    from .tabledef import session_defaults

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
    if cfg.metastore:
        for key, value in metastore_conf(cfg.metastore).items():
            merged.setdefault(key, value)
        jdbc = [j for c in metastore_packages(cfg.metastore) for j in ivy_retrieve(c, merged)]
        if jdbc:  # on the JVM's own class path: Hive's metastore client does not see spark.jars'
            extra = merged.get("spark.driver.extraClassPath", "")
            merged["spark.driver.extraClassPath"] = os.pathsep.join([p for p in [extra, *jdbc] if p])
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


# Delta's log stores that keep a table's commits whole on S3: one writing driver (Delta's default
# for s3a://), or DynamoDB's conditional writes for several (Delta's "S3 multi-cluster" setup)
SAFE_S3_LOG_STORES = (
    "io.delta.storage.S3SingleDriverLogStore",
    "org.apache.spark.sql.delta.storage.S3SingleDriverLogStore",
    "io.delta.storage.S3DynamoDBLogStore",
)


def s3_log_store_problem(conf: Mapping[str, str]) -> str | None:
    """Why Spark's Delta log store settings would not commit safely to S3, or None.

    Delta chooses a table's log store by its scheme (``spark.delta.logStore.<scheme>.impl``,
    else ``spark.delta.logStore.class``, else its default: ``S3SingleDriverLogStore`` for
    ``s3a://``); any store but :data:`SAFE_S3_LOG_STORES` (HDFS's rename, say) can let a commit
    replace another on S3.

    Args:
        conf (Mapping[str, str]): the session's Spark settings.

    Returns:
        str | None: the setting and its value, with the fix; None when the store is safe.
    """
    for key in ("spark.delta.logStore.s3a.impl", "spark.delta.logStore.class"):
        value = conf.get(key)
        if value:
            if value in SAFE_S3_LOG_STORES:
                return None
            return (
                f"{key} is {value}, which does not commit safely to S3; remove it from spark.conf in config/wlc.yaml "
                "(Delta's default for s3a:// is S3SingleDriverLogStore, safe for one writer) or set "
                "io.delta.storage.S3DynamoDBLogStore"
            )
    return None


def check_s3_log_store(spark, url: str) -> None:
    """Refuse to write Delta tables at S3 ``url`` through a log store that is not safe there
    (:func:`s3_log_store_problem`).

    Args:
        spark (SparkSession): the session that would write them.
        url (str): a folder or URL (nothing is checked unless it is ``s3://`` or ``s3a://``).

    Raises:
        ConfigError: the session's log store for ``s3a://`` is not safe; the message names the setting.
    """
    if not str(url).startswith(("s3://", "s3a://")):
        return
    conf = dict(spark.sparkContext.getConf().getAll())
    problem = s3_log_store_problem(conf)
    if problem:
        from .errors import ConfigError

        raise ConfigError(f"replica tables at {url}: {problem}")


def hadoop_version() -> str:
    """The Hadoop version pyspark ships (its ``hadoop-client-api`` jar), e.g. ``3.5.0``."""
    try:
        return pyspark_jar_version("hadoop-client-api")
    except RuntimeError:
        raise RuntimeError("pyspark ships no hadoop-client-api jar; set spark.s3a: false in config/wlc.yaml") from None


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


def metastore_conf(url: str) -> dict[str, str]:
    """Spark settings for a Hive metastore shared by every Spark application (setting
    ``spark.metastore``): Spark's built-in Hive catalog (``spark.sql.catalogImplementation``
    ``hive``) on the metastore database at a JDBC URL (Derby's network server, PostgreSQL: the
    tables made at first use, as Spark's embedded Derby does), or a metastore service at a
    ``thrift://`` URL. A key also set in ``spark.conf`` keeps that value.

    Args:
        url (str): ``jdbc:derby://host:port/name[;create=true]``, ``jdbc:postgresql://host/db?...``
            or ``thrift://host:port``.

    Returns:
        dict[str, str]: the Spark settings.

    Raises:
        ConfigError: ``url`` is none of these.
    """
    conf = {"spark.sql.catalogImplementation": "hive"}
    if url.startswith("thrift://"):
        conf["spark.hadoop.hive.metastore.uris"] = url
        return conf
    driver = _metastore_driver(url)
    if driver is None:
        from .errors import ConfigError

        raise ConfigError(
            f"spark.metastore {url!r} is not a metastore URL: give jdbc:derby://host:port/name, "
            "jdbc:postgresql://host/db or thrift://host:port in config/wlc.yaml"
        )
    if url.startswith("jdbc:derby:") and ";create=" not in url:
        url += ";create=true"
    conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = url
    conf["spark.hadoop.javax.jdo.option.ConnectionDriverName"] = driver[0]
    conf["spark.hadoop.datanucleus.schema.autoCreateAll"] = "true"  # the metastore's tables, at first use
    conf["spark.hadoop.hive.metastore.schema.verification"] = "false"
    return conf


# a metastore database's JDBC driver: its class and its Maven coordinates (Derby's client: the
# version of the Derby jars pyspark ships)
_METASTORE_DRIVERS = {
    "derby": ("org.apache.derby.jdbc.ClientDriver", "org.apache.derby:derbyclient:{derby}"),
    "postgresql": ("org.postgresql.Driver", "org.postgresql:postgresql:42.7.14"),
}


def _metastore_driver(url: str) -> tuple[str, str] | None:
    """The JDBC driver (class, Maven coordinates) of a ``jdbc:<database>:`` URL; None for another URL."""
    return _METASTORE_DRIVERS.get(url.split(":", 2)[1] if url.startswith("jdbc:") else "")


def metastore_packages(url: str) -> list[str]:
    """The Maven coordinates of the JDBC driver :func:`metastore_conf`'s URL needs (none for ``thrift://``)."""
    driver = _metastore_driver(url)
    if driver is None:
        return []
    return [driver[1].format(derby=pyspark_jar_version("derby"))]


def ivy_retrieve(coordinates: str, conf: Mapping[str, str] | None = None) -> list[str]:
    """The jars of Maven artifact ``coordinates`` (``group:artifact:version``) and of what it
    needs, resolved once by Ivy (the resolver Spark uses: pyspark's ``ivy`` jar) into
    ``<cache folder>/jars/<group>/<artifact>/<version>/``; later calls name the files found there.

    Args:
        coordinates (str): e.g. ``org.apache.derby:derbyclient:10.16.1.1``.
        conf (Mapping[str, str] | None): the session's Spark settings. Their Ivy settings are
            honoured as Spark honours them for ``spark.jars.packages``: ``spark.jars.ivySettings``
            (an Ivy settings file, in place of Ivy's defaults: Maven Central), ``spark.jars.repositories``
            (comma-separated Maven repositories tried after those) and ``spark.jars.ivy`` (the
            Ivy folder whose ``cache/`` holds the downloads; by default ``~/.ivy2.5.2``, Spark's).

    Returns:
        list[str]: the jars' paths.

    Raises:
        ConfigError: Ivy could not resolve them (the message has Ivy's last lines), or
            ``spark.jars.ivySettings`` names no file.
    """
    from filelock import FileLock

    group, artifact, version = coordinates.split(":")
    folder = cache_folder() / "jars" / group / artifact / version
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{folder}.lock"):  # two processes starting at once: one resolves, the other waits
        return _retrieve(group, artifact, version, folder, dict(conf or {}))


def _retrieve(group: str, artifact: str, version: str, folder: Path, conf: dict[str, str]) -> list[str]:
    import glob

    import pyspark

    found = sorted(glob.glob(str(folder / "*.jar")))
    if any(os.path.basename(j).startswith(f"{artifact}-") for j in found):
        return found
    folder.mkdir(parents=True, exist_ok=True)
    (ivy,) = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "ivy-*.jar"))
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    print(
        f"downloading {group}:{artifact}:{version} (once; it is cached in {folder})",
        file=sys.stderr,
        flush=True,
    )
    command = [java, "-jar", ivy, *ivy_options(conf, folder), "-dependency", group, artifact, version,
               "-confs", "default", "-retrieve", str(folder / "[artifact]-[revision].[ext]")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    found = sorted(glob.glob(str(folder / "*.jar")))
    if done.returncode != 0 or not found:
        from .errors import ConfigError

        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        where = ", ".join(k for k in ("spark.jars.ivySettings", "spark.jars.repositories") if conf.get(k))
        raise ConfigError(
            f"Ivy could not resolve {group}:{artifact}:{version} from "
            f"{'the repositories of ' + where if where else 'Maven Central'}:\n{tail}"
        )
    return found


def ivy_options(conf: Mapping[str, str], folder: Path) -> list[str]:
    """Ivy's command-line options for the Ivy settings of Spark settings ``conf``, as Spark's own
    resolution of ``spark.jars.packages`` reads them (see :func:`ivy_retrieve`); a settings file
    that adds ``spark.jars.repositories`` is written to ``folder`` when they are given.

    Raises:
        ConfigError: ``spark.jars.ivySettings`` names no file.
    """
    from xml.sax.saxutils import quoteattr

    from .errors import ConfigError

    options: list[str] = []
    ivy_dir = conf.get("spark.jars.ivy")
    settings_file = conf.get("spark.jars.ivySettings")
    if settings_file:
        settings_file = settings_file.removeprefix("file:").removeprefix("//")
        if not os.path.isfile(settings_file):
            raise ConfigError(
                f"spark.jars.ivySettings {conf['spark.jars.ivySettings']!r} names no file: give an Ivy "
                "settings file's path under spark.conf in config/wlc.yaml, or remove the setting"
            )
    if ivy_dir or not settings_file:  # Spark: a settings file keeps its own cache unless spark.jars.ivy is set
        options += ["-cache", os.path.join(os.path.expanduser(ivy_dir or "~/.ivy2.5.2"), "cache")]
    repositories = [r.strip() for r in conf.get("spark.jars.repositories", "").split(",") if r.strip()]
    if not repositories:
        return options + (["-settings", settings_file] if settings_file else [])
    # Spark's chain: the default resolver first (the settings file's, else Ivy's default one, whose
    # public resolver is Maven Central), then each repository, Maven-compatible
    if settings_file:
        base, default = f"file={quoteattr(os.path.abspath(settings_file))}", _default_resolver(settings_file)
    else:
        base, default = 'url="${ivy.default.settings.dir}/ivysettings.xml"', "default"
    chain = f"<resolver ref={quoteattr(default)}/>" if default else ""
    chain += "".join(
        f'<ibiblio name="repo-{i}" m2compatible="true" root={quoteattr(r)}/>' for i, r in enumerate(repositories, 1)
    )
    text = (
        f'<ivysettings><include {base}/><settings defaultResolver="wlc-repositories"/>'
        f'<resolvers><chain name="wlc-repositories" returnFirst="true">{chain}</chain></resolvers></ivysettings>\n'
    )
    path = folder / "ivysettings.xml"
    path.write_text(text)
    return options + ["-settings", str(path)]


def _default_resolver(settings_file: str) -> str | None:
    """The ``defaultResolver`` an Ivy settings file names; None when it names none."""
    import xml.etree.ElementTree as ET

    try:
        found = ET.parse(settings_file).getroot().find("settings")
    except ET.ParseError:
        return None
    return None if found is None else found.get("defaultResolver")


def pyspark_jar_version(name: str) -> str:
    """The version of jar ``<name>-<version>.jar`` that pyspark ships (``derby``: ``10.16.1.1``).

    Raises:
        RuntimeError: pyspark ships no such jar.
    """
    import glob
    import re

    import pyspark

    for jar in glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", f"{name}-*.jar")):
        m = re.search(rf"{re.escape(name)}-(\d+(?:\.\d+)+)\.jar$", jar)
        if m:
            return m.group(1)
    raise RuntimeError(f"pyspark ships no {name} jar")


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
    from .session import startup_log

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


class LateSession:
    """The Spark session of one master or replica, shared by its parts and made at its first use:
    Spark starts late (``wlc master`` on a database without tables, a replica whose segments
    delta-rs lands, ``wlr status`` start none), and a Spark this session started can be ended
    again once unused (:meth:`release`: a follow service's JVM between DDL).

    Args:
        given (SparkSession | None): the session given to the master or replica (None: the
            active one, when first needed).
        derive (Callable[[SparkSession], SparkSession] | None): makes the session the parts use
            from the base one, once (a replica's replay session: a child with its own SQL
            settings); None: the base session itself.
    """

    def __init__(self, given: Any = None, derive: Callable[[Any], Any] | None = None) -> None:
        self.given = given
        self._derive = derive
        self._made: Any = None
        self._base: Any = None  # the base session ``_made`` comes from (a new base: made again)
        self._parent: LateSession | None = None
        self._lock = threading.Lock()  # threads that share it make it once
        self.started_spark = False  # this session (or one derived from it) started the process's Spark
        self.used = 0.0  # time.monotonic() of the last use of this session or one derived from it

    def derived(self, derive: Callable[[Any], Any]) -> LateSession:
        """A session made from this one's at its own first use (this one is made then, not now).

        Args:
            derive (Callable[[SparkSession], SparkSession]): makes the new session from this one's
                (e.g. a child session for another thread, or this one with a thread's job properties).

        Returns:
            LateSession: the new late session; its :meth:`base` is this one's session.
        """
        out = LateSession(None, derive)
        out._parent = self
        return out

    def _root(self) -> LateSession:
        root = self
        while root._parent is not None:
            root = root._parent
        return root

    @property
    def made(self) -> Any:
        """The parts' session when it was made already (and its base was not released since),
        else None (makes none)."""
        if self._made is not None and self._parent is not None and self._parent.made is not self._base:
            return None
        return self._made

    def base(self) -> Any:
        """The session given (or the session this one derives from), else the active one (made from config when none is)."""
        if self._parent is not None:
            return self._parent()
        if self.given is not None:
            return self.given
        if running_session() is None:
            self.started_spark = True
        return active_session()

    def running(self) -> Any:
        """The session given, else the process's running one; None when Spark does not run (starts none)."""
        if self._parent is not None:
            made = self.made
            return made if made is not None else self._parent.running()
        return self.given if self.given is not None else running_session()

    def __call__(self) -> Any:
        """The parts' session (made now, from :meth:`base`, at the first call; once, whichever
        thread calls first; again after :meth:`release`)."""
        self._root().used = time.monotonic()
        made = self.made
        if made is None:
            with self._lock:
                made = self.made
                if made is None:
                    base = self.base()
                    made = base if self._derive is None else self._derive(base)
                    self._base, self._made = base, made
        return made

    def release(self, idle: float) -> bool:
        """End the process's Spark, JVM included (:func:`stop_spark`), when this session started
        it and neither it nor a session derived from it was used for ``idle`` seconds; the next
        use starts Spark again. Nothing when Spark was given or already ran (a user's session).

        Args:
            idle (float): seconds without a use, at least.

        Returns:
            bool: True when Spark was ended.
        """
        with self._lock:
            session = self._made
            if (
                self._parent is not None
                or session is None
                or not self.started_spark
                or time.monotonic() - self.used < idle
            ):
                return False
            self._made = self._base = None
            self.started_spark = False
        stop_spark(session)
        return True


def stop_spark(spark: Any) -> None:
    """End ``spark``'s Spark application and its JVM: ``SparkContext.stop()``, then the JVM's
    standard input closed (PySpark's gateway server exits at its end of file, as when the Python
    process ends) and PySpark's gateway forgotten, so that the next session starts a new JVM
    (``SparkContext._ensure_initialized``).

    Args:
        spark (SparkSession): a session of the process's Spark (the one this process started).
    """
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):
        gateway.shutdown()
    if proc is not None:
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# the settings that change what Ivy resolves: any of them makes a new record
_IVY_KEYS = (
    "spark.jars",
    "spark.jars.packages",
    "spark.jars.repositories",
    "spark.jars.ivy",
    "spark.jars.ivySettings",
    "spark.jars.excludes",
)


class DeltaJars:
    """The jars of a new session: resolved by Ivy or recorded from an earlier resolution.

    Args:
        extra_packages (list[str]): Maven coordinates wanted beside Delta's (e.g. hadoop-aws).
        conf (Mapping[str, str]): the session's settings (their Ivy settings are part of the record's key).
    """

    def __init__(self, extra_packages: list[str], conf: Mapping[str, str]):
        self.extra_packages = list(extra_packages)
        asked = {
            "delta": metadata.version("delta_spark"),
            "pyspark": metadata.version("pyspark"),
            "packages": self.extra_packages,
            "conf": {k: conf[k] for k in _IVY_KEYS if k in conf},
        }
        digest = hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:16]
        self.record = cache_folder() / "jars" / f"{digest}.json"
        self.recorded = self._read()

    def _read(self) -> list[str] | None:
        try:
            jars = json.loads(self.record.read_text())["jars"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not jars or not all(isinstance(j, str) and Path(j.removeprefix("file://")).is_file() for j in jars):
            return None  # a jar was removed from Ivy's cache (or the record is damaged): resolve again
        return list(jars)

    def configure(self, builder: Any) -> Any:
        """Add the jars to a ``SparkSession.Builder``: the recorded list, else Delta's packages to resolve.

        Args:
            builder (SparkSession.Builder): the builder of the new session.

        Returns:
            SparkSession.Builder: the same builder.
        """
        if self.recorded is not None:
            return builder.config("spark.jars", ",".join(self.recorded))
        from delta import configure_spark_with_delta_pip

        return configure_spark_with_delta_pip(builder, extra_packages=self.extra_packages)

    def remember(self, spark: Any) -> None:
        """Record the jars a session started by resolution got (nothing when it used the record).

        Args:
            spark (SparkSession): the session just started from :meth:`configure`'s builder.
        """
        if self.recorded is not None:
            return
        jars = [j for j in (spark.sparkContext.getConf().get("spark.jars") or "").split(",") if j]
        if not jars:
            return
        self.record.parent.mkdir(parents=True, exist_ok=True)
        aside = self.record.with_name(f".{self.record.name}.{os.getpid()}")
        aside.write_text(json.dumps({"jars": jars}))
        os.replace(aside, self.record)  # two processes starting at once each write a whole record


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
