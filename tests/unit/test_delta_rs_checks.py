"""Which tables delta-rs handles as Spark does: the checks capture's change-feed copy
(:func:`wlc.capture.deltars_refusal`) and replay's delta-rs commits (:func:`wlr.apply.why_not`)
share (:func:`wlcore.deltalog.delta_rs_refusal`), and each side's own."""

import json
from types import SimpleNamespace

import pytest

from wlc.capture import deltars_refusal as read_refusal
from wlcore.deltalog import TableMeta
from wlr.apply import why_not as write_refusal


def meta(*fields, parts=(), conf=None):
    return TableMeta(json.dumps({"type": "struct", "fields": list(fields)}), tuple(parts), dict(conf or {}), "id")


def col(name, kind, metadata=None):
    return {"name": name, "type": kind, "nullable": True, "metadata": metadata or {}}


def protocol(reader=1, writer=2, reader_features=None, writer_features=None):
    return SimpleNamespace(
        min_reader_version=reader,
        min_writer_version=writer,
        reader_features=reader_features,
        writer_features=writer_features,
    )


PLAIN = meta(col("id", "long"), col("v", "decimal(12,3)"), col("day", "date"))


def test_a_plain_table_is_handled_by_both():
    assert read_refusal(PLAIN, protocol()) is None
    assert write_refusal(PLAIN, protocol()) is None
    features = protocol(3, 7, ["timestampNtz"], ["changeDataFeed", "timestampNtz"])
    assert read_refusal(PLAIN, features) is None and write_refusal(PLAIN, features) is None


@pytest.mark.parametrize(
    "table, proto, reason",
    [
        (PLAIN, protocol(reader=2, writer=5), "reader version 2"),
        (PLAIN, protocol(3, 7, ["deletionVectors"], ["deletionVectors"]), "reader features ['deletionVectors']"),
        (PLAIN, protocol(1, 7, None, ["typeWidening"]), "writer features ['typeWidening']"),
        (PLAIN, protocol(writer=5), "writer version 5"),
        (meta(col("id", "long"), parts=["id"]), protocol(), "partitioned"),
        (meta(col("id", "long"), conf={"delta.columnMapping.mode": "name"}), protocol(), "column mapping"),
        (meta(col("id", "long"), col("s", {"type": "struct", "fields": []})), protocol(), "column s of a nested type"),
    ],
)
def test_what_neither_side_hands_to_delta_rs(table, proto, reason):
    assert read_refusal(table, proto) == reason
    assert write_refusal(table, proto) == reason


def test_each_sides_own_refusals():
    # capture reads identity, generated and CHECK-constrained tables' change feeds, and not TIMESTAMPs
    # (Spark's INT96, read through nanoseconds)
    identity = protocol(1, 6)
    assert read_refusal(PLAIN, identity) is None and write_refusal(PLAIN, identity) == "writer version 6"
    checked = meta(col("id", "long"), conf={"delta.constraints.pos": "id > 0"})
    assert read_refusal(checked, protocol(1, 3)) is None
    assert write_refusal(checked, protocol(1, 3)) == "CHECK constraints"
    stamped = meta(col("id", "long"), col("at", "timestamp"))
    assert read_refusal(stamped, protocol()).startswith("column at is a TIMESTAMP")
    assert write_refusal(stamped, protocol()) is None  # replay checks the files' instants instead
    generated = meta(col("id", "long"), col("g", "long", {"delta.generationExpression": "id * 2"}))
    assert read_refusal(generated, protocol(1, 4)) is None
    assert write_refusal(generated, protocol(1, 4)) == "column g carries ['delta.generationExpression']"
