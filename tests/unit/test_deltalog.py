"""Reading Delta commit files: transactions vs bookkeeping, commit times, shapes."""

import json
import os
from datetime import datetime, timezone

from wlc.capture import added_columns, shape_changed
from wlcore.deltalog import (
    TableMeta,
    latest_version,
    list_versions,
    monotonic,
    parse_commit,
    versions_newest_first,
)
from wlcore.storage import Storage
from wlcore.storage.local import LocalStorage

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "i", "type": "integer", "nullable": True, "metadata": {}}]})


def lines(*actions):
    return "\n".join(json.dumps(a) for a in actions)


def meta(schema=SCHEMA, conf=None, parts=()):
    return {
        "metaData": {"id": "t1", "schemaString": schema, "partitionColumns": list(parts), "configuration": conf or {}}
    }


def test_in_commit_timestamp_wins():
    c = parse_commit(
        3,
        lines(
            {"commitInfo": {"timestamp": 1000, "inCommitTimestamp": 2000, "operation": "WRITE"}},
            {"add": {"path": "a", "dataChange": True}},
        ),
    )
    assert c.timestamp == datetime.fromtimestamp(2, tz=timezone.utc)
    assert c.data_change and c.operation == "WRITE" and c.version == 3


def test_optimize_is_not_a_data_change():
    c = parse_commit(
        4,
        lines(
            {"commitInfo": {"timestamp": 1, "operation": "OPTIMIZE"}},
            {"add": {"path": "b", "dataChange": False}},
            {"remove": {"path": "a", "dataChange": False}},
        ),
    )
    assert not c.data_change and c.metadata is None


def test_txn_and_user_metadata():
    c = parse_commit(
        5,
        lines(
            {"commitInfo": {"timestamp": 1, "operation": "MERGE", "userMetadata": "wlr:x:3"}},
            {"txn": {"appId": "wlc:x", "version": 3}},
        ),
    )
    assert c.user_metadata == "wlr:x:3" and c.txns == {"wlc:x": 3}


def test_shape_ignores_engine_properties_and_carries_table_features():
    a = TableMeta.from_action(meta(conf={"wlc.key": "i"})["metaData"])
    b = TableMeta.from_action(
        meta(
            conf={
                "wlc.key": "i",
                "delta.enableInCommitTimestamps": "true",
                "delta.logRetentionDuration": "interval 1 day",
            }
        )["metaData"]
    )
    assert not shape_changed(a, b)
    # the change feed, column mapping, type widening, deletion vectors define the table for
    # its readers: replicas carry them (a change of them is a change of definition)
    fed = TableMeta.from_action(meta(conf={"wlc.key": "i", "delta.enableChangeDataFeed": "true"})["metaData"])
    assert shape_changed(a, fed) and fed.change_feed and fed.key_columns == ["i"]
    c = TableMeta.from_action(meta(conf={"wlc.key": "i", "delta.constraints.pos": "i > 0"})["metaData"])
    assert shape_changed(a, c) and c.constraints == {"pos": "i > 0"}


def test_commit_times_follow_deltas_time_travel_rule():
    """No In-Commit Timestamp: a time not after the previous version's becomes it + 1 ms."""
    c = parse_commit(3, lines({"commitInfo": {"timestamp": 1000, "operation": "WRITE"}}))
    assert not c.ict
    prev = datetime.fromtimestamp(5, tz=timezone.utc)
    monotonic(c, prev)
    assert (c.timestamp - prev).total_seconds() == 0.001
    later = parse_commit(4, lines({"commitInfo": {"timestamp": 9000, "operation": "WRITE"}}))
    monotonic(later, c.timestamp)
    assert later.timestamp == datetime.fromtimestamp(9, tz=timezone.utc)


def test_clustering_comes_from_the_domain_metadata():
    c = parse_commit(
        1,
        lines(
            {"commitInfo": {"timestamp": 1, "operation": "CLUSTER BY"}},
            {
                "domainMetadata": {
                    "domain": "delta.clustering",
                    "removed": False,
                    "configuration": json.dumps({"clusteringColumns": [["i"]]}),
                }
            },
        ),
    )
    assert c.clustering_changed and c.metadata is None and c.domains["delta.clustering"]
    m = TableMeta.from_action(meta()["metaData"]).with_clustering((("i",),))
    assert m.clustering_columns == [["i"]] and m.shape()["clustering"] == [["i"]]
    assert TableMeta.from_json(m.to_json()) == m


