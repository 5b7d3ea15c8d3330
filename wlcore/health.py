"""A master's status (``wlc status``, :func:`wlc.status`) and the exit codes both status commands share.

Status reads state files only (``wlc.config``), never Spark, so a health check or a cron job
can run it every minute. The exit codes follow the monitoring-plugin habit of a distinct
code per condition, documented with the commands:

==== ===============================================================================
0    healthy (capture alive, cleanly stopped, or not started yet; a replica applying)
1    the replica stopped at a failed transaction (``wlr accept`` skips it)
2    bad input or a refused call
3    not found: no such dbfarm, database or table
4    the replica diverged from its source (a restored master wrote other transactions)
5    stale: capture, or a replica's follower, stopped sending heartbeats without a clean stop
6    the replica's source cannot be read or refuses it (gone, moved, fenced by a promotion)
==== ===============================================================================
"""

from __future__ import annotations

import posixpath
from datetime import datetime

from .state import SECONDS, MasterState, capture_liveness
from .utc import utc_iso, utcnow

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_DIVERGED, EXIT_STALE = 0, 1, 2, 3, 4, 5
EXIT_UNREACHABLE = 6
STATES = {1: "started", 2: "stopped"}  # wlc.config state, as MonetDB's


def liveness_line(state: str, when: datetime | None, start: str = "wlc capture <dbfarm> <dbname>") -> str:
    """The line the status commands print for capture's liveness.

    Args:
        state (str): ``alive``, ``stale``, ``stopped``, ``not started`` or another word
            (:func:`wlcore.state.capture_liveness`; another word is printed as it is).
        when (datetime | None): the instant it refers to (UTC): the last heartbeat, or when
            capture stopped.
        start (str): the command that starts capture, named when it never ran.

    Returns:
        str: e.g. ``stopped at 2026-11-25T10:00:00.000000Z`` or ``stale since ...``.
    """
    if state == "stale":
        assert when is not None  # capture_liveness gives the last heartbeat with "stale" and "alive"
        return f"stale since {utc_iso(when)} (no heartbeat since; killed, crashed or hung)"
    if state == "stopped":
        return f"stopped at {utc_iso(when)}" if when else "stopped"
    if state == "alive":
        assert when is not None
        return f"alive (heartbeat {utc_iso(when)})"
    if state == "not started":
        return f"not started (start it with: {start})"
    return state


_NUMBERS = ("state", "tick", "batches", "format")  # wlc.config's keys status gives as ints
_NOTES = ("not_replicated", "feed_notes", "held")  # ... and as dicts of table -> text


def _status_value(cfg: MasterState, key: str) -> object:
    """What status gives for ``key`` of ``cfg``: a number as an int, per-table notes as a dict
    (sorted by table, as the file holds them), anything else (an empty number too) as the
    file's text of it."""
    if not MasterState.is_key(key):
        return cfg.extra[key]  # a key this version does not know, as read
    value = getattr(cfg, key)
    if key in _NOTES:
        return dict(sorted(value.items()))
    if key in _NUMBERS and value is not None:
        return int(value)
    return cfg.text(key)


def master_status(dbname: str, cfg: MasterState, now: datetime | None = None, dbfarm: str = "<dbfarm>") -> dict:
    """``wlc status`` as a dict.

    Args:
        dbname: the master database's name.
        cfg: its ``wlc.config`` (:func:`wlcore.state.read_master_state`).
        now: the UTC instant liveness is judged at (default now).
        dbfarm: the dbfarm folder, for the command a message names.

    Returns:
        wlc.config's keys (numbers as ints; ``not_replicated``, ``feed_notes`` and ``held`` as
        dicts of table -> text, see :class:`wlc.master_record.TableNotes`) plus ``master``, ``state_name``,
        ``capture`` (``alive``, ``stale``, ``stopped`` or ``not started``), ``capture_text``
        (the line status prints; ``failing`` when capture runs but its scans fail, the
        ``capture_error`` of wlc.config) and ``exit`` (the command's exit code, see the module).
    """
    from .promotion import database_of
    from .settings import settings

    out: dict = {"master": dbname}
    for key in cfg.keys():
        out[key] = _status_value(cfg, key)
    out["database"] = database_of(cfg, dbname)
    if cfg.beat is None:  # none recorded: capture runs at master.beat of config
        out["beat"] = SECONDS.render(settings().master.beat)
        out["beat_from"] = "master.beat of config"
    out["state_name"] = STATES.get(out.get("state", 1), str(out.get("state")))
    state, when = capture_liveness(cfg, now or utcnow())
    out["capture"], out["capture_text"] = state, liveness_line(state, when, f"wlc capture {dbfarm} {dbname}")
    if cfg.capture_error and state in ("alive", "not started"):  # running, but every scan fails
        since = utc_iso(cfg.capture_error_since) if cfg.capture_error_since else "-"
        out["capture"] = "failing"
        out["capture_text"] = (
            f"failing since {since}: {cfg.capture_error} (tried again with backoff up to capture.retry_max "
            "seconds; the capturing command's terminal and its log file have each failure)"
        )
    out["exit"] = EXIT_STALE if out["capture"] == "stale" else EXIT_OK
    return out


