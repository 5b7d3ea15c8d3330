"""Monitoring a replica: lag and liveness (how far a replica is behind its master, and whether
capture and a follower are alive), ``wlr status``, and the Prometheus metrics
(:class:`ReplicaMetrics`), which say the same as the status.

Lag counts master commits, not published transactions: a commit capture has not yet
published (the open batch, or a capturer that is down) is not on the replica either. Lag
in transactions is the published transactions after the replica's tick plus the commits
of the master's tables after capture's cursors (the newest batch's, else the snapshot's);
lag in seconds is how old the oldest of those is (now - its commit time), 0 when there is
none (PostgreSQL's ``replay_lag`` is measured the same way: from the commit, not from the
last thing replayed).

Liveness: capture writes ``heartbeat=<UTC instant>`` into ``wlc.config`` at least once a
poll interval while it runs, and a follower writes it into ``wlr.config`` once a beat; a
heartbeat older than :data:`STALE_AFTER` intervals means the process is gone (killed or
hung) since then.

Status for people: what ``wlr status`` prints, the status as aligned lines of text
(:func:`format_replica_status`).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import Counter, Histogram

from wlcore import metrics, snapshots as snap
from wlcore.deltalog import discover_tables, list_versions, read_commit
from wlcore.errors import BatchError, WlcError
from wlcore.health import EXIT_DIVERGED, EXIT_FAILED, EXIT_OK, EXIT_STALE, EXIT_UNREACHABLE, aligned, liveness_line
from wlcore.logstore import LogStore
from wlcore.metrics import Family, Live, Sample, once
from wlcore.promotion import read_start, resume_point
from wlcore.settings import settings
from wlcore.state import (
    MasterState,
    ReplicaState,
    capture_liveness,
    liveness,
    logs_of,
    read_replica_state as read_state_file,
)
from wlcore.storage import Storage
from wlcore.utc import parse_utc

from . import failure
from .book import LOG_FILE
from .errors import DivergedError
from .source import recorded_source

if TYPE_CHECKING:
    import pandas as pd


TICK_LINE = "at transaction"  # wlr.log: the replica's tick after a round of replay


def read_replica_state(storage: Storage, path: str) -> ReplicaState:
    """The ``wlr.config`` of the replica database at ``path``.

    Args:
        storage (Storage): the storage holding the dbfarm.
        path (str): the replica's folder.

    Returns:
        ReplicaState: the replica's state.

    Raises:
        NotFoundError: there is no such database (or dbfarm); the nearest replicas are named.
        ReplicaStateError: ``path`` holds no ``wlr.config``: it is a master (``wlc status`` and
            its replicas are named) or a plain database.
    """
    from wlcore.databases import Dbfarm

    from .errors import ReplicaStateError

    state = read_state_file(storage, path)
    if state is None:
        farm, name = posixpath.split(path.rstrip("/"))
        Dbfarm(farm).require_replica(name, ReplicaStateError)  # says what it is instead
        raise ReplicaStateError(
            f"{path} is not a replica (no wlr.config); check the dbfarm and the name",
            cli=f"{path} is not a replica (no wlr.config); check the dbfarm and the name, "
            "or make it with: wlr replicate <dbfarm> <master> <replica>",
        )
    return state


def _cursors(store: LogStore, mcfg: MasterState) -> dict[str, int]:
    """Capture's position per table: ``{"schema.table": last version examined}`` (a promoted
    master that published nothing of its own yet: its tables at promotion, ``wlc.promotion``)."""
    storage, published = store.storage, store.batches()
    promoted = resume_point(read_start(storage, store.root), published[-1].number if published else None)
    if promoted is not None:
        return {k: c.version for k, c in promoted.tables.items()}
    if published:
        try:
            state = store.manifest(published[-1]).cursors
        except BatchError:
            return {}
        return {k: c.version for k, c in state.tables.items()}
    if mcfg.snapshot:
        return {k: c.version for k, c in snap.read(storage, mcfg.snapshot).tables.items()}
    return {}


def uncaptured(storage: Storage, master_path: str, mcfg: MasterState, master: str) -> tuple[int, datetime | None]:
    """The commits of the master's tables after capture's cursors (those of the newest
    published batch, else of the snapshot).

    Commits that change no data (OPTIMIZE, VACUUM) are not transactions and not counted;
    a table dropped since is one commit of unknown time.

    Args:
        storage (Storage): the storage holding the master.
        master_path (str): the master's folder.
        mcfg (MasterState): the master's ``wlc.config``.
        master (str): the master's name.

    Returns:
        tuple[int, datetime | None]: the number of such commits, and the oldest one's commit
        time (UTC; None when none is known).
    """
    logs = logs_of(mcfg, master_path)
    cursors = _cursors(LogStore(storage, master_path, logs, master), mcfg)
    skip = {os.path.basename(logs.rstrip("/"))}
    tables = discover_tables(storage, master_path, skip)
    count, oldest = 0, None
    for name, path in tables.items():
        for v in list_versions(storage, path):
            if v <= cursors.get(name, -1):
                continue
            commit = read_commit(storage, path, v)
            if commit.data_change or commit.metadata is not None:
                count += 1
                oldest = commit.timestamp if oldest is None else min(oldest, commit.timestamp)
    count += sum(1 for name in cursors if name not in tables)
    return count, oldest


def next_published_time(store: LogStore, first_batch: int, tick: int) -> datetime | None:
    """Commit time of the first published transaction after ``tick``.

    Args:
        store (LogStore): the log folder.
        first_batch (int): the level-0 batch to look from.
        tick (int): the replica's last applied transaction.

    Returns:
        datetime | None: the commit time (UTC); None when none is published or a manifest is damaged.
    """
    for batch in store.batches(first_batch):
        try:
            txns = store.manifest(batch).txns
        except BatchError:
            return None
        for rec in txns:
            if rec.txn > tick:
                return rec.time
    return None


def replica_status(rep, st: ReplicaState, check_history: Callable[[ReplicaState, MasterState], None]) -> dict:
    """:meth:`wlr.Replica.status` of a replica (see there for the keys). Reads state files and
    manifests only, never Spark.

    Args:
        rep (Replica): the replica (its names, source and beat).
        st (ReplicaState): its state as last read (a new replica's: empty).
        check_history (Callable): raises DivergedError when the source's epoch history is not
            the replica's (:meth:`wlr.replay.ReplicaSetup.check_history`).

    Returns:
        dict: ``replica``, ``master``, ``source``, ``state`` (``new``, ``idle``, ``following``,
        ``failed``, ``stale`` for a follower whose heartbeat stopped: killed or hung, or
        ``unreachable`` when the source cannot be read or refuses the replica: ``unreachable``
        says why, ``master_tick`` and ``lag_transactions`` are None, ``lag_seconds`` counts from
        when the source was last read),
        ``tick``/``clock`` (last transaction handled, its UTC commit time), ``master_tick``
        (last published), ``master_write``, ``unpublished`` (master commits capture has not
        published yet), ``lag_transactions`` (master commits not applied: ``master_tick - tick
        + unpublished``), ``lag_seconds`` (now - the oldest of them's commit time, 0 when none;
        None when unknown), ``capture`` (``alive``, ``stale``, ``stopped``, ``not started`` or
        ``unknown``) with ``capture_heartbeat`` (the instant it refers to) and ``capture_text``
        (the line ``wlr status`` prints, :func:`wlcore.health.liveness_line`), ``heartbeat`` (the
        follower's), ``skipped``, ``error``, ``retries`` and ``retry_at`` (a follower's failed
        tries of the stored failure and its next try, a UTC instant; 0 and None when none),
        ``diverged`` (why the source's history is not this replica's, or None), ``source_promise``
        and ``relay_promise`` (what the folder the replica reads, and its relay folder, promised at
        their last prune: :func:`promise_at`; None: the replica relays nothing) and ``exit`` (the
        code ``wlr status`` exits with: 0 healthy, 1 failed, 4 diverged, 5 the follower or
        capture stale, 6 the source unreachable; :mod:`wlcore.health`).
    """
    src = rep.source
    now = datetime.now(timezone.utc)
    tick = st.tick
    mcfg, unreachable = _source_config(rep, src, st)
    mwrite = mcfg.write if mcfg is not None else None
    state: str = st.state if st.has("state") else "new"  # and what status adds: stale, unreachable
    follower, beat_at = liveness(st.heartbeat, rep.beat_seconds, now, settings().replica.stale_after)
    if state == "following" and follower == "stale":
        state = "stale"
    if unreachable is None:
        master_tick, pending, lag_txns, lag_s = _lag(rep, src, st, mcfg, now)
    else:  # nothing tells what the source published: the lag is unknown, at least the time since the
        # source was last read, and growing by the clock
        since = st.source_error_since or st.heartbeat or st.clock
        master_tick, pending, lag_txns = None, 0, None
        lag_s = max(0.0, (now - since).total_seconds()) if since is not None else None
        state = state if state in ("failed", "stale") else "unreachable"
    capture, capture_at = capture_liveness(mcfg, now) if mcfg is not None else ("unknown", None)
    capture_line = liveness_line(capture, capture_at, f"wlc capture {rep.master_dbfarm} {src.capture_name(rep.master)}")
    diverged = None
    if mcfg is not None:
        try:
            check_history(st, mcfg)
        except DivergedError as exc:
            diverged = str(exc)
    error = failure.described(st)
    code = _exit_code(diverged, error, state, capture)
    return {
        "replica": rep.name,
        "master": rep.master,
        "source": src.label,
        "state": state,
        "tick": tick,
        "clock": st.clock,
        "master_tick": master_tick,
        "master_write": mwrite,
        "unpublished": pending,
        "lag_transactions": lag_txns,
        "lag_seconds": lag_s,
        "capture": capture,
        "capture_heartbeat": capture_at,
        "capture_text": capture_line,
        "heartbeat": beat_at,
        "skipped": list(st.skipped),
        "error": error,
        "retries": st.retries if error else 0,
        "retry_at": st.retry_at if error else None,
        "diverged": diverged,
        "unreachable": unreachable,
        **promises(rep, src, st),
        "exit": code,
    }


def _exit_code(diverged: str | None, error, state: str, capture: str) -> int:
    """The code ``wlr status`` exits with (:mod:`wlcore.health`), the gravest first."""
    if diverged:
        return EXIT_DIVERGED
    if error:
        return EXIT_FAILED
    if state == "unreachable":
        return EXIT_UNREACHABLE
    return EXIT_STALE if "stale" in (state, capture) else EXIT_OK


def _lag(
    rep, src, st: ReplicaState, mcfg: MasterState | None, now: datetime
) -> tuple[int | None, int, int | None, float | None]:
    """``(master tick, unpublished, lag in transactions, lag in seconds)`` of :func:`replica_status`
    (the seconds None when unknown)."""
    mtick = mcfg.tick if mcfg is not None else -1
    behind = max(0, mtick - st.tick)
    # commits not captured yet are seen only in the master's own folder
    pending, oldest = (
        uncaptured(src.storage, src.root, mcfg, rep.master) if mcfg is not None and src.is_master else (0, None)
    )
    logs = st.logs or src.logs(mcfg)
    first = (
        next_published_time(LogStore(src.storage, src.root, logs, rep.master), st.batches, st.tick) if behind else None
    )
    times = [t for t in (first, oldest) if t is not None]
    if behind + pending == 0:
        return mtick, pending, 0, 0.0
    return mtick, pending, behind + pending, max(0.0, (now - min(times)).total_seconds()) if times else None


def _source_config(rep, src, st: ReplicaState) -> tuple[MasterState | None, str | None]:
    """The source's ``wlc.config`` and why the source cannot be read or refuses the replica (None:
    it is read): its store out of reach, its ``wlc.config`` missing (what
    :meth:`wlr.source.Source.missing` says), or what the follower's last round found (``source_error``)."""
    try:
        mcfg = src.config()
    except (OSError, WlcError) as exc:
        return None, st.source_error or f"{src.label} cannot be read: {exc}"
    if mcfg is None:
        return None, st.source_error or str(src.missing(rep.master))
    return mcfg, st.source_error or None