def test_added_columns_only_for_nullable_columns_and_nothing_else_changed():
    def with_fields(*extra):
        return TableMeta.from_action(
            meta(json.dumps({"type": "struct", "fields": json.loads(SCHEMA)["fields"] + list(extra)}))["metaData"]
        )

    s = {"name": "s", "type": "string", "nullable": True, "metadata": {}}
    old = TableMeta.from_action(meta()["metaData"])
    assert added_columns(old, with_fields(s)) == ["s"]
    assert added_columns(None, with_fields(s)) == []  # no earlier shape known
    assert added_columns(old, old) == []  # nothing added (a property change)
    assert added_columns(old, with_fields(dict(s, nullable=False))) == []
    assert added_columns(old, with_fields(dict(s, metadata={"comment": "why"}))) == []
    props = TableMeta.from_action(meta(with_fields(s).schema_json, conf={"wlc.key": "i"})["metaData"])
    assert added_columns(old, props) == []  # a replicated property changed too
    retyped = json.dumps({"type": "struct", "fields": [dict(json.loads(SCHEMA)["fields"][0], type="long"), s]})
    assert added_columns(old, TableMeta.from_action(meta(retyped)["metaData"])) == []


def test_a_version_checksum_gives_size_and_files_without_spark(tmp_path):
    """A table written by Delta Spark (tests/data) carries a checksum file per version; its size
    is what the data files add up to. A version without a readable checksum says None."""
    import os
    import shutil

    from wlcore.deltalog import checksum_size
    from wlcore.storage import Storage

    table = os.path.join(os.path.dirname(__file__), "..", "data", "snapshot", "s", "t")
    storage = Storage.of(table)
    data = [f for f in os.listdir(table) if f.endswith(".parquet")]
    assert checksum_size(storage, table, 0) == (0, 0)
    assert checksum_size(storage, table, 1) == (sum(os.path.getsize(os.path.join(table, f)) for f in data), len(data))
    assert checksum_size(storage, table, 2) is None  # no such version
    copy = tmp_path / "t"
    shutil.copytree(table, copy)
    (copy / "_delta_log" / f"{1:020d}.crc").write_text('{"tableSizeBytes": 6')  # cut short
    assert checksum_size(storage, str(copy), 1) is None


def test_a_definition_whose_commits_were_cleaned_up_is_read_from_the_checkpoint(tmp_path):
    """Log clean-up leaves a checkpoint as the only record of the metadata and protocol: the
    definition is read from it (with the commits after it), the same as from the whole log."""
    import os

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from wlcore.deltalog import checkpoint_versions, metadata_at
    from wlcore.storage import Storage

    path = str(tmp_path / "t")
    data = pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array(["a", "b"])})
    write_deltalake(path, data, configuration={"delta.appendOnly": "true"}, description="kept")
    write_deltalake(path, data, mode="append")
    DeltaTable(path).create_checkpoint()  # at version 1
    write_deltalake(path, data, mode="append")  # version 2, after it
    store = Storage.of(path)
    whole = metadata_at(store, path, 2)
    assert whole is not None and checkpoint_versions(store, path) == [1]
    for v in (0, 1):
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    read = metadata_at(store, path, 2)
    assert read == whole and read.description == "kept" and read.configuration["delta.appendOnly"] == "true"
    assert read.features == whole.features and "appendOnly" in read.features
    assert metadata_at(store, path, 1) == whole  # the checkpoint's own version
    assert metadata_at(store, path, 0) is None  # gone: nothing holds it


