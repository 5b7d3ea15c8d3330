"""Command line of wlc (the ``wlc`` command, or ``python -m wlc``): ``capture`` and ``status``."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from .config import add_common, use_config, dbfarm as resolve_dbfarm
from .errors import WlcError


def capture_liveness(cfg: dict[str, str]) -> str:
    """``alive``, ``stale since <instant>``, ``stopped`` or ``unknown`` (no heartbeat yet)."""
    from datetime import datetime, timezone

    from .config import number, settings
    from .heartbeat import liveness
    from .master import STOPPED

    if int(cfg.get("state", 1)) == STOPPED:
        return "stopped"
    interval = number(settings()["capture"]["poll_interval"], "capture.poll_interval")
    state, last = liveness(cfg.get("heartbeat"), interval, datetime.now(timezone.utc))
    return f"stale since {last.isoformat()}" if state == "stale" else state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="wlc", description="Workload capture for Delta Lake masters.",
        epilog="exit status: 0 ok; 2 bad input or a refused call; 3 not found (no such master)")
    add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="put a database in master mode (if needed) and capture until interrupted")
    cap.add_argument("dbfarm")
    cap.add_argument("dbname")
    cap.add_argument("--logs", help="log folder for a new master (default <dbfarm>/<dbname>/wlc_logs)")
    cap.add_argument("--beat", type=float, help="set the heartbeat in seconds")
    st = sub.add_parser("status", help="print a master's wlc.config")
    st.add_argument("dbfarm")
    st.add_argument("dbname")
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
            for key, value in cfg.items():
                if key == "not_replicated" and value:
                    import json
                    for path, reason in sorted(json.loads(value).items()):
                        print(f"NOT REPLICATED {path}: {reason}")
                    continue
                print(f"{key}={value}")
            print(f"capture={capture_liveness(cfg)}")
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
        print(f"error: {exc}", file=sys.stderr)
        return 2