def promises(rep, src, st: ReplicaState) -> dict:
    """``source_promise`` and ``relay_promise`` of :func:`replica_status`.

    Args:
        rep (Replica): the replica (its relay folder).
        src (Source): where it reads.
        st (ReplicaState): its state (``relay``: it relays).

    Returns:
        dict: ``{"source_promise": ..., "relay_promise": ...}`` (:func:`promise_at`; the relay's
        None when the replica relays nothing).
    """
    relay = promise_at(Storage.of(rep.relay_path), rep.relay_path) if st.relay else None
    return {"source_promise": promise_at(src.storage, src.root), "relay_promise": relay}


def promise_at(storage: Storage, root: str) -> dict | None:
    """What the log folder ``root`` (a master's, a shipped copy's, a relay's) promised at its last
    prune, from its ``wlc.retention`` (:func:`wlcore.retention.promise_of`).

    Args:
        storage (Storage): the storage holding the folder.
        root (str): the folder.

    Returns:
        dict | None: the promise; ``{}`` when the folder was never pruned (it holds all it
        received); None when its ``wlc.retention`` is malformed or cannot be read.
    """
    from wlcore.errors import ConfigError
    from wlcore.retention import read_retention_state

    try:
        return read_retention_state(storage, root).promise
    except (ConfigError, OSError):
        return None