def test_a_partial_multi_part_checkpoint_is_ignored(tmp_path):
    """A writer that died mid-checkpoint leaves parts 1..k of n: Delta's protocol ignores such a
    set, so the definition comes from a complete set or single file of that version, else from
    an older checkpoint; a version whose only checkpoint is partial is not listed."""
    import os

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from wlcore.deltalog import checkpoint_state, checkpoint_versions, metadata_at
    from wlcore.storage import Storage

    path = str(tmp_path / "t")
    data = pa.table({"k": pa.array([1, 2], pa.int64())})
    write_deltalake(path, data, description="first")
    DeltaTable(path).create_checkpoint()  # at version 0
    write_deltalake(path, data, mode="append")
    DeltaTable(path).create_checkpoint()  # at version 1
    log = os.path.join(path, "_delta_log")
    whole = f"{1:020d}.checkpoint.parquet"
    # Parts 1 of 2 and 2 of 3 of version 1, neither holding the metaData.
    import pyarrow.parquet as pq

    part = pa.table({"txn": pa.array([None], pa.struct([("appId", pa.string())]))})
    pq.write_table(part, os.path.join(log, f"{1:020d}.checkpoint.{1:010d}.{2:010d}.parquet"))
    pq.write_table(part, os.path.join(log, f"{1:020d}.checkpoint.{2:010d}.{3:010d}.parquet"))
    store = Storage.of(path)
    assert checkpoint_versions(store, path) == [0, 1]  # the whole file of version 1 is read instead
    assert checkpoint_state(store, path, 1)[0].description == "first"
    os.remove(os.path.join(log, whole))
    assert checkpoint_versions(store, path) == [0]  # only partial sets are left at version 1
    os.remove(os.path.join(log, f"{0:020d}.json"))
    read = metadata_at(store, path, 1)  # commit 0 gone, version 1's checkpoint partial: version 0's is read
    assert read is not None and read.description == "first"
    try:
        checkpoint_state(store, path, 1)
    except FileNotFoundError as e:
        assert "no complete checkpoint of version 1" in str(e)
    else:
        raise AssertionError("a partial checkpoint was read")


def test_a_checksum_is_derived_from_the_one_before_and_the_commits_since(tmp_path):
    """The checksum of a commit made by a writer that writes none (delta-rs) takes the protocol and
    metadata of the checksum before, replaced by those the commits since carry (an ALTER's
    ``metaData``), and the size and file count given; where the version before has none, from the
    newest checksum before it; none is written without one,
    and the set transactions Delta keeps in its own are left out (Delta reads them from the log)."""
    import json
    import os
    import shutil

    from wlcore.deltalog import TableMeta, checksum_size, metadata_at, write_checksum
    from wlcore.storage import Storage

    table = tmp_path / "t"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "data", "snapshot", "s", "t"), table)
    storage, log = Storage.of(str(table)), table / "_delta_log"
    prior = json.loads((log / f"{1:020d}.crc").read_text())
    meta = dict(
        prior["metadata"],
        schemaString=prior["metadata"]["schemaString"].replace(
            "]}", ',{"name":"late","type":"double","nullable":true,"metadata":{}}]}'
        ),
    )
    (log / f"{2:020d}.json").write_text(
        json.dumps({"commitInfo": {"operation": "ADD COLUMNS"}}) + "\n" + json.dumps({"metaData": meta}) + "\n"
    )
    (log / f"{3:020d}.json").write_text(
        json.dumps({"commitInfo": {"operation": "MERGE"}})
        + "\n"
        + json.dumps({"txn": {"appId": "wlc:x", "version": 9}})
        + "\n"
    )
    assert write_checksum(storage, str(table), 1, 3, 1234, 5) is True
    crc = json.loads((log / f"{3:020d}.crc").read_text())
    assert checksum_size(storage, str(table), 3) == (1234, 5)
    assert crc["metadata"] == meta and crc["protocol"] == prior["protocol"]
    assert (crc["numMetadata"], crc["numProtocol"]) == (1, 1) and "setTransactions" not in crc
    assert TableMeta.from_action(crc["metadata"]).columns == metadata_at(storage, str(table), 3).columns
    assert not [f for f in os.listdir(log) if f.endswith(".tmp")]
    (log / f"{3:020d}.crc").unlink()
    assert write_checksum(storage, str(table), 2, 3, 1234, 5) is True  # version 2 has none: from version 1's
    assert json.loads((log / f"{3:020d}.crc").read_text())["metadata"] == meta
    (log / f"{3:020d}.crc").unlink()
    for v in (0, 1):
        (log / f"{v:020d}.crc").write_text('{"tableSizeBytes": 6')  # cut short: nothing to derive from
    assert write_checksum(storage, str(table), 1, 3, 1, 1) is False and not (log / f"{3:020d}.crc").exists()


