"""Command line of wlc (the ``wlc`` command, or ``python -m wlc``): ``capture``, ``status``,
the log's life cycle: ``snapshot``, ``compact``, ``prune``, and ``ship``."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from .config import add_common, use_config, dbfarm as resolve_dbfarm
from .errors import WlcError
from .terminal import setup as setup_terminal


def capture_text(cfg: dict[str, str]) -> str:
    """``alive``, ``stale since <instant>``, ``stopped`` or ``unknown`` (no heartbeat yet)."""
    from datetime import datetime, timezone

    from .heartbeat import capture_liveness

    state, last = capture_liveness(cfg, datetime.now(timezone.utc))
    return f"stale since {last.isoformat()}" if state == "stale" else state


def aligned(rows: list[tuple[str, object]]) -> str:
    """``(name, value)`` rows as ``name  value`` lines, the values in one column."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


STATES = {1: "started", 2: "stopped"}  # wlc.config state, as MonetDB's


def master_status(dbname: str, cfg: dict[str, str]) -> dict:
    """``wlc status`` as a dict: wlc.config's keys (numbers as ints; ``not_replicated``,
    ``feed_notes`` and ``held`` as dicts of table -> text, see :mod:`wlc.table_notes`) plus
    ``master``, ``state_name`` and ``capture`` (liveness)."""
    import json

    out: dict = {"master": dbname}
    for key, value in cfg.items():
        if key in ("state", "tick", "batches", "format") and value.lstrip("-").isdigit():
            out[key] = int(value)
        elif key in ("not_replicated", "feed_notes", "held"):
            out[key] = json.loads(value) if value else {}
        else:
            out[key] = value
    out["state_name"] = STATES.get(out.get("state", 1), str(out.get("state")))
    out["capture"] = capture_text(cfg)
    return out


def format_status(s: dict) -> str:
    """Human text of :func:`master_status`: one aligned line per fact, then a line per table
    not replicated, held back, or met by a limit of the change feed."""
    rows = [("master", s["master"]), ("state", f"{s.get('state', '-')} ({s['state_name']})"),
            ("capture", s["capture"] + (f" (heartbeat {s['heartbeat']})" if s.get("heartbeat") else "")),
            ("tick", f"{s.get('tick', '-')} (last published transaction)"),
            ("last write", s.get("write") or "-"), ("batches", s.get("batches", "-")),
            ("beat", f"{s['beat']} s" if s.get("beat") else "-"), ("logs", s.get("logs") or "-"),
            ("snapshot", s.get("snapshot") or "-"), ("watermark", s.get("watermark") or "-"),
            ("dbid", s.get("dbid") or "-"), ("epoch", s.get("epoch") or "-"),
            ("epochs", s.get("epochs") or "-"), ("created", s.get("created") or "-")]
    lines = [aligned(rows)]
    lines += [f"NOT REPLICATED {path}: {reason}" for path, reason in sorted(s.get("not_replicated", {}).items())]
    lines += [f"HELD {table}: {cause}" for table, cause in sorted(s.get("held", {}).items())]
    lines += [f"CHANGE FEED {table}: {text}" for table, text in sorted(s.get("feed_notes", {}).items())]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The command line's argparse parser (its subcommands, arguments and help)."""
    parser = argparse.ArgumentParser(
        prog="wlc", description="Workload capture for Delta Lake masters.",
        epilog="exit status: 0 ok; 2 bad input or a refused call; 3 not found (no such master)")
    add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="put a database in master mode (if needed) and capture until interrupted")
    cap.add_argument("dbfarm", help="folder holding the databases")
    cap.add_argument("dbname", help="the master database's name (a folder in the dbfarm)")
    cap.add_argument("--logs", help="log folder for a new master (default <dbfarm>/<dbname>/wlc_logs)")
    cap.add_argument("--beat", type=float, help="set the heartbeat in seconds")
    st = sub.add_parser("status", help="print a master's state, tick, logs, heartbeat and capture liveness")
    st.add_argument("dbfarm", help="folder holding the databases")
    st.add_argument("dbname", help="the master database's name")
    st.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    sn = sub.add_parser("snapshot", help="take a snapshot at the last published transaction while capture goes on "
                                         "(flushes first when no other process captures)")
    sn.add_argument("dbfarm", help="folder holding the databases")
    sn.add_argument("dbname", help="the master database's name")
    co = sub.add_parser("compact", help="merge published batches into level-1 and level-2 batches, as far as due")
    co.add_argument("dbfarm", help="folder holding the databases")
    co.add_argument("dbname", help="the master database's name")
    co.add_argument("--level1", help="override master.compact.level1: a duration ('1h') or '<n> batches'")
    co.add_argument("--level2", help="override master.compact.level2: a duration ('1d') or '<n> batches'")
    pr = sub.add_parser("prune", help="delete the batches and snapshots master.retention no longer promises")
    pr.add_argument("dbfarm", help="folder holding the databases")
    pr.add_argument("dbname", help="the master database's name")
    pr.add_argument("--dry-run", action="store_true", help="only say what would be deleted and what stays reachable")
    sh = sub.add_parser("ship", help="copy published batches and snapshots to another folder or an S3 URL")
    sh.add_argument("dbfarm", help="folder holding the databases")
    sh.add_argument("dbname", help="the master database's name")
    sh.add_argument("url", help="destination: a folder, or s3://bucket/path (storage.s3 in config)")
    sh.add_argument("--follow", action="store_true", help="keep shipping whatever is published until interrupted")
    return parser


