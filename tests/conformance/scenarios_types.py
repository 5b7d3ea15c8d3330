"""Scenarios: every Spark SQL type Delta stores, at its extremes, and keys of every kind."""

from __future__ import annotations

from .harness import Scenario

COLUMNS = """id INT, b BOOLEAN, ti TINYINT, si SMALLINT, i INT, bi BIGINT, f FLOAT, d DOUBLE,
  big DECIMAL(38,18), small DECIMAL(5,2), s STRING, bin BINARY, dt DATE, ts TIMESTAMP, tsn TIMESTAMP_NTZ,
  v VARIANT, arr ARRAY<INT>, mp MAP<STRING, INT>, st STRUCT<a: INT, b: STRING>,
  nest STRUCT<m: MAP<STRING, ARRAY<DOUBLE>>, l: ARRAY<STRUCT<x: INT, y: MAP<INT, STRING>>>>,
  arrmap ARRAY<MAP<STRING, DOUBLE>>"""

ROWS = """
 (1, true, 127Y, 32767S, 2147483647, 9223372036854775807L, float('inf'), double('-inf'),
  99999999999999999999.999999999999999999BD, 999.99BD, 'ünïcödé ✓ 日本', X'00FF10', DATE'0001-01-01',
  TIMESTAMP'0001-01-01 00:00:00', TIMESTAMP_NTZ'0001-01-01 00:00:00',
  parse_json('{{"a": [1, {{"b": null}}], "c": 1.5}}'), array(1, null, 3), map('k', 1, 'z', null),
  named_struct('a', 1, 'b', 'x'),
  named_struct('m', map('p', array(1.0D, double('NaN'))), 'l', array(named_struct('x', 1, 'y', map(1, 'a')))),
  array(map('a', -0.0D))),
 (2, false, -128Y, -32768S, -2147483648, -9223372036854775808L, float('NaN'), -0.0D,
  -99999999999999999999.999999999999999999BD, -999.99BD, '', X'', DATE'9999-12-31',
  TIMESTAMP'9999-12-31 23:59:59.999999', TIMESTAMP_NTZ'9999-12-31 23:59:59.999999',
  parse_json('null'), array(), map(), named_struct('a', null, 'b', null),
  named_struct('m', map(), 'l', array()), array()),
 (3, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
  null, null, null),
 (4, null, null, null, null, null, float('-inf'), 0.0D, 0BD, 0BD, 'a', X'00', DATE'1970-01-01',
  TIMESTAMP'1970-01-01 00:00:00', TIMESTAMP_NTZ'1970-01-01 00:00:00', parse_json('[]'),
  array(null), map('', 0), named_struct('a', 0, 'b', ''), named_struct('m', null, 'l', null), array(null))"""


def every_type_unkeyed(ctx):
    """Full-row matching: NaN, -0.0 next to 0.0, NULL everywhere, exact duplicate rows."""
    ctx.sql(f"CREATE TABLE {{t}} ({COLUMNS}) USING delta")
    ctx.sql(f"INSERT INTO {{t}} VALUES {ROWS}")
    ctx.sql("INSERT INTO {t} SELECT * FROM {t} WHERE id IN (2, 3)")  # exact duplicates of rows with NaN, NULLs
    ctx.sql("UPDATE {t} SET s = concat(coalesce(s, ''), '!') WHERE id = 1")
    ctx.sql("UPDATE {t} SET d = 0.0D WHERE id = 2")  # -0.0 becomes 0.0 in both copies
    ctx.sql("DELETE FROM {t} WHERE id = 4")
    ctx.sql("MERGE INTO {t} AS t USING (SELECT 3 AS id) AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET bi = 7")
    ctx.sql("INSERT INTO {t} SELECT * FROM {t} WHERE id = 1")
    ctx.sql("DELETE FROM {t} WHERE id = 2 AND f IS NOT NULL AND isnan(f)")


def every_type_keyed(ctx):
    """The same types on a keyed table (``wlc.key``): last state per key."""
    ctx.sql(f"CREATE TABLE {{t}} ({COLUMNS}) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    ctx.sql(f"INSERT INTO {{t}} VALUES {ROWS}")
    ctx.sql("UPDATE {t} SET mp = map_concat(coalesce(mp, map()), map('new', 1)), v = parse_json('2') WHERE id <= 2")
    ctx.sql("UPDATE {t} SET nest = named_struct('m', map('q', array(-0.0D)), 'l', array()) WHERE id = 3")
    ctx.sql("DELETE FROM {t} WHERE id = 2")
    ctx.sql("UPDATE {t} SET id = 20 WHERE id = 4")  # a key change: a delete and an insert by key


def keys_of_every_kind(ctx):
    """Keys that are structs, unicode strings or NULL; a key whose value is a map."""
    ctx.sql(
        "CREATE TABLE {t} (k STRUCT<a: INT, b: STRING>, u STRING, v INT, m MAP<STRING, INT>) USING delta "
        "TBLPROPERTIES ('wlc.key' = 'k,u')"
    )
    ctx.sql(
        "INSERT INTO {t} VALUES (named_struct('a', 1, 'b', 'x'), 'ключ', 1, map('a', 1)), "
        "(named_struct('a', 1, 'b', 'y'), 'ключ', 2, null), (null, 'é', 3, map()), "
        "(named_struct('a', null, 'b', null), null, 4, map('z', 0)), (null, null, 5, null)"
    )
    ctx.sql("UPDATE {t} SET v = v * 10, m = map('b', 2) WHERE u = 'ключ' OR k IS NULL")
    ctx.sql("DELETE FROM {t} WHERE v = 4")
    ctx.sql(
        "MERGE INTO {t} AS t USING (SELECT named_struct('a', 1, 'b', 'x') AS k, 'ключ' AS u, 99 AS v, "
        "map('m', 9) AS m) AS s ON t.k <=> s.k AND t.u <=> s.u "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )


def names_under_column_mapping(ctx):
    """Column names with spaces, dots and unicode (Delta needs column mapping for them)."""
    ctx.sql(
        "CREATE TABLE {t} (`my col` INT, `a.b` STRING, `ünï 名` DOUBLE, `x,y;z{{}}()=` INT) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    ctx.sql("INSERT INTO {t} VALUES (1, 'a', 1.5, 0), (2, 'b', null, 1)")
    ctx.sql("UPDATE {t} SET `a.b` = 'z' WHERE `my col` = 1")
    ctx.sql("ALTER TABLE {t} RENAME COLUMN `a.b` TO `c d.e`")
    ctx.sql("INSERT INTO {t} VALUES (3, 'c', -0.0, 2)")
    ctx.sql("DELETE FROM {t} WHERE `ünï 名` IS NULL")


SCENARIOS = [
    Scenario("types_unkeyed", every_type_unkeyed, rs_reads=False, doc="VARIANT: delta-rs cannot read it"),
    Scenario("types_keyed", every_type_keyed, rs_reads=False, doc="VARIANT: delta-rs cannot read it"),
    Scenario("keys", keys_of_every_kind),
    Scenario("names", names_under_column_mapping),
]
