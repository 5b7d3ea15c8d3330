"""Storage on an object store (the test's own S3-compatible server): published folders
appear only with their commit marker; writes replace whole objects; copies between filesystems."""

from __future__ import annotations

from wlcore.storage import MARKER, Storage, copy_file, copy_tree


def test_object_store_folders_are_published_by_their_marker(s3):
    st = Storage.of(s3)
    assert st.object_store and st.s3 and not st.local
    logs = f"{s3}/logs"
    st.fs.pipe_file(f"{logs}/m_000000000000/manifest.json", b"{}")
    assert st.published(logs) == []  # a folder without its marker is not there for readers
    assert not st.is_published(f"{logs}/m_000000000000")
    st.publish_dir(f"{logs}/m_000000000000", f"{logs}/m_000000000000")
    assert st.published(logs) == ["m_000000000000"]
    assert st.exists(f"{logs}/m_000000000000{MARKER}")
    try:
        st.publish_dir(f"{logs}/m_000000000000", f"{logs}/m_000000000000")
        raise AssertionError("a published folder was published again")
    except FileExistsError:
        pass
    st.unpublish(f"{logs}/m_000000000000")
    assert st.published(logs) == [] and not st.exists(f"{logs}/m_000000000000/manifest.json")


def test_the_folder_markers_hadoop_writes_are_no_files(s3):
    """s3a writes an empty ``<folder>/`` object for a folder it makes (a Spark-written snapshot
    table's): it is not listed as a file of the folder, and a folder holding one is published
    by a move (S3 has no ``<folder>`` key to copy)."""
    st = Storage.of(s3)
    bucket, prefix = s3[len("s3://") :], "snapshots/.staging-1"
    st.fs.call_s3("put_object", Bucket=bucket, Key=f"{prefix}/t/_delta_log/", Body=b"")
    st.fs.pipe_file(f"{s3}/{prefix}/t/_delta_log/00000000000000000000.json", b"{}")
    st.fs.invalidate_cache()
    assert list(st.walk_files(f"{s3}/{prefix}")) == ["t/_delta_log/00000000000000000000.json"]
    st.publish_dir(f"{s3}/{prefix}", f"{s3}/snapshots/1")
    assert st.published(f"{s3}/snapshots") == ["1"]
    assert st.read_bytes(f"{s3}/snapshots/1/t/_delta_log/00000000000000000000.json") == b"{}"
    assert not st.exists(f"{s3}/{prefix}/t/_delta_log/00000000000000000000.json")


def test_a_folder_is_listed_after_a_name_and_found_by_one_key(s3):
    """``listdir_after`` on S3 lists only what sorts after a name (StartAfter), folders too, as
    the whole listing filtered would; ``isdir`` asks for one key."""
    st = Storage.of(s3)
    log = f"{s3}/t/_delta_log"
    for v in range(5):
        st.fs.pipe_file(f"{log}/{v:020d}.json", b"{}")
    st.fs.pipe_file(f"{log}/{3:020d}.crc", b"{}")
    st.fs.pipe_file(f"{log}/_sidecars/a.parquet", b"")
    assert st.listdir_after(log, f"{2:020d}.json") == [f"{3:020d}.crc", f"{3:020d}.json", f"{4:020d}.json", "_sidecars"]
    assert st.listdir_after(log, "_sidecars") == [] and st.listdir_after(f"{s3}/none", "a") == []
    assert [n for n in st.listdir(log) if n > f"{2:020d}.json"] == st.listdir_after(log, f"{2:020d}.json")
    assert st.isdir(log) and st.isdir(f"{s3}/t") and st.isdir(s3)
    assert (
        not st.isdir(f"{log}/{0:020d}.json") and not st.isdir(f"{s3}/none") and not st.isdir("s3://no-such-bucket-x/a")
    )


def test_write_atomic_and_uris_on_s3(s3):
    st = Storage.of(s3)
    st.write_atomic(f"{s3}/db/wlc.config", "a=1\n")
    st.write_atomic(f"{s3}/db/wlc.config", "a=2\n")
    assert st.read_text(f"{s3}/db/wlc.config") == "a=2\n"
    assert st.listdir(f"{s3}/db") == ["wlc.config"]  # no temporary object left beside it
    assert st.uri(f"{s3}/db/x") == "s3a://" + s3[len("s3://") :] + "/db/x"
    assert st.uri(s3[len("s3://") :] + "/db/x") == "s3a://" + s3[len("s3://") :] + "/db/x"


def test_copies_between_local_folders_and_s3(s3, tmp_path):
    local = Storage.of(str(tmp_path))
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "f.parquet").write_bytes(b"x" * 5000)
    (src / "top.json").write_text("{}")
    st = Storage.of(s3)
    assert copy_tree(local, str(src), st, f"{s3}/copy") == 5002
    assert st.walk_files(f"{s3}/copy") == ["a/b/f.parquet", "top.json"]
    back = tmp_path / "back"
    assert copy_tree(st, f"{s3}/copy", local, str(back)) == 5002
    assert (back / "a" / "b" / "f.parquet").read_bytes() == b"x" * 5000
    assert copy_file(st, f"{s3}/copy/top.json", st, f"{s3}/other.json") == 2
    assert st.size(f"{s3}/missing") is None


def test_a_file_replaced_by_another_process_is_read_whole(s3, s3_server, monkeypatch):
    # A shipper in another process rewrites wlc.config between the two requests an fsspec open
    # makes (its HEAD, then a GET conditional on the ETag it saw): the read gives one version
    # whole, not FileExpired.
    import boto3

    st = Storage.of(s3)
    st.write_atomic(f"{s3}/db/wlc.config", "beat=1\n")
    other = boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    info = st.fs.info

    def info_then_a_writer(path, **kw):
        seen = info(path, **kw)
        other.put_object(Bucket=s3[len("s3://") :], Key="db/wlc.config", Body=b"beat=22\n")
        return seen

    monkeypatch.setattr(st.fs, "info", info_then_a_writer)
    assert st.read_text(f"{s3}/db/wlc.config") in ("beat=1\n", "beat=22\n")  # one whole version
