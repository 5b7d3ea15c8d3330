"""The master's versions at a replica's tick for ``wlr verify`` (:func:`wlr.verify.master_versions`),
found in published batches alone: capture's cursors at a batch's end, moved by the records of the
batch holding the tick (no table is read)."""

from datetime import datetime, timezone

from wlcore.batch import CaptureState, Cursor, Manifest, TxnRecord
from wlcore.logstore import LogStore
from wlcore.storage import Storage
from wlr.verify import TableCheck, Verification, master_versions

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)


def rec(txn: int, table: str, version: int | None, ddl: str | None = None) -> TxnRecord:
    return TxnRecord(txn=txn, gtid=f"g:{txn}", time=T0, table=table, version=version, operation="WRITE", ddl=ddl)


def publish(store: LogStore, batch: int, recs: list[TxnRecord], cursors: dict[str, int]) -> None:
    state = CaptureState({t: Cursor(v, None) for t, v in cursors.items()}, next_txn=recs[-1].txn + 1 if recs else 0)
    store.publish(store.stage(batch), Manifest("m", "d0", batch, T0, recs, cursors=state))


def versions(found) -> dict | str:
    """The versions of :func:`master_versions`' answer, without the table ids."""
    return found if isinstance(found, str) else {t: v for t, (v, _ids) in found.items()}


def test_the_versions_at_a_tick_come_from_the_batch_holding_it(tmp_path):
    root = str(tmp_path / "m")
    store = LogStore(Storage.of(root), root, root + "/wlc_logs", "m")
    publish(store, 0, [rec(0, "s.a", 0), rec(1, "s.b", 0)], {"s.a": 0, "s.b": 0})
    publish(store, 1, [], {"s.a": 1, "s.b": 0})  # a beat without transactions (OPTIMIZE examined)
    publish(store, 2, [rec(2, "s.a", 2), rec(3, "s.b", 1), rec(4, "s.a", 3), rec(5, "s.b", None, "drop")], {"s.a": 3})
    assert versions(master_versions(store, 1)) == {"s.a": 0, "s.b": 0}  # a batch's end: its cursors
    assert versions(master_versions(store, 3)) == {"s.a": 2, "s.b": 1}  # inside batch 2: batch 1's cursors, moved
    assert versions(master_versions(store, 4)) == {"s.a": 3, "s.b": 1}
    assert versions(master_versions(store, 5)) == {"s.a": 3}  # dropped by then: capture keeps no cursor
    assert versions(master_versions(store, 9)) == {"s.a": 3}
    assert master_versions(store, 0) == (
        "transaction 0 is inside batch 0, the master's first: no batch records the versions before it"
    )
    store.delete(store.batches()[:2])  # pruned
    assert master_versions(store, 1) == "no published level-0 batch holds transaction 1 (pruned)"
    assert master_versions(store, 3) == (
        "transaction 3 is inside batch 2, the first one published (those before pruned): "
        "no batch records the versions before it"
    )


def test_versions_from_before_a_promotion_are_not_taken(tmp_path):
    """Batches the old master published carry its cursors (its tables' versions): a tick in them,
    or inside the new master's first batch, is not answered with them."""
    root = str(tmp_path / "m")
    store = LogStore(Storage.of(root), root, root + "/wlc_logs", "m")
    publish(store, 0, [rec(0, "s.a", 0)], {"s.a": 0})
    state = CaptureState({"s.a": Cursor(4, None)}, next_txn=3)
    store.publish(store.stage(1), Manifest("m", "new", 1, T0, [rec(1, "s.a", 3), rec(2, "s.a", 4)], cursors=state))
    assert "before a promotion" in master_versions(store, 0)
    assert master_versions(store, 1) == "transaction 1 is inside the first batch after a promotion"
    assert versions(master_versions(store, 2)) == {"s.a": 4}


def test_a_verification_is_rendered_as_a_table_then_each_difference():
    result = Verification(
        "r",
        "m",
        7,
        [
            TableCheck("s.a", "equal", 3, 5, 10, 10, engine="delta-rs"),
            TableCheck(
                "s.b",
                "differs",
                2,
                4,
                9,
                10,
                ["9 rows on the replica, 10 on the master"],
                ["replica lacks id=4"],
                "spark",
            ),
            TableCheck("s.c", "not compared", 1, problems=["the master's table is gone"]),
        ],
    )
    assert not result.equal
    assert Verification("r", "m", 7, [TableCheck("s.a", "equal", 3, 5, 10, 10)]).equal
    assert not Verification("r", "m", 7, [TableCheck("s.c", "not compared")]).equal  # not compared: not verified
    nothing = Verification("r", "m", -1, [], reason="the replica has replayed no transaction since its start")
    assert not nothing.equal and nothing.render().splitlines()[-1] == (
        "nothing compared: the replica has replayed no transaction since its start"
    )
    assert result.render().splitlines() == [
        "replica r against master m at transaction 7",
        "table  result        replica rows  master rows  replica version  master version  read by",
        "s.a    equal         10            10           3                5               delta-rs",
        "s.b    differs       9             10           2                4               spark",
        "s.c    not compared  -             -            1                -               -",
        "s.b: 9 rows on the replica, 10 on the master",
        "s.b: replica lacks id=4",
        "s.c: the master's table is gone",
        "1 of 3 tables differ; 1 not compared",
    ]


def test_small_tables_are_found_equal_without_spark_only_when_sorted_rows_match(tmp_path):
    """Both sides read by delta-rs and compared sorted: equal whatever the order and the files;
    a changed row, a NaN (never equal to itself in Arrow) or a size over the limit leave the
    decision to Spark (None)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from wlr.verify import _equal_small

    def table(name: str, parts: list[dict]) -> tuple[tuple[Storage, str], int]:
        path = str(tmp_path / name)
        for i, part in enumerate(parts):
            write_deltalake(path, pa.table(part), mode="append" if i else "error")
        return (Storage.of(path), path), len(parts) - 1

    a = table("a", [{"id": [1, 2], "v": ["x", None], "f": [0.5, 1.5]}, {"id": [3], "v": ["z"], "f": [2.5]}])
    b = table("b", [{"id": [3, 1, 2], "v": ["z", "x", None], "f": [2.5, 0.5, 1.5]}])
    c = table("c", [{"id": [3, 1, 2], "v": ["z", "x", "y"], "f": [2.5, 0.5, 1.5]}])
    n = table("n", [{"id": [3, 1, 2], "v": ["z", "x", None], "f": [2.5, 0.5, float("nan")]}])
    assert _equal_small(*a, *b, 1 << 20) == 3
    assert _equal_small(*a, *c, 1 << 20) is None
    assert _equal_small(*n, *n, 1 << 20) is None
    assert _equal_small(*a, *b, 10) is None
    assert _equal_small(*a, *b, 0) is None
