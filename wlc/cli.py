"""Command line of wlc (the ``wlc`` command, or ``python -m wlc``): ``capture`` and ``status``."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from .config import add_common, use_config, dbfarm as resolve_dbfarm
from .errors import WlcError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wlc", description="Workload capture for Delta Lake masters.")
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
                print(f"{args.dbname} is not a master in {farm}", file=sys.stderr)
                return 1
            for key, value in cfg.items():
                if key == "not_replicated" and value:
                    import json
                    for path, reason in sorted(json.loads(value).items()):
                        print(f"NOT REPLICATED {path}: {reason}")
                    continue
                print(f"{key}={value}")
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