def shown(value) -> str:
    """A value as status prints it.

    Args:
        value (Any): the value.

    Returns:
        str: ``-`` for None, ISO-8601 for a datetime, else ``str(value)``.
    """
    if value is None:
        return "-"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def format_replica_status(s: dict, dbfarm: str) -> str:
    """Human text of :meth:`wlr.Replica.status`: one aligned line per fact; the master's
    published tick and its commits not yet published are two lines, so that
    ``lag = master tick - tick + unpublished``.

    Args:
        s: the status (:meth:`wlr.Replica.status`).
        dbfarm: the replica's dbfarm as the command line named it (for the fix a failure names).
    """
    err = s["error"]
    rows = [
        ("replica", s["replica"]),
        ("master", s["master"]),
        ("source", s["source"]),
        ("state", s["state"]),
        ("tick", f"{s['tick']} (last applied transaction)"),
        ("clock", shown(s["clock"])),
        ("master tick", f"{shown(s['master_tick'])} (last published transaction)"),
        ("unpublished", f"{s['unpublished']} (master commits capture has not published yet)"),
        ("lag (transactions)", _lag_transactions(s)),
        ("lag (seconds)", _lag_seconds(s)),
        ("capture", s["capture_text"]),
        ("follower heartbeat", shown(s["heartbeat"])),
        ("skipped", ",".join(map(str, s["skipped"])) or "-"),
    ]
    rows.append(
        (
            "error",
            "-"
            if not err
            else f"batch {err.get('batch', '-')} txn {err.get('txn', '-')} table {err.get('table', '-')}: "
            f"{err.get('cause')}; fix it, or skip exactly that transaction with: wlr accept "
            f"{dbfarm} {s['replica']}",
        )
    )
    if err and s.get("retry_at") is not None:  # a follower tries it again by itself
        rows.append(("retry", f"attempt {s['retries']} failed; next at {shown(s['retry_at'])} (replica.retry_max)"))
    if s.get("diverged"):
        rows.append(("diverged", s["diverged"]))
    if s.get("unreachable"):
        rows.append(("source error", s["unreachable"]))
    rows.append(("source promises", promised(s.get("source_promise"))))
    if s.get("relay_promise") is not None:
        rows.append(("relay promises", promised(s["relay_promise"])))
    return aligned(rows)


