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
    parser = argparse.ArgumentParser(prog="wlr", description="Workload replay into Delta Lake replicas.")
    add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("status", help="print the replica's master, tick, clock, lag and error")
    st.add_argument("dbfarm")
    st.add_argument("replica")
    rp = sub.add_parser("replicate", help="apply the master's logs (until a txn id or instant)")
    rp.add_argument("dbfarm")
    rp.add_argument("master")
    rp.add_argument("replica", nargs="?")
    rp.add_argument("--until", help="transaction id (int) or ISO-8601 instant")
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
            print(f"{args.replica} is not a replica in {farm} (no {CONFIG_FILE})", file=sys.stderr)
            return 1
        cfg = parse_kv(storage.read_text(path), path)
        rep = Replica(cfg["master"], replica=args.replica, dbfarm=farm, master_dbfarm=cfg.get("masterfarm") or None)
        if args.command == "accept":
            print(f"skipped transaction {rep.accept()}")
            return 0
        s = rep.status()
        rows = [("replica", s["replica"]), ("master", s["master"]), ("state", s["state"]),
                ("tick", s["tick"]), ("clock", _fmt(s["clock"])), ("master tick", s["master_tick"]),
                ("lag (transactions)", s["lag_transactions"]),
                ("lag (seconds)", "-" if s["lag_seconds"] is None else f"{s['lag_seconds']:.3f}"),
                ("skipped", ",".join(map(str, s["skipped"])) or "-")]
        err = s["error"]
        rows.append(("error", "-" if not err else
                     f"batch {err.get('batch', '-')} txn {err.get('txn', '-')} table {err.get('table', '-')}: {err.get('cause')}"))
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
        return 3 if err else 0
    except WlcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
