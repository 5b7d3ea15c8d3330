"""Command line of wlr (the ``wlr`` command, or ``python -m wlr``): ``status``, ``replicate`` and ``accept``."""
from __future__ import annotations

import argparse
import logging
import sys

from wlc.config import add_common, use_config
from wlc.errors import WlcError


def _fmt(value) -> str:
    if value is None:
        return "-"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="wlr", description="Workload replay into Delta Lake replicas.",
        epilog="exit status: 0 ok; 1 the replica stopped at a failed transaction (status); 2 bad input or a "
               "refused call; 3 not found (no such replica or master)")
    add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("status", help="print the replica's state, tick, clock, lag, liveness and error")
    st.add_argument("dbfarm", help="folder holding the databases")
    st.add_argument("replica", help="the replica database's name")
    st.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    rp = sub.add_parser("replicate", help="apply the master's logs (until a txn id or instant)")
    rp.add_argument("dbfarm")
    rp.add_argument("master")
    rp.add_argument("replica", nargs="?")
    rp.add_argument("--until", help="transaction id (int) or ISO-8601 instant")
    lg = sub.add_parser("log", help="list the master's published transactions (to find a recovery target)",
                        description="List a master's published transactions, oldest first: txn id, GTID, commit "
                                    "time (UTC), table, operation, change rows by type, batch. Exit status 0, or "
                                    "3 when the database is not a master.")
    lg.add_argument("dbfarm", help="folder holding the databases")
    lg.add_argument("master", help="the master database's name")
    lg.add_argument("--table", help="only this table (schema.table)")
    lg.add_argument("--operation", help="only operations starting with this (e.g. DROP, MERGE, WRITE)")
    lg.add_argument("--since", help="from this transaction id or ISO-8601 instant (inclusive)")
    lg.add_argument("--until", help="up to this transaction id or ISO-8601 instant (inclusive)")
    lg.add_argument("--json", action="store_true", help="print a JSON array instead of a table")
    ac = sub.add_parser("accept", help="skip exactly the failed transaction")
    ac.add_argument("dbfarm")
    ac.add_argument("replica")
    args = parser.parse_args(argv)
    use_config(args)
    logging.basicConfig(level=logging.WARNING)
    from .replica import CONFIG_FILE, Replica
    from wlc.config import dbfarm as resolve_dbfarm, parse_kv
    from wlc.storage import Storage
    try:
        if args.command == "log":
            import json
            from .errors import ReplicaStateError
            from .txlog import format_table, transactions
            try:
                found = transactions(args.master, args.dbfarm, table=args.table, operation=args.operation,
                                     since=args.since, until=args.until)
            except ReplicaStateError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 3
            print(json.dumps(found, indent=1) if args.json else format_table(found))
            return 0
        if args.command == "replicate":
            until = args.until
            if until is not None and until.lstrip("-").isdigit():
                until = int(until)
            rep = Replica(args.master, replica=args.replica, dbfarm=args.dbfarm)
            rep.replicate(until, follow=False)
            print(f"{rep.name}: at transaction {rep.tick()} ({_fmt(rep.clock())})")
            return 0
        farm = resolve_dbfarm(args.dbfarm)
        storage = Storage.of(farm)
        path = Storage.join(farm, args.replica, CONFIG_FILE)
        if not storage.exists(path):
            print(f"error: {args.replica} is not a replica in {farm} (no {CONFIG_FILE}); check the dbfarm and the "
                  "name, or make it with: wlr replicate <dbfarm> <master> <replica>", file=sys.stderr)
            return 3
        cfg = parse_kv(storage.read_text(path), path)
        rep = Replica(cfg["master"], replica=args.replica, dbfarm=farm, master_dbfarm=cfg.get("masterfarm") or None)
        if args.command == "accept":
            print(f"skipped transaction {rep.accept()}")
            return 0
        s = rep.status()
        err = s["error"]
        if getattr(args, "json", False):
            import json
            print(json.dumps({k: _fmt(v) if hasattr(v, "isoformat") else v for k, v in s.items()}, indent=1))
            return 1 if err else 0
        capture = s["capture"] + (f" (heartbeat {_fmt(s['capture_heartbeat'])})" if s["capture_heartbeat"] else "")
        rows = [("replica", s["replica"]), ("master", s["master"]), ("state", s["state"]),
                ("tick", s["tick"]), ("clock", _fmt(s["clock"])), ("master tick", s["master_tick"]),
                ("lag (transactions)", s["lag_transactions"]),
                ("lag (seconds)", "-" if s["lag_seconds"] is None else f"{s['lag_seconds']:.3f}"),
                ("capture", capture), ("follower heartbeat", _fmt(s["heartbeat"])),
                ("skipped", ",".join(map(str, s["skipped"])) or "-")]
        rows.append(("error", "-" if not err else
                     f"batch {err.get('batch', '-')} txn {err.get('txn', '-')} table {err.get('table', '-')}: "
                     f"{err.get('cause')}; fix it, or skip exactly that transaction with: wlr accept "
                     f"{args.dbfarm} {args.replica}"))
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
        return 1 if err else 0
    except WlcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