def _lag_transactions(s: dict) -> str:
    if s["lag_transactions"] is None:
        return "unknown (the source cannot be read)"
    return f"{s['lag_transactions']} (= master tick - tick + unpublished)" if s["lag_transactions"] else "0"


def _lag_seconds(s: dict) -> str:
    if s["lag_seconds"] is None:
        return "-"
    if s["lag_transactions"] is None:
        return f"at least {s['lag_seconds']:.3f} (since the source was last read)"
    return f"{s['lag_seconds']:.3f}"


def promised(promise: dict | None) -> str:
    """What a log folder promises (:func:`promise_at`) as one line of status.

    Args:
        promise (dict | None): the promise; ``{}``: never pruned; None: not readable.

    Returns:
        str: e.g. ``earliest reachable point: transaction 7 (...), the snapshot 7; every
        transaction from transaction 9 (...) on; snapshots at transactions 7``.
    """
    from wlcore.retention import promise_lines

    if promise is None:
        return "- (its wlc.retention cannot be read)"
    if not promise:
        return "all it holds (never pruned)"
    return "; ".join(line.strip() for line in promise_lines(promise))


def lag_history(replica: str, dbfarm: str | None = None) -> pd.DataFrame:
    """Lag over time of replica ``replica``, from its ``wlr.log`` and its master's published logs.

    Args:
        replica: the replica database's name.
        dbfarm: folder holding it; default ``$WLC_DBFARM`` or ``dbfarm`` in config.

    Returns:
        pandas.DataFrame with columns ``time`` (UTC), ``master_tick`` (last master
        transaction committed by then), ``replica_tick`` (last one applied by then) and
        ``lag_seconds`` (the age then of the oldest committed transaction not yet applied,
        0 when none), one row at every master commit and every replica tick, ascending.
        Commits capture had not published at the time are counted once published.

    Raises:
        ReplicaStateError: ``replica`` is not a replica.
    """
    import bisect

    import pandas as pd

    from wlcore.settings import dbfarm as resolve_dbfarm

    farm = resolve_dbfarm(dbfarm)
    storage = Storage.of(farm)
    path = Storage.join(farm, replica)
    st = read_replica_state(storage, path)
    master_path = Storage.join(st.masterfarm or farm, st.master)
    logs = st.logs or logs_of(None, master_path)
    source = recorded_source(st)
    if source is not None:
        store = LogStore(source.storage, source.root, logs, st.master)
    else:
        store = LogStore(storage, master_path, logs, st.master)
    commits = sorted((rec.time, rec.txn) for b in store.batches() for rec in store.manifest(b).txns)
    ticks = []  # (time, replica tick)
    log_path = Storage.join(path, LOG_FILE)
    if storage.exists(log_path):
        for line in storage.read_text(log_path).splitlines():
            stamp, _, text = line.partition(" ")
            if text.startswith(TICK_LINE + " "):
                ticks.append((parse_utc(stamp), int(text.split()[2])))
    times = sorted({t for t, _ in commits} | {t for t, _ in ticks})
    commit_times = [t for t, _ in commits]
    txn_time = {txn: t for t, txn in commits}
    rows, k, rtick = [], 0, -1
    for now in times:
        while k < len(ticks) and ticks[k][0] <= now:
            rtick = max(rtick, ticks[k][1])
            k += 1
        done = bisect.bisect_right(commit_times, now)
        mtick = commits[done - 1][1] if done else -1
        waiting = txn_time.get(rtick + 1)
        lag = (now - waiting).total_seconds() if waiting is not None and waiting <= now else 0.0
        rows.append((now, mtick, rtick, max(0.0, lag)))
    return pd.DataFrame(rows, columns=["time", "master_tick", "replica_tick", "lag_seconds"])


