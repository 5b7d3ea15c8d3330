"""Pinned reads (:func:`wlr.pin`) of a replica folder written here by delta-rs: each table at its
version of the consistent view, the checks that keep another state of a table from being read,
and the errors for what cannot be pinned (no Spark)."""

import os
import shutil

import polars as pl
import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

import wlr
from wlcore.state import ReplicaState, write_replica_state
from wlcore.storage import Storage
from wlr.apply import tag
from wlr.errors import NotFoundError, ReplicaStateError

DBID = "d0"


def land(path: str, ids: list[int], txn: int, mode: str = "append") -> None:
    """A replay commit of transaction ``txn`` adding rows ``ids`` to the table at ``path``."""
    write_deltalake(
        path,
        pa.table({"id": pa.array(ids, pa.int64())}),
        mode=mode,
        commit_properties=CommitProperties(custom_metadata={"userMetadata": tag(DBID, txn)}),
    )


def state(farm: str, view: int | None, at: dict[str, int], status: str = "idle") -> None:
    st = ReplicaState()
    st.master, st.state, st.tick = "m", status, max([view or -1, 0])
    if view is not None:
        st.set_views(at)
        st.view = view
    write_replica_state(Storage.of(farm), os.path.join(farm, "r"), st)


def ids(frame) -> list[int]:
    frame = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    return sorted(frame["id"].to_list())


@pytest.fixture
def farm(tmp_path):
    farm = str(tmp_path / "farm")
    os.makedirs(os.path.join(farm, "r", "s"))
    land(os.path.join(farm, "r", "s", "x"), [1], 1)  # version 0
    land(os.path.join(farm, "r", "s", "y"), [1], 2)  # version 0
    land(os.path.join(farm, "r", "s", "x"), [2], 3)  # version 1: past the view
    state(farm, 2, {"s.x": 0, "s.y": 0})
    return farm


def test_a_pin_reads_every_table_at_its_version_of_the_view(farm):
    view = wlr.pin("r", farm)
    assert (view.tick, view.versions) == (2, {"s.x": 0, "s.y": 0})
    assert ids(view.polars("s.x")) == ids(view.polars("s.y")) == [1]
    assert ids(pl.from_arrow(view.delta_table("s.x").to_pyarrow_table())) == [1]
    assert ids(pl.read_delta(view.path("s.x"))) == [1, 2]  # its newest version is past the view
    view.versions["s.x"] = 1  # a copy: the pin keeps its versions
    assert view.versions["s.x"] == 0


def test_a_table_made_again_is_refused_also_by_a_lazy_read_collected_later(farm):
    view = wlr.pin("r", farm)
    lazy = view.polars("s.y")
    y = os.path.join(farm, "r", "s", "y")
    shutil.rmtree(y)  # replay drops s.y and makes it again in a later transaction
    land(y, [7], 5)
    with pytest.raises(
        ReplicaStateError,
        match=r"s\.y of replica r at version 0 is not the one of transaction 2 \(it holds transaction 5",
    ):
        view.polars("s.y")
    with pytest.raises(Exception, match="No such file|not found|NotFound"):  # its old files are gone: no other state
        lazy.collect()
    shutil.rmtree(y)
    with pytest.raises(ReplicaStateError, match="the table is gone.*pin the replica again"):
        view.delta_table("s.y")


def test_what_cannot_be_pinned_says_why(farm, tmp_path):
    with pytest.raises(ReplicaStateError, match=r"s\.z is not on replica r at transaction 2"):
        wlr.pin("r", farm).polars("s.z")
    with pytest.raises(NotFoundError, match="no dbfarm at"):
        wlr.pin("r", str(tmp_path / "nope"))
    with pytest.raises(NotFoundError):
        wlr.pin("q", farm)
    state(farm, 2, {"s.x": 0}, status="restoring")
    with pytest.raises(ReplicaStateError, match="being restored"):
        wlr.pin("r", farm)
    state(farm, None, {})
    with pytest.raises(ReplicaStateError, match="records no consistent view"):
        wlr.pin("r", farm)


def test_a_column_mapped_table_is_refused_not_read_as_nulls(farm):
    """delta-rs 1.x reads a table with column mapping (protocol reader version 2) as NULLs: the
    pin refuses it and names the Spark read instead."""
    import json

    x = os.path.join(farm, "r", "s", "x")
    first = [json.loads(line) for line in open(os.path.join(x, "_delta_log", f"{0:020d}.json"))]
    meta = next(a["metaData"] for a in first if "metaData" in a)
    meta["configuration"] = {**meta.get("configuration", {}), "delta.columnMapping.mode": "name"}
    fields = json.loads(meta["schemaString"])
    for i, f in enumerate(fields["fields"], 1):
        f["metadata"] = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f["name"]}
    meta["schemaString"] = json.dumps(fields)
    protocol = {"minReaderVersion": 2, "minWriterVersion": 5}
    commit = [
        {"commitInfo": {"operation": "SET TBLPROPERTIES", "userMetadata": tag(DBID, 2)}},
        {"protocol": protocol},
        {"metaData": meta},
    ]
    with open(os.path.join(x, "_delta_log", f"{2:020d}.json"), "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in commit) + "\n")
    state(farm, 2, {"s.x": 2, "s.y": 0})
    with pytest.raises(ReplicaStateError, match=r"s\.x of replica r uses column mapping.*through Spark"):
        wlr.pin("r", farm).polars("s.x")
