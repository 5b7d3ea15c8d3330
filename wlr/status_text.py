"""What ``wlr status`` prints: a replica's status as aligned lines of text."""

from __future__ import annotations

from wlcore.health import aligned


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
    """What a log folder promises (:func:`wlr.monitor.promise_at`) as one line of status.

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