# A replica's Prometheus metrics (:mod:`wlcore.metrics`): where it stands, how fast segments
# land, what it reads and how it fails. Labels ``database`` (the master) and ``replica``.
#
# Counted as they happen:
#
# * ``wlr_segments_applied_total{engine}`` and ``wlr_segment_apply_seconds{engine}`` (histogram):
#   each segment landed (a table's run of transactions as one commit, or one transaction with
#   ``collapse=False``); ``engine`` ``spark``, ``arrow`` (committed by replay itself) or ``delta-rs``;
# * ``wlr_transactions_applied_total``: master transactions those segments carried;
# * ``wlr_change_rows_read_total``, ``wlr_change_rows_applied_total``: change rows read from the
#   batches, and left after collapse (what was merged);
# * ``wlr_failures_total{kind}``: failures stored (``transaction``: one failed to apply;
#   ``logs``: a batch missing, damaged or out of place; ``diverged``: the source's history is
#   not the replica's); ``wlr_retries_total{kind}``: a follower's tries of a stored failure.
#
# Read when Prometheus scrapes (the figures ``wlr status`` prints, :meth:`wlr.Replica.status`):
#
# * ``wlr_tick`` (MonetDB's ``wlr.tick()``), ``wlr_master_tick`` (last published; left out
#   while the source cannot be read);
# * ``wlr_lag_transactions`` (left out while unknown), ``wlr_lag_seconds`` (while the source
#   cannot be read: the seconds since it was last read, growing by the clock);
# * ``wlr_state{state}``: 1 for the replica's state, 0 for the others: ``following``,
#   ``stopped``, ``failed`` (also while a follower retries), ``diverged``, ``unreachable`` (the
#   source cannot be read or refuses the replica: ``wlr_failures_total{kind="source"}`` counts
#   each time it became so);
# * ``wlr_retry_attempts`` and ``wlr_next_retry_timestamp_seconds``: a follower's failed tries of
#   the stored failure and when it tries again (Unix seconds; left out when none waits).