def ship_command(args) -> int:
    """``wlc ship``: one pass, or following until SIGINT/SIGTERM; prints what was shipped."""
    from .ship import Shipper
    from .storage import Storage

    farm = resolve_dbfarm(args.dbfarm)
    shipper = Shipper(Storage.of(farm), Storage.join(farm, args.dbname), args.dbname, args.url)
    report = shipper.once()
    print("\n".join(report.lines()), flush=True)
    if not args.follow:
        return 0
    signal.signal(signal.SIGTERM, lambda *_: shipper._stop.set())
    signal.signal(signal.SIGINT, lambda *_: shipper._stop.set())
    print(f"shipping {args.dbname} to {shipper.to} as batches are published; Ctrl-C stops", flush=True)
    shipper.follow(background=False)
    print("\n".join(shipper.report.lines()))
    if shipper.error is not None:
        raise shipper.error
    return 0


def lifecycle_command(args) -> int:
    """``wlc snapshot``, ``wlc compact`` and ``wlc prune``: print what was done; 0 ok."""
    import warnings

    from .config import every
    from .errors import MasterStateError
    from .lifecycle import Lifecycle
    from .master import Master
    from .session import active_session
    from .storage import Storage

    farm = resolve_dbfarm(args.dbfarm)
    cycle = Lifecycle(Storage.of(farm), Storage.join(farm, args.dbname), args.dbname)
    cycle.config()  # not a master: an error naming the fix, before Spark starts
    if args.command == "snapshot":
        m = Master(args.dbname, dbfarm=farm, capture=False)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.start()
        except MasterStateError:  # another process captures: the snapshot ends at its last published batch
            start = cycle.snapshot(active_session())
            print(f"capture runs in another process: snapshot at its last published transaction {start.txn}")
        else:
            try:
                start = m.snapshot()
            finally:
                m.close()
        print(f"snapshot at transaction {start.txn} ({start.time.isoformat() if start.time else 'start'}): {start.path}")
        return 0
    if args.command == "compact":
        chosen = {1: every(args.level1, "--level1", ("batches",)), 2: every(args.level2, "--level2", ("batches",))}
        made = cycle.compact(active_session(), {k: v for k, v in chosen.items() if v is not None}, print)
        print(f"{len(made)} compacted batches made" if made else "nothing to compact yet")
        return 0
    report = cycle.prune(dry_run=args.dry_run)
    print("\n".join(report.lines()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    use_config(args)
    setup_terminal(args, logging.INFO, "%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        if args.command in ("snapshot", "compact", "prune"):
            return lifecycle_command(args)
        if args.command == "ship":
            return ship_command(args)
        if args.command == "status":
            from .master import read_config
            from .storage import Storage
            farm = resolve_dbfarm(args.dbfarm)
            cfg = read_config(Storage.of(farm), Storage.join(farm, args.dbname))
            if cfg is None:
                print(f"error: {args.dbname} is not a master in {farm}; check the dbfarm and the name, or start "
                      f"capture with: wlc capture {args.dbfarm} {args.dbname}", file=sys.stderr)
                return 3
            status = master_status(args.dbname, cfg)
            if args.json:
                import json
                print(json.dumps(status, indent=1))
            else:
                print(format_status(status))
            return 0
        import warnings
        from .config import number
        from .master import Master
        warnings.simplefilter("default")
        beat = number(args.beat, "--beat") if args.beat is not None else None  # before anything is made
        m = Master(args.dbname, dbfarm=args.dbfarm, logs=args.logs).start()
        if beat is not None:
            m.beat(beat)
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        signal.signal(signal.SIGINT, lambda *_: done.set())
        print(f"capturing {m.path} into {m.logs} (beat {m.beat_seconds:g} s); Ctrl-C stops", flush=True)
        done.wait()
        m.flush()
        m.close()
        print(f"capture stopped at transaction {m.tick()}")
        return 0
    except WlcError as exc:
        print(f"error: {exc.cli}", file=sys.stderr)
        return 2
