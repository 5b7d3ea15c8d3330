"""``python -m wlc.jars``: start a Spark session once so that its jars (Delta's, and
hadoop-aws when ``spark.s3a`` wants it) are resolved from Maven Central and cached, then
stop. ``make jars`` runs it; later sessions start without downloading."""

from __future__ import annotations

import sys
import time


def main() -> int:
    """Start and stop a session from config; print one line with Spark's version and the time taken."""
    from wlcore.session import spark_session

    started = time.monotonic()
    spark = spark_session()
    print(f"Spark {spark.version} with Delta ready in {time.monotonic() - started:.1f} s")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