LABELS = ["database", "replica"]


SEGMENT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


STATES = ("following", "stopped", "failed", "diverged", "unreachable")


EVENTS = once(
    lambda: SimpleNamespace(
        segments=Counter("wlr_segments_applied", "Segments replay landed", [*LABELS, "engine"]),
        seconds=Histogram(
            "wlr_segment_apply_seconds",
            "Seconds to land a segment (read, collapse, commit)",
            [*LABELS, "engine"],
            buckets=SEGMENT_BUCKETS,
        ),
        transactions=Counter("wlr_transactions_applied", "Master transactions replay applied", LABELS),
        rows_read=Counter("wlr_change_rows_read", "Change rows replay read from batches", LABELS),
        rows_applied=Counter("wlr_change_rows_applied", "Change rows left after collapse, landed", LABELS),
        failures=Counter("wlr_failures", "Failures replay stored, by kind", [*LABELS, "kind"]),
        retries=Counter("wlr_retries", "A follower's tries of a stored failure, by kind", [*LABELS, "kind"]),
    )
)


_L = tuple(LABELS)


LIVE = Live(
    [
        Family("wlr_tick", "Id of the last transaction handled (MonetDB's wlr.tick(); -1: none)", _L),
        Family("wlr_master_tick", "Id of the last transaction the source published", _L),
        Family("wlr_lag_transactions", "Master commits not applied yet (as wlr status)", _L),
        Family("wlr_lag_seconds", "Age of the oldest master commit not applied yet (as wlr status)", _L),
        Family(
            "wlr_state",
            "1 for the replica's state (following, stopped, failed, diverged, unreachable), else 0",
            (*_L, "state"),
        ),
        Family("wlr_retry_attempts", "A follower's failed tries of the stored failure", _L),
        Family("wlr_next_retry_timestamp_seconds", "When a follower tries the stored failure again", _L),
    ]
)


class Reported(Protocol):
    """What the live metrics of a replica read: a :class:`wlr.Replica`'s status and whether it follows."""

    def status(self) -> dict[str, Any]:
        """The replica's status (:func:`replica_status`)."""
        ...

    def following(self) -> bool:
        """True while the replica's follow thread runs in this process."""
        ...


