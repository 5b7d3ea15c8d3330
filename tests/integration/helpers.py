"""Small helpers for integration tests (real Spark, real Delta, temporary dbfarm)."""
from __future__ import annotations


def rows(df) -> list[tuple]:
    """The rows of ``df`` sorted (NULLs last in each column)."""
    return sorted((tuple(r) for r in df.collect()), key=lambda row: tuple((v is None, v) for v in row))


def master_rows(spark, path: str, version: int | None = None) -> list[tuple]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return rows(reader.load(path))


def sql(spark, text: str) -> int:
    """Run one SQL statement on the master and capture it now; returns the last txn id published."""
    import wlc

    spark.sql(text)
    return wlc.flush()
