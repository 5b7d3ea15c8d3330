"""Reading Delta commit files: transactions vs bookkeeping, commit times, shapes."""
import json
from datetime import datetime, timezone

from wlc.capture import added_columns, additive, shape_changed
from wlc.deltalog import TableMeta, parse_commit

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "i", "type": "integer", "nullable": True, "metadata": {}}]})


def lines(*actions):
    return "\n".join(json.dumps(a) for a in actions)


def meta(schema=SCHEMA, conf=None, parts=()):
    return {"metaData": {"id": "t1", "schemaString": schema, "partitionColumns": list(parts),
                         "configuration": conf or {}}}


def test_in_commit_timestamp_wins():
    c = parse_commit(3, lines({"commitInfo": {"timestamp": 1000, "inCommitTimestamp": 2000, "operation": "WRITE"}},
                              {"add": {"path": "a", "dataChange": True}}))
    assert c.timestamp == datetime.fromtimestamp(2, tz=timezone.utc)
    assert c.data_change and c.operation == "WRITE" and c.version == 3


def test_optimize_is_not_a_data_change():
    c = parse_commit(4, lines({"commitInfo": {"timestamp": 1, "operation": "OPTIMIZE"}},
                              {"add": {"path": "b", "dataChange": False}},
                              {"remove": {"path": "a", "dataChange": False}}))
    assert not c.data_change and c.metadata is None


def test_txn_and_user_metadata():
    c = parse_commit(5, lines({"commitInfo": {"timestamp": 1, "operation": "MERGE", "userMetadata": "wlr:x:3"}},
                              {"txn": {"appId": "wlc:x", "version": 3}}))
    assert c.user_metadata == "wlr:x:3" and c.txns == {"wlc:x": 3}


def test_shape_ignores_engine_properties():
    a = TableMeta.from_action(meta(conf={"wlc.key": "i"})["metaData"])
    b = TableMeta.from_action(meta(conf={"wlc.key": "i", "delta.enableChangeDataFeed": "true",
                                         "delta.enableInCommitTimestamps": "true"})["metaData"])
    assert not shape_changed(a, b)
    assert b.change_feed and b.key_columns == ["i"]
    c = TableMeta.from_action(meta(conf={"wlc.key": "i", "delta.constraints.pos": "i > 0"})["metaData"])
    assert shape_changed(a, c) and c.constraints == {"pos": "i > 0"}


def test_additive_schema_change():
    wide = json.dumps({"type": "struct", "fields": json.loads(SCHEMA)["fields"] + [
        {"name": "s", "type": "string", "nullable": True, "metadata": {}}]})
    old = TableMeta.from_action(meta()["metaData"])
    assert additive(old, TableMeta.from_action(meta(wide)["metaData"]))
    assert not additive(TableMeta.from_action(meta(wide)["metaData"]), old)
    assert not additive(old, TableMeta.from_action(meta(parts=("i",))["metaData"]))


def test_added_columns_only_for_nullable_columns_and_nothing_else_changed():
    def with_fields(*extra):
        return TableMeta.from_action(meta(json.dumps({"type": "struct", "fields": json.loads(SCHEMA)["fields"]
                                                      + list(extra)}))["metaData"])

    s = {"name": "s", "type": "string", "nullable": True, "metadata": {}}
    old = TableMeta.from_action(meta()["metaData"])
    assert added_columns(old, with_fields(s)) == ["s"]
    assert added_columns(None, with_fields(s)) == []  # no earlier shape known
    assert added_columns(old, old) == []              # nothing added (a property change)
    assert added_columns(old, with_fields(dict(s, nullable=False))) == []
    assert added_columns(old, with_fields(dict(s, metadata={"comment": "why"}))) == []
    props = TableMeta.from_action(meta(with_fields(s).schema_json, conf={"wlc.key": "i"})["metaData"])
    assert added_columns(old, props) == []            # a replicated property changed too
    retyped = json.dumps({"type": "struct", "fields": [dict(json.loads(SCHEMA)["fields"][0], type="long"), s]})
    assert added_columns(old, TableMeta.from_action(meta(retyped)["metaData"])) == []
