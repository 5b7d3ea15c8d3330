"""MERGE source columns rebuilt with the replica table's nested NOT NULL fields (wlr.apply)."""

import pytest
from pyspark.sql.types import ArrayType, IntegerType, MapType, StringType, StructField, StructType, VariantType

from wlr.apply import conformed, required_inside


def test_columns_without_required_insides_are_assigned_as_they_are():
    plain = StructType([StructField("a", IntegerType())])
    assert not required_inside(plain) and conformed("s.`c`", plain) == "s.`c`"
    assert conformed("s.`n`", IntegerType()) == "s.`n`"


def test_a_required_struct_field_is_never_null_and_a_null_fails_the_job():
    t = StructType([StructField("a", IntegerType(), False), StructField("b", StringType())])
    sql = conformed("s.`c`", t)
    assert sql.startswith("CASE WHEN s.`c` IS NULL THEN NULL ELSE named_struct('a', coalesce(s.`c`.`a`, ")
    assert "raise_error('wlr-null-in-required-field: " in sql and "cast(0 as int))" in sql
    assert "'b', s.`c`.`b`)" in sql  # a nullable field is assigned as it is


def test_arrays_and_maps_of_required_values_and_odd_names():
    t = ArrayType(StructType([StructField("it's", StringType(), False)]), containsNull=False)
    sql = conformed("s.`xs`", t)
    assert sql.startswith("transform(s.`xs`, e -> named_struct('it\\'s', coalesce(e.`it's`, ")
    m = MapType(StringType(), IntegerType(), valueContainsNull=False)
    assert conformed("s.`m`", m).startswith("transform_values(s.`m`, (k, v) -> coalesce(v, ")


def test_a_required_value_without_a_constant_is_left_to_spark():
    with pytest.raises(NotImplementedError, match="variant"):
        conformed("s.`v`", StructType([StructField("x", VariantType(), False)]))


def test_only_the_raised_row_means_divergence_not_a_plan_quoting_the_expression():
    from wlr.apply import raise_diverged
    from wlr.errors import ApplyError

    plan_error = ValueError("cannot cast ... [`k` = cast(raise_error(concat(wlr-diverged: , to_json(struct(k))))]")
    with pytest.raises(ValueError, match="cannot cast"), raise_diverged():
        raise plan_error
    with pytest.raises(ApplyError, match=r'not on the replica \(e.g. \{"k":2\}\); the replica has diverged'):
        with raise_diverged():
            raise RuntimeError('[USER_RAISED_EXCEPTION] wlr-diverged: {"k":2} SQLSTATE: P0001')
