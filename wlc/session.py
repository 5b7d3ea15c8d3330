"""The SparkSession with Delta Lake, built from the settings' ``spark`` section (:mod:`wlc.config`)."""
from __future__ import annotations

from typing import Any

from .config import LOCAL_FILE, defaults_file, settings


def spark_session(**conf: Any):
    """Return a SparkSession with Delta Lake configured; reuse the active one when there is one.

    Args:
        **conf: Spark settings (``"spark.sql.shuffle.partitions": "8"`` style keys given as
            keyword arguments with dots, e.g. ``spark_session(**{"spark.master": "spark://h:7077"})``)
            merged over the ``spark.conf`` section of the config. ``master`` and ``app_name``
            are accepted as shorthands for ``spark.master`` and ``spark.app.name``.

    Returns:
        pyspark.sql.SparkSession: the active session if one exists (``conf`` is then applied
        to its runtime SQL settings where Spark allows), else a new one.

    The Delta jars are resolved by ``delta.configure_spark_with_delta_pip`` (Maven Central,
    cached in ``~/.ivy2``). The session time zone is UTC: every instant wlc/wlr report is UTC.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in conf.items():
            if key.startswith("spark.sql.") or key.startswith("spark.databricks."):
                active.conf.set(key, str(value))
        return active

    from delta import configure_spark_with_delta_pip

    cfg = settings().get("spark", {})
    merged = {str(k): str(v) for k, v in (cfg.get("conf") or {}).items()}
    master = str(conf.pop("master", cfg.get("master", "local[*]")))
    app_name = str(conf.pop("app_name", cfg.get("app_name", "wlc")))
    merged.update({k: str(v) for k, v in conf.items()})
    master = merged.pop("spark.master", master)
    app_name = merged.pop("spark.app.name", app_name)
    # Spark's log settings: config/log4j2.properties of the working folder, else the packaged ones
    log4j = LOCAL_FILE.parent / "log4j2.properties"
    log4j = log4j.resolve() if log4j.is_file() else defaults_file("log4j2.properties")
    if log4j.exists():
        opt = f"-Dlog4j.configurationFile=file:{log4j}"
        merged["spark.driver.extraJavaOptions"] = (merged.get("spark.driver.extraJavaOptions", "") + " " + opt).strip()
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    )
    for key, value in merged.items():
        builder = builder.config(key, value)
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel(str(cfg.get("log_level", "ERROR")))
    return spark


def active_session():
    """The active SparkSession, or a new one from config when none is active."""
    return spark_session()


if __name__ == "__main__":  # `python -m wlc.session`: start once so Delta's jars are resolved and cached
    import time as _time

    _t = _time.time()
    _spark = spark_session()
    print(f"Spark {_spark.version} with Delta ready in {_time.time() - _t:.1f} s")
    _spark.stop()
