"""The storage interface (Litestream's ReplicaClient: one interface, one implementation per
kind of store): the implementation ``Storage.of`` picks, the same behaviour from each, and
locks: a file lock on local folders, a lease by S3's conditional writes on object stores,
a refusal that says so where the store can hold neither (never a lock silently skipped)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import fsspec
import pytest

import wlcore.storage as storage_pkg
from tests.waiting import wait_until
from wlcore.errors import LockHeldError, LockUnsupportedError, WlcError
from wlcore.storage import (
    LocalStorage,
    ObjectStorage,
    RemoteStorage,
    S3Storage,
    Storage,
    copy_file,
    s3 as s3_impl,
    storage_for,
)
from wlcore.storage.s3 import Lease, machine


# ---------------------------------------------------------------- the implementations
def test_of_picks_the_implementation(tmp_path):
    assert isinstance(Storage.of(str(tmp_path)), LocalStorage)
    assert isinstance(storage_for(fsspec.filesystem("memory")), ObjectStorage)
    assert Storage.of(str(tmp_path)).local and not Storage.of(str(tmp_path)).object_store


def test_of_picks_through_the_package_factory(tmp_path, monkeypatch):
    monkeypatch.setattr(storage_pkg, "storage_of", lambda path: RemoteStorage(fsspec.filesystem("memory")))
    assert type(Storage.of(str(tmp_path))) is RemoteStorage
    monkeypatch.undo()
    assert isinstance(Storage.of(str(tmp_path)), LocalStorage)


def test_nothing_in_storage_branches_on_local():
    root = Path(storage_pkg.__file__).parent
    for src in root.glob("*.py"):
        assert not re.search(r"\b(self|src|dst|other|a|b)\.local\b", src.read_text()), src.name


def test_nothing_outside_storage_branches_on_the_kind_of_store():
    """Every difference between stores lives in the implementations: no code outside
    wlcore.storage asks which kind a storage is or reaches its fsspec filesystem."""
    root = Path(storage_pkg.__file__).parent.parent.parent
    for package in ("wlc", "wlr", "wlcore"):
        for src in (root / package).rglob("*.py"):
            if src.parent.name == "storage" and src.parent.parent.name == "wlcore":
                continue
            found = re.search(r"\b(storage|store|src|dst|st)\.(local|object_store|fs)\b", src.read_text())
            assert not found, f"{src.relative_to(root)}: {found.group(0)}"


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_the_same_contract_on_both(kind, tmp_path, request, monkeypatch):
    base = str(tmp_path) if kind == "local" else request.getfixturevalue("s3")
    st = Storage.of(base)
    assert st.listdir(f"{base}/none") == [] and st.subdirs(f"{base}/none") == [] and st.published(f"{base}/none") == []
    assert st.size(f"{base}/none") is None
    with pytest.raises(FileNotFoundError):
        st.read_text(f"{base}/none")
    st.write_atomic(f"{base}/db/state", "a=1\n")
    st.write_atomic(f"{base}/db/state", "a=2\n")
    assert st.read_text(f"{base}/db/state") == "a=2\n" and st.listdir(f"{base}/db") == ["state"]
    assert st.mtime_ms(f"{base}/db/state") > 0
    looked = st.stat(f"{base}/db/state")
    assert looked[:2] == (4, st.mtime_ms(f"{base}/db/state")) and looked.size == 4
    assert (looked.tag is None) if kind == "local" else bool(looked.tag)  # an object's ETag
    with pytest.raises(FileNotFoundError):
        st.stat(f"{base}/none")
    with st.open_read(f"{base}/db/state") as fh:
        assert fh.read(2) == b"a=" and fh.read() == b"2\n"
    with pytest.raises(FileNotFoundError):
        st.open_read(f"{base}/none")
    staging = st.staging_for(f"{base}/logs/b1", "t")
    st.write_atomic(f"{staging}/manifest.json", "{}")
    assert st.published(f"{base}/logs") == []
    st.publish_dir(staging, f"{base}/logs/b1")
    assert st.published(f"{base}/logs") == ["b1"] and st.is_published(f"{base}/logs/b1")
    assert st.walk_files(f"{base}/logs/b1") == ["manifest.json"]
    with pytest.raises(FileExistsError):
        st.publish_dir(f"{base}/logs/b1", f"{base}/logs/b1")
    with pytest.raises(FileExistsError):
        st.rename(f"{base}/db/state", f"{base}/logs/b1")
    st.unpublish(f"{base}/logs/b1")
    assert st.published(f"{base}/logs") == [] and not st.exists(f"{base}/logs/b1/manifest.json")
    assert st.listdir(f"{base}/logs") == []  # nothing left aside
    st.write_atomic(f"{base}/snaps/s1/snapshot.json", "{}")  # written in place, not staged
    st.mark_published(f"{base}/snaps/s1")
    st.mark_published(f"{base}/snaps/s1")  # published already: nothing more
    assert st.published(f"{base}/snaps") == ["s1"] and st.is_published(f"{base}/snaps/s1")
    st.unpublish(f"{base}/logs/b1")  # not there: nothing done
    st.rm(f"{base}/none")  # nothing there: nothing done
    assert st.absolute(f"{base}/db") == f"{base}/db"
    if kind == "local":
        monkeypatch.chdir(tmp_path)
        assert st.absolute("rel/x") == os.path.join(os.getcwd(), "rel", "x") and st.absolute("s3://b/k") == "s3://b/k"
    st.makedirs(f"{base}/empty")
    assert st.isdir(f"{base}/empty") == st.empty_folders == (kind == "local")  # an object store makes no folder


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_dbfarm_is_listed_alike_on_both(kind, tmp_path, request):
    from wlcore.databases import MASTER, MISSING, PLAIN, REPLICA, Dbfarm
    from wlcore.errors import NotFoundError

    base = str(tmp_path / "farm") if kind == "local" else request.getfixturevalue("s3") + "/farm"
    st = Storage.of(base)
    if kind == "local":
        with pytest.raises(NotFoundError, match="no dbfarm"):
            Dbfarm(base)
        st.makedirs(base)
    else:
        assert Dbfarm(base).names() == []  # an empty prefix: a new dbfarm, not refused
    st.write_atomic(f"{base}/m/wlc.config", "state=1\n")
    st.write_atomic(f"{base}/r/wlr.config", "master=m\n")
    st.write_atomic(f"{base}/plain/t/x.parquet", b"x")
    st.write_atomic(f"{base}/.hidden/x", b"x")
    farm = Dbfarm(base)
    assert farm.names() == ["m", "plain", "r"]
    assert [farm.kind(n) for n in ("m", "r", "plain", "nope")] == [MASTER, REPLICA, PLAIN, MISSING]
    assert farm.names(MASTER) == ["m"] and farm.replicas_of("m") == ["r"]
    with pytest.raises(NotFoundError, match="did you mean m"):
        farm.require_master("mm")


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_tree_size_on_both(kind, tmp_path, request):
    base = str(tmp_path) if kind == "local" else request.getfixturevalue("s3")
    st = Storage.of(base)
    assert st.tree_size(f"{base}/none") == 0
    st.write_atomic(f"{base}/t/a.bin", b"x" * 100)
    st.write_atomic(f"{base}/t/sub/.hidden", b"y" * 20)
    st.write_atomic(f"{base}/t/sub/deeper/c", b"z" * 3)
    assert st.tree_size(f"{base}/t") == 123 and st.tree_size(f"{base}/t/sub") == 23
    assert st.tree_size(f"{base}/t/a.bin") == 100


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_append_text_on_both(kind, tmp_path, request):
    base = str(tmp_path) if kind == "local" else request.getfixturevalue("s3")
    st = Storage.of(base)
    st.append_text(f"{base}/db/wlc.log", "one\n")  # made, with its folder
    st.append_text(f"{base}/db/wlc.log", "twö\n")
    assert st.read_text(f"{base}/db/wlc.log") == "one\ntwö\n" and st.listdir(f"{base}/db") == ["wlc.log"]
    threads = [
        threading.Thread(target=lambda i=i: [st.append_text(f"{base}/db/wlc.log", f"{i}.{k}\n") for k in range(5)])
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    lines = st.read_text(f"{base}/db/wlc.log").splitlines()
    assert len(lines) == 22 and sorted(lines[2:]) == sorted(f"{i}.{k}" for i in range(4) for k in range(5))


def test_s3_appends_of_two_writers_lose_no_line(s3, monkeypatch):
    """Another process appends between this one's read and write: the conditional write
    fails, the object is read again, both lines stay."""
    st = Storage.of(s3)
    path = f"{s3}/db/wlr.log"
    st.append_text(path, "a\n")
    real = S3Storage.read_with_etag
    raced = []

    def read_then_race(self, p):
        got = real(self, p)
        if not raced:
            raced.append(1)
            self.fs.pipe_file(p, got[0] + b"other\n")  # the other writer's PUT
        return got

    monkeypatch.setattr(S3Storage, "read_with_etag", read_then_race)
    st.append_text(path, "b\n")
    assert st.read_text(path) == "a\nother\nb\n"


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_watcher_on_both(kind, tmp_path, request):
    """A local folder is watched; an object store sends no events: None, the caller polls."""
    base = str(tmp_path) if kind == "local" else request.getfixturevalue("s3")
    st = Storage.of(base)
    assert st.watcher(f"{base}/none", recursive=False, polling=True, interval=0.05, create=False) is None
    watch = st.watcher(f"{base}/logs", recursive=False, polling=True, interval=0.05, accept=lambda p: p.endswith("/b1"))
    if kind == "s3":
        assert watch is None and not st.exists(f"{base}/logs")
        return
    assert watch is not None and st.isdir(f"{base}/logs")  # made
    try:
        st.write_atomic(f"{base}/logs/other", "x")
        assert not watch.wait(0.3)  # not accepted
        st.makedirs(f"{base}/logs/b1")
        assert watch.wait(10)
    finally:
        watch.close()


def test_local_unpublish_renames_aside_first(tmp_path, monkeypatch):
    st = Storage.of(str(tmp_path))
    (tmp_path / "logs" / "b1").mkdir(parents=True)
    (tmp_path / "logs" / "b1" / "f").write_text("x")
    (tmp_path / "logs" / ".pruned-b1").mkdir()  # an interrupted try's leftover
    seen = []
    real_rm = LocalStorage.rm
    monkeypatch.setattr(
        LocalStorage, "rm", lambda self, p: (seen.append(sorted(st.listdir(str(tmp_path / "logs")))), real_rm(self, p))
    )
    st.unpublish(str(tmp_path / "logs" / "b1"))
    assert seen[-1] == [".pruned-b1"]  # b1 gone at once, its files deleted aside
    assert st.listdir(str(tmp_path / "logs")) == []


def test_copy_file_every_direction(s3, tmp_path):
    local, remote = Storage.of(str(tmp_path)), Storage.of(s3)
    (tmp_path / "a.bin").write_bytes(b"x" * 100)
    assert copy_file(local, str(tmp_path / "a.bin"), local, str(tmp_path / "d" / "b.bin")) == 100
    assert copy_file(local, str(tmp_path / "a.bin"), remote, f"{s3}/a.bin") == 100
    assert copy_file(remote, f"{s3}/a.bin", remote, f"{s3}/b.bin") == 100
    assert copy_file(remote, f"{s3}/b.bin", local, str(tmp_path / "e" / "c.bin")) == 100
    assert (tmp_path / "e" / "c.bin").read_bytes() == b"x" * 100
    with pytest.raises(FileNotFoundError):
        copy_file(local, str(tmp_path / "gone"), remote, f"{s3}/gone")


# ---------------------------------------------------------------- file locks
def test_local_lock_held_released_and_waited_for(tmp_path):
    st = Storage.of(str(tmp_path))
    path = str(tmp_path / "db" / "x.lock")
    held = st.lock(path, blocking=False, what="capture of db")
    assert held.held and Path(path).exists()
    with pytest.raises(LockHeldError, match="capture of db: the lock .*x.lock is held by another process") as err:
        st.lock(path, blocking=False, what="capture of db")
    assert isinstance(err.value, WlcError) and err.value.path == path
    started = time.monotonic()
    with pytest.raises(LockHeldError):
        st.lock(path, blocking=True, timeout=0.2, what="capture of db")
    assert time.monotonic() - started >= 0.2
    got = []
    waiter = threading.Thread(target=lambda: got.append(st.lock(path, blocking=True, what="w")))
    waiter.start()
    held.release()
    held.release()  # twice: harmless
    waiter.join(10)
    assert got and got[0].held
    got[0].release()
    with st.lock(path, blocking=False, what="again"):
        pass
    assert Path(path).exists() and Path(path).read_bytes() == b""  # left in place, nothing written


def test_remote_and_generic_object_stores_refuse_locks():
    mem = fsspec.filesystem("memory")
    for st in (RemoteStorage(mem), ObjectStorage(mem)):
        with pytest.raises(LockUnsupportedError, match="not done unlocked"):
            st.lock("memory://x/wlc.lock", blocking=False, what="capture of x")
    assert not mem.exists("memory://x/wlc.lock")


# ---------------------------------------------------------------- leases on S3
def test_lease_taken_refused_and_released(s3):
    st = Storage.of(s3)
    assert isinstance(st, S3Storage)
    path = f"{s3}/db/wlc.lock"
    held = st.lock(path, blocking=False, what="capture of db")
    record = json.loads(st.read_text(path))
    assert record["what"] == "capture of db" and record["expires"] > time.time()
    with pytest.raises(LockHeldError, match=r"held by capture of db on .*, process \d+, lease until") as err:
        st.lock(path, blocking=False, what="capture of db")
    assert err.value.holder
    with pytest.raises(LockHeldError):
        st.lock(path, blocking=True, timeout=0.3, what="capture of db")
    held.release()
    assert not st.exists(path)
    assert not [n for n in st.listdir(f"{s3}/db") if "probe" in n]  # the probe of conditional writes went
    with st.lock(path, blocking=False, what="again") as again:
        assert again.held
    assert not st.exists(path)


def test_lease_waited_for(s3):
    st = Storage.of(s3)
    path = f"{s3}/db/wlc.lifecycle.lock"
    held = st.lock(path, blocking=False, what="one")
    got = []
    waiter = threading.Thread(target=lambda: got.append(st.lock(path, blocking=True, timeout=30, what="two")))
    waiter.start()
    held.release()
    waiter.join(30)
    assert got and json.loads(st.read_text(path))["what"] == "two"
    got[0].release()


def test_an_expired_lease_is_taken_over(s3):
    st = Storage.of(s3)
    path = f"{s3}/db/wlc.lock"
    st.fs.pipe_file(
        path, json.dumps({"holder": "dead", "host": "h", "pid": 1, "what": "old", "expires": time.time() - 1}).encode()
    )
    with st.lock(path, blocking=False, what="new"):
        assert json.loads(st.read_text(path))["what"] == "new"


def test_the_lease_of_a_dead_process_of_this_machine_is_taken_over_at_once(s3):
    """As the OS lets go of a file lock when its process ends: a killed holder on this machine
    does not keep others waiting for its lease to expire; one on another machine does."""
    st = Storage.of(s3)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)
    path = f"{s3}/db/wlc.lock"
    other = {
        "holder": "x",
        "host": "elsewhere",
        "machine": "elsewhere/boot/ns",
        "pid": pid,
        "what": "old",
        "expires": time.time() + 600,
    }
    st.fs.pipe_file(path, json.dumps(other).encode())
    with pytest.raises(LockHeldError, match="old on elsewhere"):
        st.lock(path, blocking=False, what="new")
    st.fs.pipe_file(path, json.dumps(dict(other, machine=machine())).encode())
    with st.lock(path, blocking=False, what="new"):
        assert json.loads(st.read_text(path))["what"] == "new"


def test_a_lease_is_renewed_while_held(s3):
    st = Storage.of(s3)
    path = f"{s3}/db/renewed.lock"
    lease = Lease(st, path, "renewed", seconds=0.3)
    held = lease.acquire(blocking=False, timeout=None)
    first = json.loads(st.fs.cat_file(path))["expires"]  # one GET: the object is replaced meanwhile
    wait_until(lambda: json.loads(st.fs.cat_file(path))["expires"] > first, 10, "the lease renewed", interval=0.02)
    with pytest.raises(LockHeldError):  # renewed: never expired for another taker
        st.lock(path, blocking=False, what="other")
    held.release()
    assert not st.exists(path)


def test_a_store_ignoring_conditional_writes_is_refused(s3, monkeypatch):
    st = Storage.of(s3)
    monkeypatch.setattr(s3_impl, "_honours", {})
    monkeypatch.setattr(S3Storage, "put_if_absent", lambda self, path, data: self.fs.pipe_file(path, data)["ETag"])
    with pytest.raises(LockUnsupportedError, match="does not honour conditional writes"):
        st.lock(f"{s3}/db/wlc.lock", blocking=False, what="capture of db")
    assert st.listdir(f"{s3}/db") == []


def test_the_replica_lock_refuses_a_second_replayer_and_its_probe_changes_nothing(tmp_path):
    from wlr.book import ReplicaLock
    from wlr.errors import ReplicaStateError

    def Setup(path):  # the replica's lock, without a replica around it
        return ReplicaLock(Storage.of(path), path)

    db = str(tmp_path / "r")
    Setup(db).probe()  # no wlr.lock: nothing made
    assert not (tmp_path / "r").exists()
    first = Setup(db)
    first.acquire()
    stamp = (tmp_path / "r" / "wlr.lock").stat().st_mtime_ns
    with pytest.raises(ReplicaStateError, match="another process is replaying into .*; stop it first"):
        Setup(db).probe()
    with pytest.raises(ReplicaStateError, match="another process is replaying into"):
        Setup(db).acquire()
    first.release()
    Setup(db).probe()
    assert (tmp_path / "r" / "wlr.lock").stat().st_mtime_ns == stamp


def test_a_small_object_in_a_bucket_is_read_with_one_request(s3):
    """A commit, manifest or state file is read with one GET, not a HEAD for its size first
    (s3fs's cat_file does that to split big objects); a missing one is FileNotFoundError."""
    st = Storage.of(s3)
    st.write_atomic(f"{s3}/t/_delta_log/00000000000000000000.json", '{"commitInfo": {}}')
    calls: list[str] = []
    st.fs.connect()

    def count(event_name, **_):
        calls.append(event_name.split(".")[-1])

    st.fs.s3.meta.events.register("before-call.s3", count)
    try:
        assert st.read_text(f"{s3}/t/_delta_log/00000000000000000000.json") == '{"commitInfo": {}}'
        assert calls == ["GetObject"]
        with pytest.raises(FileNotFoundError):
            st.read_bytes(f"{s3}/t/_delta_log/_last_checkpoint")
    finally:
        st.fs.s3.meta.events.unregister("before-call.s3", count)
