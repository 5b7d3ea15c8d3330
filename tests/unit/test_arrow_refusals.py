"""Which segments the Arrow engine lands in the process, from the replica table's state read from
its log (:func:`wlr.apply._refusal`): the parts of the rule that read the table's files (no Spark)."""

import json

from wlcore.deltalog import Snapshot, TableMeta
from wlr.apply import Changes, _refusal
from wlr.planner import Limits

MiB = 1 << 20


def meta(conf=None, kinds=(("id", "long"), ("x", "double"), ("at", "timestamp"))) -> TableMeta:
    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in kinds]
    return TableMeta(json.dumps({"type": "struct", "fields": fields}), (), {"wlc.key": "id", **(conf or {})}, "id")


def segment(table: TableMeta, insert_only=False) -> Changes:
    return Changes(
        table="s.t",
        path="/r/s/t",
        uri="file:///r/s/t",
        local="/r/s/t",
        meta=table,
        shape=None,
        uris=(),
        files=(),
        first=1,
        last=2,
        text="wlr:x:1-2",
        part="wlr:x:1-2:part",
        rows_in=3,
        insert_only=insert_only,
        keep=None,
        limits=Limits(deltars_bytes=256 * MiB, rewrite_bytes=16 * MiB),
    )


def state(*stats, size=1000, path="part-0.parquet") -> Snapshot:
    files = {
        f"{path}{i}": {"path": f"{path}{i}", "size": size, "stats": json.dumps(s) if s is not None else None}
        for i, s in enumerate(stats)
    }
    return Snapshot(3, {"minReaderVersion": 1, "minWriterVersion": 2}, {}, files, {}, (0, 0, 0))


BOUNDED = {"numRecords": 2, "minValues": {"x": 1.5, "at": "2024-01-01T00:00:00.000Z"}, "nullCount": {"x": 0, "at": 0}}
BOUNDED["maxValues"] = {"x": 2.5, "at": "2024-01-02T00:00:00.001Z"}


def test_a_small_table_is_rewritten_here_whatever_its_files_hold():
    nan = {"numRecords": 1, "minValues": {"x": "NaN"}, "maxValues": {"x": "NaN"}, "nullCount": {"x": 0}}
    assert _refusal(state(nan, None), segment(meta())) is None  # read here: INT96 in microseconds, NaN kept
    assert _refusal(None, segment(meta())).startswith("its log cannot be rebuilt here")


def test_a_merge_through_delta_rs_needs_files_whose_statistics_rule_out_nan_and_far_instants():
    big = 20 * MiB  # past replica.rewrite_bytes: a MERGE
    assert _refusal(state(BOUNDED, size=big), segment(meta())) is None
    nan = dict(BOUNDED, minValues={"x": "NaN", "at": BOUNDED["minValues"]["at"]})  # as Spark writes a NaN
    assert "may hold NaN" in _refusal(state(nan, size=big), segment(meta()))
    unbounded = dict(
        BOUNDED, minValues={"at": BOUNDED["minValues"]["at"]}, maxValues={"at": BOUNDED["maxValues"]["at"]}
    )
    assert "may hold NaN" in _refusal(state(unbounded, size=big), segment(meta()))  # as replay writes a NaN
    only_nulls = dict(unbounded, nullCount={"x": 2, "at": 0})
    assert _refusal(state(only_nulls, size=big), segment(meta())) is None
    far = dict(BOUNDED, minValues={"x": 1.5, "at": "1500-01-01T00:00:00.000Z"})
    assert "before 1678" in _refusal(state(far, size=big), segment(meta()))
    assert "without statistics" in _refusal(state(None, size=big), segment(meta()))
    assert _refusal(state(None, size=big), segment(meta(), insert_only=True)) is None  # an append rewrites nothing


def test_an_append_only_table_takes_only_appends_here():
    append_only = meta({"delta.appendOnly": "true"})
    assert _refusal(state(BOUNDED), segment(append_only, insert_only=True)) is None
    assert "append-only" in _refusal(state(BOUNDED), segment(append_only))


def test_a_rewrite_reads_only_files_named_plainly_below_the_table():
    assert "not plain names" in _refusal(state(BOUNDED, path="a%20b/part-0.parquet"), segment(meta()))
    assert "not plain names" in _refusal(state(BOUNDED, path="s3://bucket/part-0.parquet"), segment(meta()))
    assert _refusal(state(BOUNDED, path="a%20b/part-0.parquet"), segment(meta(), insert_only=True)) is None


def test_sizes_send_a_segment_to_spark():
    assert _refusal(state(BOUNDED, size=300 * MiB), segment(meta())) == f"{300 * MiB} bytes"
    unkeyed = TableMeta(meta().schema_json, (), {}, "id")
    assert "unkeyed table" in _refusal(state(BOUNDED, size=20 * MiB), segment(unkeyed))
