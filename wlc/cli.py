"""Command line of wlc (the ``wlc`` command, or ``python -m wlc``): ``capture`` and ``status``."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from .config import add_common, use_config, dbfarm as resolve_dbfarm
from .errors import WlcError


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
    """``wlc status`` as a dict: wlc.config's keys (numbers as ints, ``not_replicated`` as a
    dict of table path -> reason) plus ``master``, ``state_name`` and ``capture`` (liveness)."""
    import json

    out: dict = {"master": dbname}
    for key, value in cfg.items():
        if key in ("state", "tick", "batches", "format") and value.lstrip("-").isdigit():
            out[key] = int(value)
        elif key == "not_replicated":
            out[key] = json.loads(value) if value else {}
        else:
            out[key] = value
    out["state_name"] = STATES.get(out.get("state", 1), str(out.get("state")))
    out["capture"] = capture_text(cfg)
    return out


def format_status(s: dict) -> str:
    """Human text of :func:`master_status`: one aligned line per fact, then NOT REPLICATED lines."""
    rows = [("master", s["master"]), ("state", f"{s.get('state', '-')} ({s['state_name']})"),
            ("capture", s["capture"] + (f" (heartbeat {s['heartbeat']})" if s.get("heartbeat") else "")),
            ("tick", f"{s.get('tick', '-')} (last published transaction)"),
            ("last write", s.get("write") or "-"), ("batches", s.get("batches", "-")),
            ("beat", f"{s['beat']} s" if s.get("beat") else "-"), ("logs", s.get("logs") or "-"),
            ("snapshot", s.get("snapshot") or "-"), ("watermark", s.get("watermark") or "-"),
            ("dbid", s.get("dbid") or "-"), ("created", s.get("created") or "-")]
    lines = [aligned(rows)]
    lines += [f"NOT REPLICATED {path}: {reason}" for path, reason in sorted(s.get("not_replicated", {}).items())]
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    use_config(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
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
