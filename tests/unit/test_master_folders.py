"""A master's folders: ``wlc master`` refuses a log folder it cannot write (leaving nothing made),
says when it made one, and ``wlc.config`` keeps the paths inside the database folder relative, so
a master folder moved or copied elsewhere still finds its logs; a file of absolute paths moved
with its folder is named as stale, with the fix. No Spark: the masters here hold no table."""

import os
import shutil

import pytest

from wlc.cli import main as wlc_main
from wlcore.errors import NotWritableError, StalePathError
from wlcore.state import read_master_state, write_master_state
from wlcore.storage import Storage
from wlr.cli import main as wlr_main

from ..fault.helpers import tree


def _config(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in open(os.path.join(path, "wlc.config")).read().splitlines())


def _absolute_paths(db: str) -> None:
    """Rewrite ``db``'s wlc.config as an earlier version wrote it: its log folder an absolute path."""
    with open(os.path.join(db, "wlc.config")) as fh:
        text = fh.read().replace("logs=wlc_logs\n", f"logs={os.path.join(db, 'wlc_logs')}\n")
    with open(os.path.join(db, "wlc.config"), "w") as fh:
        fh.write(text)


def test_a_log_folder_under_a_file_is_refused_and_nothing_is_made(tmp_path, capsys):
    farm = tmp_path / "farm"
    farm.mkdir()
    (tmp_path / "afile").write_text("")
    before = tree(str(tmp_path))
    logs = str(tmp_path / "afile" / "logs" / "deep")
    assert wlc_main(["master", str(farm), "dw", "--logs", logs]) == 2
    err = capsys.readouterr().err
    assert f"error: the log folder {logs} cannot be made: {tmp_path / 'afile'} is a file, not a folder" in err
    assert "give --logs a folder you can write" in err and "logs=" not in err
    assert tree(str(tmp_path)) == before  # no database folder, no lock, no log folder


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder: the next test denies by os.access")
def test_a_read_only_log_folder_is_refused_and_nothing_is_made(tmp_path, capsys):
    farm, ro = tmp_path / "farm", tmp_path / "ro"
    farm.mkdir()
    ro.mkdir()
    ro.chmod(0o555)
    try:
        before = tree(str(tmp_path))
        assert wlc_main(["master", str(farm), "dw", "--logs", str(ro / "logs")]) == 2
        err = capsys.readouterr().err
        assert f"the log folder {ro / 'logs'} cannot be made: {ro}, the nearest folder above it, is read-only" in err
        assert tree(str(tmp_path)) == before
    finally:
        ro.chmod(0o755)


def test_master_create_refuses_a_folder_this_process_may_not_write(tmp_path, monkeypatch):
    """The check asks the system (``os.access``, as for this process's user): a folder it denies
    is refused from Python too, before anything is made, with the fix as a Python argument."""
    from wlc.master import Master

    farm, logs = tmp_path / "farm", tmp_path / "logs"
    farm.mkdir()
    logs.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(logs) else real(p, mode, **kw))
    before = tree(str(tmp_path))
    with pytest.raises(NotWritableError) as caught:
        Master("dw", dbfarm=str(farm), logs=str(logs), capture=False).create()
    assert str(caught.value).startswith(f"the log folder {logs} is read-only for this user")
    assert "pass logs= a folder you can write" in str(caught.value)
    assert tree(str(tmp_path)) == before
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(farm) else real(p, mode, **kw))
    with pytest.raises(NotWritableError, match=f"the database folder {farm / 'dw'} cannot be made: {farm}, the"):
        Master("dw", dbfarm=str(farm), capture=False).create()
    assert tree(str(tmp_path)) == before


def test_wlc_master_says_it_made_the_log_folder(tmp_path, capsys):
    farm = tmp_path / "farm"
    farm.mkdir()
    logs = str(tmp_path / "no" / "such" / "deep")
    assert wlc_main(["master", str(farm), "dw", "--logs", logs]) == 0
    out = capsys.readouterr().out
    assert f"made the log folder {logs}; " in out.splitlines()[0] and os.path.isdir(logs)
    assert _config(farm / "dw")["logs"] == logs  # outside the database folder: absolute
    assert wlc_main(["master", str(farm), "dw2"]) == 0
    assert "made the log folder" not in capsys.readouterr().out  # <db>/wlc_logs goes without saying


def test_paths_inside_the_database_folder_are_kept_relative(tmp_path):
    farm = tmp_path / "farm"
    farm.mkdir()
    assert wlc_main(["master", str(farm), "dw"]) == 0
    db = str(farm / "dw")
    assert _config(db)["logs"] == "wlc_logs"
    st = Storage.of(db)
    cfg = read_master_state(st, db)
    assert cfg.logs == os.path.join(db, "wlc_logs")  # read back against where the folder is
    cfg.snapshot = os.path.join(db, "wlc_snapshot", "7")
    write_master_state(st, db, cfg)
    assert (_config(db)["logs"], _config(db)["snapshot"]) == ("wlc_logs", "wlc_snapshot/7")
    _absolute_paths(db)  # an earlier version's file is still read
    assert read_master_state(st, db).logs == os.path.join(db, "wlc_logs")


