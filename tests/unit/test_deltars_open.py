"""Replica tables kept open by delta-rs between segments (real delta-rs tables, no Spark)."""

import shutil

import pyarrow as pa
from deltalake import write_deltalake

from wlr.apply import OpenTables


def rows(*ids):
    return pa.table({"id": pa.array(ids, pa.int64())})


def ids(dt):
    return sorted(dt.to_pyarrow_table()["id"].to_pylist())


def test_a_kept_table_reads_commits_made_since_by_another_writer(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(1))
    tables = OpenTables()
    dt = tables.take(path)
    tables.keep(path, dt)
    write_deltalake(path, rows(2), mode="append")  # Spark landing a segment, say
    again = tables.take(path)
    assert again is dt and again.version() == 1 and ids(again) == [1, 2]


def test_a_table_made_again_with_the_same_versions_is_opened_afresh(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(1))
    write_deltalake(path, rows(2), mode="append")
    tables = OpenTables()
    dt = tables.take(path)
    tables.keep(path, dt)
    shutil.rmtree(path)  # dropped and made again: its log begins anew, up to the same version
    write_deltalake(path, rows(7))
    write_deltalake(path, rows(8), mode="append")
    again = tables.take(path)
    assert again is not dt and ids(again) == [7, 8]


def test_a_table_taken_and_not_given_back_is_opened_again(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(1))
    tables = OpenTables()
    first = tables.take(path)
    assert tables.take(path) is not first  # the segment that took it failed: never handed out twice
    assert tables.take(str(tmp_path / "missing")) is None
