"""The database folder's watcher: what wakes it, and which folders hold an OS watch."""

import os

import pytest

from tests.waiting import wait_until
from wlcore.watch import FolderWatch


def _until(watch: FolderWatch, folder: str, watched: bool = True) -> None:
    """Wait (draining the watcher's wake-ups) until ``folder`` holds an OS watch, or none."""
    wait_until(
        lambda: (watch.wait(0.1) or True) and (folder in watch._watched) == watched,
        10,
        f"{folder} to be {'watched' if watched else 'unwatched'}",
        interval=0,
    )


def _write(path: str, text: str = "x") -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


@pytest.mark.parametrize("polling", [False, True], ids=["events", "polling"])
def test_skipped_folders_are_not_watched_and_reads_never_wake(tmp_path, polling):
    db = str(tmp_path / "db")
    _write(os.path.join(db, "s", "t", "_delta_log", "0.json"))
    _write(os.path.join(db, "wlc_logs", "b0", "manifest.json"))
    watch = FolderWatch(db, recursive=True, polling=polling, interval=0.05, skip=("wlc_logs", "wlc_snapshot"))
    try:
        assert set(watch._watched) == {os.path.join(db, "s")}  # the batches' folder holds no watch
        _write(os.path.join(db, "wlc_logs", "b1", "manifest.json"))
        assert not watch.wait(0.5)  # a batch written: not a change of the master's tables
        with open(os.path.join(db, "s", "t", "_delta_log", "0.json")) as fh:
            fh.read()
        assert not watch.wait(0.5)  # a read is no change (inotify is not even asked for reads)
        _write(os.path.join(db, "s", "t", "_delta_log", "1.json"))
        assert watch.wait(10)
        _write(os.path.join(db, "s2", "u", "_delta_log", "0.json"))  # a schema made after the start
        assert watch.wait(10)
        _until(watch, os.path.join(db, "s2"))
        watch.wait(0.5)
        _write(os.path.join(db, "s2", "u", "_delta_log", "1.json"))
        assert watch.wait(10)
    finally:
        watch.close()


def test_a_schema_folder_removed_and_made_again_is_watched_again(tmp_path):
    import shutil

    db = str(tmp_path / "db")
    schema = os.path.join(db, "s")
    _write(os.path.join(schema, "t", "_delta_log", "0.json"))
    watch = FolderWatch(db, recursive=True, interval=0.05, skip=("wlc_logs",))
    try:
        shutil.rmtree(schema)
        assert watch.wait(10)
        _until(watch, schema, watched=False)
        _write(os.path.join(schema, "t", "_delta_log", "0.json"))
        _until(watch, schema)
        watch.wait(0.5)
        _write(os.path.join(schema, "t", "_delta_log", "1.json"))
        assert watch.wait(10)
    finally:
        watch.close()
