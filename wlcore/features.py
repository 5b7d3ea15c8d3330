"""Which Delta table features capture may switch on in the master's tables (``capture.table_features``).

Capture needs the Change Data Feed to describe a version by its changed rows; without it a
version is carried by the table's full image (correct, but it costs a copy of the table).
In-Commit Timestamps make commit times monotonic by construction; without them capture
takes Delta's own rule (:mod:`wlcore.deltalog`), which agrees with ``TIMESTAMP AS OF``.

Switching a feature on changes which engines can write the table: delta-rs (the
``deltalake`` package, polars) writes tables with the change feed but refuses tables with
In-Commit Timestamps. The default, ``[change_feed]``, keeps every writer working; ``[]``
switches nothing on (images wherever no feed exists); ``[change_feed, in_commit_timestamps]``
is for masters written by Spark alone.
"""

from __future__ import annotations

from .settings import FEATURE_NAMES, feature_names, settings

CHANGE_FEED = "delta.enableChangeDataFeed"
IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
NAMES = FEATURE_NAMES  # setting name -> table property
USER_METADATA = "wlc: switch on "  # userMetadata of capture's own property commits


def chosen(value=None) -> list[str]:
    """The feature names of ``capture.table_features`` (or ``value``), checked.

    Args:
        value (list[str] | None): feature names to check instead of the setting (None: the setting).

    Returns:
        list[str]: ``change_feed`` and/or ``in_commit_timestamps``.

    Raises:
        ConfigError: not a list of ``change_feed`` / ``in_commit_timestamps``.
    """
    if value is None:
        return list(settings().capture.table_features)  # checked when the settings were loaded
    return feature_names(value)


def switch_on(value=None) -> dict[str, str]:
    """What capture switches on in master tables that lack it.

    Args:
        value (list[str] | None): feature names instead of ``capture.table_features`` (None: the setting).

    Returns:
        dict[str, str]: ``{table property: "true"}`` (``delta.enableChangeDataFeed``, ``delta.enableInCommitTimestamps``).

    Raises:
        ConfigError: ``value`` is not a list of feature names.
    """
    return {NAMES[n]: "true" for n in chosen(value)}


def feed_switched_off(meta) -> bool:
    """True when a user set the table's change feed off (``delta.enableChangeDataFeed = false``
    in its properties, at its creation or later): capture never switches it on.

    Args:
        meta (TableMeta): the table's definition.
    """
    return str(meta.configuration.get(CHANGE_FEED, "")).strip().lower() == "false"


def enable(spark, ref: str, properties: dict[str, str]) -> None:
    """Set ``properties`` on the table ``ref`` in one commit marked as capture's
    (``commitInfo.userMetadata`` ``wlc: switch on ...``).

    Args:
        spark (SparkSession): the session that runs the ALTER TABLE (its SQL settings are used
            and restored).
        ref (str): the table as SQL names it (``delta.`<uri>```).
        properties (dict[str, str]): ``{table property: value}``.
    """
    from .tabledef import sql_string

    body = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in properties.items())
    conf = spark.conf
    conf.set("spark.databricks.delta.commitInfo.userMetadata", USER_METADATA + ", ".join(properties))
    try:
        spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ({body})")
    finally:
        conf.unset("spark.databricks.delta.commitInfo.userMetadata")


def session_defaults(value=None) -> dict[str, str]:
    """Spark settings that make tables created through ``wlc.spark_session()`` carry what
    capture would switch on, from their first commit (so no version needs an image).

    Args:
        value (list[str] | None): feature names instead of ``capture.table_features`` (None: the setting).

    Returns:
        dict[str, str]: ``{spark.databricks.delta.properties.defaults.<property>: "true"}``.
    """
    on = switch_on(value)
    names = {CHANGE_FEED: "enableChangeDataFeed", IN_COMMIT_TIMESTAMPS: "enableInCommitTimestamps"}
    return {f"spark.databricks.delta.properties.defaults.{names[k]}": "true" for k in on}
