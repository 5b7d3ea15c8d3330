"""Delta's jars (and hadoop-aws) for a new SparkSession, resolved by Ivy once and then named directly.

``delta.configure_spark_with_delta_pip`` asks Spark for Maven packages, and Spark's Ivy resolves
them at every JVM start, even when every jar is already in its cache (about 1.2-1.5 s on 2 cores,
seen in the start-up log). The first start resolves them as before and records the jars it got
(Spark's own ``spark.jars`` after the resolution); later starts with the same packages, versions
and Ivy settings pass that list as ``spark.jars``, as ``spark-submit --jars`` would, while every
listed file is still there. A missing file or any change of what was asked resolves again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from .settings import cache_folder

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