def test_a_moved_or_copied_master_folder_keeps_its_logs(tmp_path, capsys):
    farm = tmp_path / "farm"
    farm.mkdir()
    assert wlc_main(["master", str(farm), "dw"]) == 0
    moved = tmp_path / "elsewhere"
    shutil.move(str(farm), str(moved))
    cfg = read_master_state(Storage.of(str(moved)), str(moved / "dw"))
    assert cfg.logs == str(moved / "dw" / "wlc_logs")
    capsys.readouterr()
    assert wlc_main(["status", str(moved), "dw"]) == 0
    assert "STALE" not in capsys.readouterr().out


def test_a_moved_folder_with_absolute_paths_is_named_with_the_fix(tmp_path, capsys):
    """A master folder moved with an earlier version's wlc.config (absolute paths): capture,
    replication and status name the stale path and the line to write, not a missing start."""
    farm = tmp_path / "farm"
    farm.mkdir()
    assert wlc_main(["master", str(farm), "dw"]) == 0
    _absolute_paths(str(farm / "dw"))
    moved = tmp_path / "moved"
    shutil.move(str(farm), str(moved))
    stale, config = str(farm / "dw" / "wlc_logs"), moved / "dw" / "wlc.config"
    capsys.readouterr()
    before = tree(str(tmp_path))
    assert wlc_main(["capture", str(moved), "dw"]) == 2
    err = capsys.readouterr().err
    assert f"error: {config} names logs={stale}, which no longer exists: the database folder was moved here" in err
    assert f"Edit {config} to say logs=wlc_logs" in err
    assert wlr_main(["replicate", str(moved), "dw", "r"]) == 2
    err = capsys.readouterr().err
    assert f"names logs={stale}, which no longer exists" in err and "no reachable starting point" not in err
    assert tree(str(tmp_path)) == before  # no replica folder, no change to the master
    assert wlc_main(["status", str(moved), "dw"]) == 0
    assert f"STALE PATHS {config} names logs={stale}" in capsys.readouterr().out
    with pytest.raises(StalePathError):
        from wlc.master import Master

        Master("dw", dbfarm=str(moved), capture=False).validate()
    # the fix the message gives works
    config.write_text(config.read_text().replace(f"logs={stale}\n", "logs=wlc_logs\n"))
    assert wlc_main(["status", str(moved), "dw"]) == 0
    assert "STALE" not in capsys.readouterr().out


def test_a_copied_folder_with_absolute_paths_is_refused(tmp_path, capsys):
    """A copy whose wlc.config names the original's log folder: capture would publish into the
    original's logs, so it is refused, naming the original."""
    farm = tmp_path / "farm"
    farm.mkdir()
    assert wlc_main(["master", str(farm), "dw"]) == 0
    _absolute_paths(str(farm / "dw"))
    copy = tmp_path / "copy"
    shutil.copytree(farm, copy)
    capsys.readouterr()
    assert wlc_main(["capture", str(copy), "dw"]) == 2
    err = capsys.readouterr().err
    assert f"names logs={farm / 'dw' / 'wlc_logs'}, the folder of another copy of this database" in err
    assert f"copied here from {farm / 'dw'}" in err


def test_a_replica_keeps_the_paths_of_a_master_in_its_dbfarm_relative(tmp_path):
    """wlr.config names the master's dbfarm, folder and logs relative to the replica's folder when
    they are in the replica's dbfarm: the whole dbfarm moved, the replica still finds its master."""
    from wlcore.state import ReplicaState, read_replica_state, write_replica_state

    farm = tmp_path / "farm"
    (farm / "r").mkdir(parents=True)
    st = Storage.of(str(farm))
    write_replica_state(
        st,
        str(farm / "r"),
        ReplicaState.of(
            master="m",
            masterfarm=str(farm),
            source=str(farm / "m"),
            logs=str(farm / "m" / "wlc_logs"),
            tick=3,
        ),
    )
    text = (farm / "r" / "wlr.config").read_text()
    assert "masterfarm=..\nsource=../m\nlogs=../m/wlc_logs\n" in text
    moved = tmp_path / "moved"
    shutil.move(str(farm), str(moved))
    state = read_replica_state(st, str(moved / "r"))
    assert (state.masterfarm, state.source, state.logs) == (str(moved), str(moved / "m"), str(moved / "m/wlc_logs"))
    (moved / "r" / "wlr.config").write_text("master=m\nmasterfarm=/elsewhere\nlogs=/elsewhere/m/wlc_logs\n")
    state = read_replica_state(st, str(moved / "r"))  # an earlier version's file, or a master elsewhere
    assert (state.masterfarm, state.logs) == ("/elsewhere", "/elsewhere/m/wlc_logs")