def test_a_commit_and_its_cursor_keep_the_digest_of_the_commit_files_text():
    """A restarted capture tells the log it read by the text at its cursor: the same text has
    the same digest, a table made again (another writer's clock) another; the cursor keeps it."""
    from wlcore.batch import Cursor

    first = lines({"commitInfo": {"timestamp": 1000, "operation": "WRITE"}})
    again = lines({"commitInfo": {"timestamp": 1001, "operation": "WRITE"}})
    assert parse_commit(3, first).digest == parse_commit(3, first).digest != parse_commit(3, again).digest
    cur = Cursor(3, None, digest=parse_commit(3, first).digest)
    assert Cursor.from_json(cur.to_json()) == cur
    assert "digest" not in Cursor(3, None).to_json() and Cursor.from_json({"version": 3}).digest == ""


class _Listings(LocalStorage):
    """A local folder listed as S3 lists (from a name, StartAfter), that records how a log was
    listed: ``("after", name)`` or ``("whole",)``."""

    local, s3 = False, True

    def __init__(self, fs):
        super().__init__(fs)
        self.calls: list[tuple] = []

    def listdir(self, path):
        self.calls.append(("whole",))
        return super().listdir(path)

    def listdir_after(self, path, after):
        self.calls.append(("after", after))
        return sorted(n for n in os.listdir(path) if n > after)


def _log(tmp_path, versions, pointer):
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    for v in versions:
        (log / f"{v:020d}.json").write_text(lines({"commitInfo": {"timestamp": v}}))
        (log / f"{v:020d}.crc").write_text("{}")
    if pointer is not None:
        (log / "_last_checkpoint").write_text(pointer)
    return str(tmp_path / "t")


def test_the_latest_version_is_listed_from_the_checkpoint_last_checkpoint_names(tmp_path):
    path = _log(tmp_path, range(0, 13), json.dumps({"version": 10, "size": 3}))
    (tmp_path / "t" / "_delta_log" / f"{10:020d}.checkpoint.parquet").write_bytes(b"")
    storage = _Listings(Storage.of(path).fs)
    assert latest_version(storage, path) == 12
    assert storage.calls == [("after", f"{9:020d}.json")]  # the commits from the checkpoint on, not the log
    storage.calls.clear()
    walk = versions_newest_first(storage, path)
    assert [next(walk) for _ in range(3)] == [12, 11, 10] and storage.calls == [("after", f"{9:020d}.json")]
    assert list(walk) == list(range(9, -1, -1)) and storage.calls[1:] == [("whole",)]  # on past it: the rest


def test_the_latest_version_is_the_whole_listings_newest_whatever_last_checkpoint_says(tmp_path):
    cases = {
        "beyond the log (left by a table made again)": (range(0, 4), json.dumps({"version": 50})),
        "older than the newest checkpoint": (range(0, 30), json.dumps({"version": 5})),
        "not JSON": (range(0, 4), "{half"),
        "no version": (range(0, 4), json.dumps({"size": 1})),
        "missing": (range(0, 4), None),
        "commits cleaned up before it": (range(20, 26), json.dumps({"version": 20})),
        "infinite": (range(0, 12), '{"version": Infinity}'),
        "too big a number": (range(0, 12), '{"version": 1e400}'),
        "a float": (range(0, 12), '{"version": 10.0}'),
        "nested past Python's recursion limit": (range(0, 12), "[" * 100_000),
        "a list": (range(0, 12), "[10]"),
    }
    for i, (case, (versions, pointer)) in enumerate(cases.items()):
        path = _log(tmp_path / str(i), versions, pointer)
        storage = _Listings(Storage.of(path).fs)
        assert latest_version(storage, path) == list_versions(storage, path)[-1], case
        assert list(versions_newest_first(storage, path)) == list_versions(storage, path)[::-1], case
    path = _log(tmp_path / "wide", range(0, 13), json.dumps({"version": 10}))
    (tmp_path / "wide" / "t" / "_delta_log" / "０００００００００００００００００００３.json").write_text("{}")
    storage = _Listings(Storage.of(path).fs)  # not a commit file: full-width digits sort after every version
    assert list(versions_newest_first(storage, path)) == list_versions(storage, path)[::-1] == list(range(12, -1, -1))
    objects = _Listings(Storage.of(str(tmp_path)).fs)
    assert latest_version(objects, str(tmp_path / "none")) is None
    assert latest_version(objects, _log(tmp_path / "empty", [], json.dumps({"version": 3}))) is None
    local = Storage.of(str(tmp_path))  # a local folder lists whole at once: the same answers
    assert latest_version(local, str(tmp_path / "1" / "t")) == 29 and list(
        versions_newest_first(local, str(tmp_path / "2" / "t"))
    ) == [3, 2, 1, 0]
