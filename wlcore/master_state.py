"""A master's state file, ``<db>/wlc.config``, and what it says about capture.

The file has MonetDB's keys (``snapshot``, ``logs``, ``state`` 1 started / 2 stopped,
``batches`` next batch number, ``beat`` seconds, ``write`` time of the last transaction
recorded) plus ``dbid`` (the database id in every GTID), ``format`` (batch format version),
``tick`` (last transaction id published) and ``watermark`` (every master commit at or before it
is in a published batch), ``epoch`` (this capture session's random id), ``epochs`` (the epoch
history, :mod:`wlcore.epochs`), ``heartbeat`` and ``capture_stopped``. Capture writes it; the
replay side, status and shipping read it.
"""
from __future__ import annotations

from datetime import datetime

from .batch import parse_utc
from .settings import parse_kv, settings
from .storage import Storage

CONFIG_FILE = "wlc.config"
LOCK_FILE = "wlc.lock"  # held (Storage.lock) by the process that captures the database
LOG_FILE = "wlc.log"  # a line per published batch
REPLICA_CONFIG_FILE = "wlr.config"  # a replica's state file: such a database is never a master
STARTED, STOPPED = 1, 2


def logs_of(cfg: dict[str, str], db_path: str) -> str:
    """The log folder of the master at ``db_path`` whose wlc.config is ``cfg``: its ``logs``,
    else ``<db>/wlc_logs``."""
    return cfg.get("logs") or Storage.join(db_path, "wlc_logs")


def read_config(storage: Storage, db_path: str) -> dict[str, str] | None:
    """A database's ``wlc.config`` as a dict, or None when it is not (and never was) a master."""
    path = Storage.join(db_path, CONFIG_FILE)
    if not storage.exists(path):
        return None
    return parse_kv(storage.read_text(path), path)


STALE_AFTER = 3  # heartbeat intervals without a heartbeat: the process is taken for gone (and capture.stale_after)


def liveness(heartbeat: str | None, interval: float, now: datetime,
             stale_after: float = 30.0) -> tuple[str, datetime | None]:
    """``("alive" | "stale" | "unknown", last heartbeat)`` from a state file's ``heartbeat``.

    Args:
        heartbeat: the state file's ``heartbeat`` value (a UTC instant), or None/empty (never written).
        interval: seconds between heartbeats.
        now: the UTC instant to judge at.
        stale_after: seconds (``capture.stale_after`` / ``replica.stale_after``): a heartbeat older
            than this and than :data:`STALE_AFTER` intervals is stale, so a long scan copying
            change rows is not taken for death.
    """
    if not heartbeat:
        return "unknown", None
    last = parse_utc(heartbeat)
    alive = (now - last).total_seconds() <= max(STALE_AFTER * interval, stale_after)
    return ("alive" if alive else "stale"), last


def capture_liveness(cfg: dict[str, str], now: datetime) -> tuple[str, datetime | None]:
    """Capture's liveness from a master's ``wlc.config`` ``cfg`` and the instant it refers to:

    - ``("stopped", when)``: capture was stopped cleanly (Ctrl-C, SIGTERM, ``Master.close()``:
      ``capture_stopped`` in wlc.config, later than the last heartbeat) or the master stopped
      logging (state=2);
    - ``("alive", last heartbeat)`` / ``("stale", last heartbeat)``: the heartbeat is younger /
      older than ``capture.stale_after`` seconds (and 3 poll intervals): a stale capture died
      (killed, crashed, hung) at about that instant;
    - ``("not started", None)``: capture never ran on this master.
    """
    stopped = parse_utc(cfg["capture_stopped"]) if cfg.get("capture_stopped") else None
    beat = parse_utc(cfg["heartbeat"]) if cfg.get("heartbeat") else None
    if int(cfg.get("state", 1)) == STOPPED:
        return "stopped", stopped
    if stopped is not None and (beat is None or beat <= stopped):
        return "stopped", stopped
    cap = settings().capture
    state, last = liveness(cfg.get("heartbeat"), cap.poll_interval, now, cap.stale_after)
    return ("not started" if state == "unknown" else state), last
