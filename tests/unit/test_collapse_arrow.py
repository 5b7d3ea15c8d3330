"""The Arrow collapse (:mod:`wlcore.collapse`): MusicBrainz's packet chains on change rows
held in memory, as Spark's collapse applies them, and the cases it leaves to Spark."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from wlcore import collapse
from wlcore.collapse import FIRST, OP, POS


def change_rows(tmp_path, rows: list[tuple[int, int | None, str, str]]):
    """Change rows ``(master version, id, v, change type)`` written one file a version, as capture
    lays them out (``.../wlc_version=<v>/part.parquet``), and read back."""
    files = []
    for version in sorted({r[0] for r in rows}):
        part = [r for r in rows if r[0] == version]
        folder = tmp_path / "rows" / "s.t" / f"wlc_version={version}"
        folder.mkdir(parents=True)
        table = pa.table(
            {
                "id": pa.array([r[1] for r in part], pa.int64()),
                "v": [r[2] for r in part],
                "_change_type": [r[3] for r in part],
            }
        )
        pq.write_table(table, folder / "part-0.parquet")
        files.append(str(folder / "part-0.parquet"))
    return collapse.read_rows_arrow(files)


def net(rows) -> dict:
    out = collapse.net_by_key_arrow(rows, ["id"])
    return {r["id"]: (r["v"], r[OP], r[FIRST]) for r in out.to_pylist()}


def test_the_chain_rules(tmp_path):
    rows = change_rows(
        tmp_path,
        [
            (1, 1, "a", "insert"),  # insert + update = insert
            (2, 1, "a", "update_preimage"),
            (2, 1, "b", "update_postimage"),
            (1, 2, "x", "update_preimage"),  # update + delete = delete
            (1, 2, "y", "update_postimage"),
            (3, 2, "y", "delete"),
            (1, 3, "n", "insert"),  # insert + delete = nothing
            (2, 3, "n", "delete"),
            (1, 4, "old", "delete"),  # delete + insert = update
            (3, 4, "new", "insert"),
            (2, 5, "p", "update_preimage"),  # a pre-image and post-image of one version, in any file order
            (2, 5, "q", "update_postimage"),
        ],
    )
    assert net(rows) == {
        1: ("b", True, 1),
        2: ("y", False, 0),
        4: ("new", True, 0),
        5: ("q", True, 0),
    }


def test_the_order_is_the_master_version_then_before_and_after(tmp_path):
    """Within one version a delete comes before an insert, whatever order the file holds them in."""
    rows = change_rows(tmp_path, [(7, 1, "new", "insert"), (7, 1, "old", "delete"), (3, 1, "first", "insert")])
    assert net(rows) == {1: ("new", True, 1)}


def test_what_spark_collapses_instead(tmp_path):
    with pytest.raises(collapse.ArrowUnsupported, match="NULL"):
        net(change_rows(tmp_path / "a", [(1, None, "a", "insert"), (2, None, "a", "delete")]))
    with pytest.raises(collapse.ArrowUnsupported, match="twice"):  # the master held key 1 twice
        net(change_rows(tmp_path / "b", [(1, 1, "a", "delete"), (1, 1, "b", "delete")]))
    with pytest.raises(collapse.ArrowUnsupported, match="wlc_version"):
        collapse.read_rows_arrow([str(tmp_path / "elsewhere.parquet")])


def test_an_unkeyed_table_after_a_segment_keeps_the_copies_it_should(tmp_path):
    """Multiset semantics: deleting one of two identical rows leaves one; NULL equals NULL and NaN
    equals NaN, -0.0 is not 0.0; deleting more copies than the table holds is reported."""
    nan = float("nan")
    table = pa.table({"a": pa.array([1, 1, 2, None, 5, 6], pa.int64()), "x": [0.5, 0.5, nan, None, -0.0, 0.0]})
    rows = pa.table(
        {
            "a": pa.array([1, 2, None, 7, 5, 9], pa.int64()),
            "x": [0.5, nan, None, 1.0, 0.0, 1.0],
            POS: pa.array([0, 0, 0, 1, 1, 0], pa.int8()),
        }
    )
    after, short, changed = collapse.after_images(table, rows)
    got = sorted((r["a"], repr(r["x"])) for r in after.to_pylist())
    assert got == [(1, "0.5"), (5, "-0.0"), (5, "0.0"), (6, "0.0"), (7, "1.0")]
    assert short.to_pylist() == [{"a": 9, "x": 1.0}]
    assert changed == 6


def test_each_row_carries_the_version_of_its_file_and_an_empty_file_adds_none(tmp_path):
    files = []
    for version, ids in ((3, [1, 2]), (5, []), (7, [3]), (12, [4, 5, 6])):
        folder = tmp_path / "rows" / "s.t" / f"wlc_version={version}"
        folder.mkdir(parents=True)
        table = pa.table(
            {"id": pa.array(ids, pa.int64()), "_change_type": pa.array(["insert"] * len(ids), pa.string())}
        )
        pq.write_table(table, folder / "part-0.parquet")
        files.append(str(folder / "part-0.parquet"))
    rows = collapse.read_rows_arrow(files)
    assert rows.column_names == ["id", "_change_type", collapse.VERSION, POS]
    assert list(zip(rows["id"].to_pylist(), rows[collapse.VERSION].to_pylist())) == [
        (1, 3),
        (2, 3),
        (3, 7),
        (4, 12),
        (5, 12),
        (6, 12),
    ]
