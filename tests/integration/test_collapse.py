"""Collapse rules (MusicBrainz's packet chains) on small change-row frames: keyed last state per key,
unkeyed net signed count per row image, NULL keys, duplicates, order within a version."""

import pytest
from pyspark.sql import functions as F

from wlcore import collapse

from .helpers import rows

pytestmark = pytest.mark.spark


def changes(spark, data):
    """``data``: (version, change type, id, v) tuples -> change rows as read_rows() returns them."""
    df = spark.createDataFrame(data, "__wlr_v long, _change_type string, id int, v string")
    return df.withColumn(collapse.POS, F.when(F.col("_change_type").isin("insert", "update_postimage"), 1).otherwise(0))


def net_keyed(spark, data):
    out = collapse.net_by_key(changes(spark, data), ["id"])
    return rows(out.select("id", "v", collapse.OP, collapse.FIRST))


def test_keyed_chains(spark):
    got = net_keyed(
        spark,
        [
            (1, "insert", 1, "a"),
            (2, "update_preimage", 1, "a"),
            (2, "update_postimage", 1, "b"),  # insert+update = insert
            (1, "update_preimage", 2, "x"),
            (1, "update_postimage", 2, "y"),
            (3, "delete", 2, "y"),  # update+delete = delete
            (1, "insert", 3, "c"),
            (4, "delete", 3, "c"),  # insert+delete = nothing
            (2, "delete", 4, "d"),
            (5, "insert", 4, "e"),  # delete+insert = update
        ],
    )
    assert got == [(1, "b", True, 1), (2, "y", False, 0), (4, "e", True, 0)]


def test_keyed_order_within_a_version_and_null_keys(spark):
    got = net_keyed(
        spark,
        [
            (7, "insert", 5, "new"),
            (7, "delete", 5, "old"),  # one version: the delete comes first
            (1, "insert", None, "n1"),
            (2, "update_preimage", None, "n1"),
            (2, "update_postimage", None, "n2"),
        ],
    )
    assert got == [(5, "new", True, 0), (None, "n2", True, 1)]  # NULL is one key


def test_unkeyed_net_counts_keep_duplicates(spark):
    out = collapse.net_by_image(
        changes(
            spark,
            [
                (1, "insert", 1, "a"),
                (1, "insert", 1, "a"),
                (1, "insert", 1, "a"),  # three equal rows
                (2, "delete", 1, "a"),  # one of them deleted
                (3, "update_preimage", 2, "b"),
                (3, "update_postimage", 2, "c"),  # an update
                (4, "insert", 9, "z"),
                (5, "delete", 9, "z"),  # nets to nothing
            ],
        )
    )
    assert rows(out.select("id", "v", collapse.COUNT)) == [(1, "a", 2), (2, "b", -1), (2, "c", 1)]
