"""Helpers for fault tests: subprocesses (killed or crashing at named points), file trees,
published transactions and the replay tags in a replica table's Delta log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env_with(**extra: str) -> dict:
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_python(code: str, timeout: float = 300, **env_extra: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a new Python process (its own Spark if it needs one)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env_with(**env_extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_module(*args: str, timeout: float = 300, **env_extra: str) -> subprocess.CompletedProcess:
    """``python -m <args>`` in a new process."""
    return subprocess.run(
        [sys.executable, "-m", *args], env=env_with(**env_extra), capture_output=True, text=True, timeout=timeout
    )


def start_module(*args: str) -> subprocess.Popen:
    """A process running ``python -m <args>`` (``wlc capture``, a promotion that captures), its
    output on a pipe; :func:`stop` ends it."""
    cmd = [sys.executable, "-m", *args]
    return subprocess.Popen(cmd, env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop(proc: subprocess.Popen) -> str:
    """SIGTERM ``proc`` (unless it ended) and return its output."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    return out


def master_state(farm: str, db: str, proc: subprocess.Popen | None = None):
    """Master ``db``'s ``wlc.config`` (None: none yet), checking first that its capture ``proc`` runs."""
    from wlcore.state import read_master_state
    from wlcore.storage import Storage

    if proc is not None and proc.poll() is not None:
        raise AssertionError(f"capture of {db} ended: {proc.stdout.read()[-3000:]}")
    return read_master_state(Storage.of(farm), os.path.join(farm, db))


def killed_by_sigkill(proc: subprocess.CompletedProcess) -> bool:
    return proc.returncode == -signal.SIGKILL


def tree(path: str, ignore: tuple[str, ...] = ()) -> dict[str, tuple]:
    """Every file (with size and modification time, ns) and folder below ``path``: a fingerprint
    to prove that a refused call changed nothing. Empty when ``path`` does not exist.

    ``ignore``: relative paths (and what is below them) that a running master or follower
    rewrites on its own (``m/wlc.config`` holds the moving watermark); hidden temporary
    files of atomic writes are left out too.
    """
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            if name.endswith(".tmp") or any(rel == i or rel.startswith(i + os.sep) for i in ignore):
                continue
            try:
                st = os.stat(full)
            except FileNotFoundError:  # renamed away while we looked
                continue
            # a folder by its entries (its own mtime moves with every temporary file in it)
            out[rel] = (True, st.st_size, st.st_mtime_ns) if name in files else (False,)
    return out


def published(logs: str, dbname: str):
    """Every published transaction record, in batch order."""
    from wlcore.logstore import LogStore
    from wlcore.storage import Storage

    store = LogStore(Storage.of(logs), os.path.dirname(logs), logs, dbname)
    return [t for b in store.batches() for t in store.manifest(b).txns]


def replay_tags(table_path: str, dbid: str) -> list[tuple[int, bool]]:
    """``(txn, final)`` of every replay commit in a replica table's log, in version order."""
    from wlcore.deltalog import list_versions, read_commit
    from wlcore.storage import Storage
    from wlr.apply import parse_tag

    storage = Storage.of(table_path)
    out = []
    for v in list_versions(storage, table_path):
        found = parse_tag(read_commit(storage, table_path, v).user_metadata, dbid)
        if found:
            out.append(found)
    return out


def final_txns(table_path: str, dbid: str) -> list[int]:
    """Transaction ids of the final replay commits, one per applied transaction when all is well."""
    return [t for t, final in replay_tags(table_path, dbid) if final]


def final_spans(table_path: str, dbid: str) -> list[tuple[int, int]]:
    """``(first, last)`` transactions of every final replay commit (a segment, or one transaction)."""
    from wlcore.deltalog import list_versions, read_commit
    from wlcore.storage import Storage
    from wlr.apply import parse_span

    storage = Storage.of(table_path)
    out = []
    for v in list_versions(storage, table_path):
        found = parse_span(read_commit(storage, table_path, v).user_metadata, dbid)
        if found and found[2]:
            out.append(found[:2])
    return out


def assert_applied_once(table_path: str, dbid: str, txns: list[int]) -> None:
    """Every transaction in ``txns`` is inside exactly one final replay commit of the table, in order."""
    spans = final_spans(table_path, dbid)
    covered = [t for t in txns if any(a <= t <= b for a, b in spans)]
    assert covered == txns, ("not every transaction was applied", txns, spans)  # nothing lost
    assert all(b < a2 for (_, b), (a2, _) in zip(spans, spans[1:])), ("applied twice", spans)  # nothing twice