class ReplicaMetrics:
    """The metrics of one replica, owned by the replica (:class:`wlr.replica.Replica`).

    Args:
        database: the master's name; replica: the replica's name.
    """

    def __init__(self, database: str, replica: str) -> None:
        self.labels = {"database": database, "replica": replica}
        self.reported: Reported | None = None  # the replica whose state is served (None: not served)
        self.port: int | None = None  # the port this process serves /metrics on for it (None: none)

    def serve(self, port: int | str | None, replica: Reported) -> int | None:
        """Report ``replica`` and serve ``/metrics`` (:func:`wlcore.metrics.serve`).

        Args:
            port (int | str | None): the port (0: any free one; None: ``metrics.port``, off by default).
            replica (Reported): the replica whose status is served (a :class:`wlr.Replica`).

        Returns:
            int | None: the port served, also kept in :attr:`port`; None: metrics are off.

        Raises:
            MetricsError: the port is malformed or taken.
        """
        served = metrics.serve(port)
        if served is not None:
            self.port = served
            self.reported = replica
            LIVE.add(self)
        return served

    def stop(self) -> None:
        """Stop reporting this replica's state (its counters stay, as counters do)."""
        LIVE.remove(self)

    def segment(self, engine: str, transactions: int, rows_in: int, rows_out: int, seconds: float) -> None:
        """Count a landed segment.

        Args:
            engine (str): ``spark``, ``arrow`` or ``delta-rs``.
            transactions (int): the master transactions in it.
            rows_in (int): change rows read; rows_out (int): after collapse (-1: not known: ``rows_in``).
            seconds (float): how long it took to land.
        """
        e = EVENTS()
        v = self.labels.values()
        e.segments.labels(*v, engine).inc()
        e.seconds.labels(*v, engine).observe(seconds)
        e.transactions.labels(*v).inc(transactions)
        e.rows_read.labels(*v).inc(rows_in)
        e.rows_applied.labels(*v).inc(rows_out if rows_out >= 0 else rows_in)

    def failed(self, kind: str) -> None:
        """Count a stored failure (``transaction``, ``logs`` or ``diverged``)."""
        EVENTS().failures.labels(*self.labels.values(), kind).inc()

    def retried(self, kind: str) -> None:
        """Count a follower's try of a stored failure (its kind, as :meth:`failed`)."""
        EVENTS().retries.labels(*self.labels.values(), kind).inc()

    def samples(self) -> Iterable[Sample]:
        """The replica's state now (see the module)."""
        if self.reported is None:
            return
        s = self.reported.status()
        db = dict(self.labels)
        yield "wlr_tick", db, s["tick"]
        if s["master_tick"] is not None:
            yield "wlr_master_tick", db, s["master_tick"]
        if s["lag_transactions"] is not None:
            yield "wlr_lag_transactions", db, s["lag_transactions"]
        if s["lag_seconds"] is not None:
            yield "wlr_lag_seconds", db, s["lag_seconds"]
        state = state_of(s, self.reported.following())
        for name in STATES:
            yield "wlr_state", {**db, "state": name}, 1 if name == state else 0
        yield "wlr_retry_attempts", db, s.get("retries") or 0
        if s.get("retry_at") is not None:
            yield "wlr_next_retry_timestamp_seconds", db, s["retry_at"].timestamp()

    def __repr__(self) -> str:
        return f"<replica metrics of {self.labels['replica']!r}>"


def state_of(status: dict[str, Any], following: bool) -> str:
    """The replica's state as ``wlr_state`` names it.

    Args:
        status (dict): :meth:`wlr.Replica.status`.
        following (bool): the follow thread of this process runs.

    Returns:
        str: ``diverged``, ``failed``, ``unreachable`` (the source cannot be read or refuses the
        replica), ``following`` or ``stopped``.
    """
    if status.get("diverged"):
        return "diverged"
    if status.get("error"):
        return "failed"
    if status.get("unreachable"):
        return "unreachable"
    return "following" if following else "stopped"