def aligned(rows: list[tuple[str, object]]) -> str:
    """``(name, value)`` rows as ``name  value`` lines, the values in one column.

    Args:
        rows (list[tuple[str, object]]): the rows (not empty).

    Returns:
        str: the lines joined by newlines.
    """
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def format_status(s: dict) -> str:
    """Human text of :func:`master_status`: one aligned line per fact, then a line per table
    not replicated, held back, or met by a limit of the change feed.

    Args:
        s (dict): a status as :func:`master_status` returns it.

    Returns:
        str: the text ``wlc status`` prints.
    """
    rows = [
        ("master", s["master"]),
        ("state", f"{s.get('state', '-')} ({s['state_name']})"),
        ("capture", s["capture_text"]),
        ("tick", f"{s.get('tick', '-')} (last published transaction)"),
        ("last write", s.get("write") or "-"),
        ("batches", s.get("batches", "-")),
        ("beat", _beat_text(s)),
        ("logs", s.get("logs") or "-"),
        ("snapshot", s.get("snapshot") or "-"),
        ("watermark", s.get("watermark") or "-"),
        ("dbid", s.get("dbid") or "-"),
        ("epoch", s.get("epoch") or "-"),
        ("epochs", s.get("epochs") or "-"),
        ("created", s.get("created") or "-"),
    ]
    if s.get("database", s["master"]) != s["master"]:  # a promoted master's folder keeps the replica's name
        rows.insert(1, ("database", s["database"]))
    if s.get("promoted"):  # a replica made the master of its database (wlr promote)
        rows.append(("promoted", f"{s['promoted']} from {s.get('promoted_from', '-')} after transaction "
                     f"{s.get('promoted_tick', '-')}"))  # fmt: skip
    lines = [aligned(rows)]
    if s.get("fenced"):
        lines.append(f"FENCED {s['fenced']}")
    if s.get("stale_paths"):
        lines.append(f"STALE PATHS {s['stale_paths']}")
    lines += [f"NOT REPLICATED {path}: {reason}" for path, reason in sorted(s.get("not_replicated", {}).items())]
    lines += [f"HELD {table}: {cause}" for table, cause in sorted(s.get("held", {}).items())]
    lines += [f"CHANGE FEED {table}: {text}" for table, text in sorted(s.get("feed_notes", {}).items())]
    return "\n".join(lines)


def _beat_text(s: dict) -> str:
    """The beat row of :func:`format_status`: seconds, and where it comes from when not wlc.config."""
    if not s.get("beat"):
        return "-"
    return f"{s['beat']} s" + (f" ({s['beat_from']})" if s.get("beat_from") else "")


def status(dbname: str, dbfarm: str | None = None) -> dict:
    """The status of master ``<dbfarm>/<dbname>`` (``wlc status`` from Python; no Spark).

    Args:
        dbname: the master database's name.
        dbfarm: the folder holding the databases (default ``$WLC_DBFARM``, else config's ``dbfarm``).

    Returns:
        the dict of :func:`master_status`, plus ``fenced`` (the line saying which replica was
        promoted in this master's place) when a promotion fenced it, ``stale_paths`` (what
        :func:`wlcore.state.check_paths` refuses) when wlc.config names another folder's
        paths; ``exit`` is the code ``wlc
        status`` would exit with.

    Raises:
        NotFoundError: no such dbfarm or database (the nearest masters are named).
        MasterStateError: the database is a replica or not a master.
    """
    from .databases import Dbfarm
    from .promotion import promoted_at, read_fence
    from .settings import dbfarm as resolve_dbfarm
    from .state import read_master_state, stale_message
    from .storage import Storage

    farm = resolve_dbfarm(dbfarm)
    dbs = Dbfarm(farm)
    dbname = dbs.require_master(dbname)  # a promoted master by its folder or by its database's name
    path = Storage.join(farm, dbname)
    cfg = read_master_state(Storage.of(farm), path) or MasterState()
    out = master_status(dbname, cfg, dbfarm=farm)
    stale = stale_message(Storage.of(farm), path, cfg)
    if stale:  # the folder was moved or copied while wlc.config held absolute paths
        out["stale_paths"] = stale
    fence = read_fence(Storage.of(farm), path)
    if fence is not None:  # a replica was promoted in this master's place: its capture may not publish
        out["fenced"] = (
            f"at {utc_iso(fence.fenced) if fence.fenced else '-'}: {fence.promoted} was promoted to master of "
            f"{fence.database!r} after transaction {fence.tick}; this folder's capture may not start or publish"
        )
    else:
        newer = dbs.successor(dbname, cfg)
        if newer is not None:  # promoted while this folder was out of reach: the same refusal as a fence
            by, new = newer
            where, seen = promoted_at(by, new)
            if not seen:  # a master of this dbfarm: its folder's name
                where = posixpath.basename(where)
            out["fenced"] = (
                f"superseded: {where}{seen} was promoted to master of {out['database']!r} at "
                f"{utc_iso(new.promoted) if new.promoted else '-'} (after transaction {new.promoted_tick}) while "
                f"this folder was out of reach; this folder's capture may not start or publish"
            )
    return out
