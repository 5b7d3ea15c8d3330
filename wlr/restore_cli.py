"""``wlr restore``: the command line of :mod:`wlr.restore` (its subparser and its run)."""
from __future__ import annotations

import argparse
import sys

from wlcore.settings import dbfarm as resolve_dbfarm
from wlcore.errors import WlcError
from wlcore.storage import Storage

from wlcore.errors import NotFoundError

from .errors import ReplicaStateError, RestoreError


def add_parser(sub) -> None:
    """The ``wlr restore`` subcommand (``sub``: the command line's subparsers)."""
    rs = sub.add_parser(
        "restore", help="make a replica table again in a master (schema, properties, constraints, data)",
        description="Make replica table TABLE again in master INTO, as the replica holds it at its last consistent "
                    "tick: columns, partitioning, clustering, comment, properties (wlc.key), constraints, table "
                    "features and rows. Capture records it like any other table.",
        epilog="exit status: 0 restored; 1 the restore failed while writing (the message says what was undone); "
               "2 refused (the table exists, the target is not a master, a bad name); 3 no such replica, master "
               "or replica table")
    rs.add_argument("dbfarm", help="folder holding the databases")
    rs.add_argument("replica", help="the replica holding the table (e.g. a point-in-time replica)")
    rs.add_argument("table", help="the replica table (schema.table)")
    rs.add_argument("--into", required=True, metavar="MASTER", help="the master database to restore into")
    rs.add_argument("--as", dest="as_", metavar="SCHEMA.TABLE", help="the master table's name (default: TABLE)")
    rs.add_argument("--replace", action="store_true", help="replace the master table when it exists")


def run(args: argparse.Namespace) -> int:
    """``wlr restore``: print what was restored; the exit status of the subparser's epilog."""
    from .monitor import read_replica_state
    from .replica import Replica

    farm = resolve_dbfarm(args.dbfarm)
    try:
        try:
            cfg = read_replica_state(Storage.of(farm), Storage.join(farm, args.replica))
        except ReplicaStateError as exc:
            raise NotFoundError(str(exc), cli=exc.cli) from None
        rep = Replica(cfg["master"], replica=args.replica, dbfarm=farm, master_dbfarm=cfg.get("masterfarm") or None)
        done = rep.restore_table(args.table, args.into, as_=args.as_, replace=args.replace, dbfarm=farm)
    except WlcError as exc:
        text = exc.cli.replace("<dbfarm>", args.dbfarm).replace("<replica>", args.replica)
        print(f"error: {text}", file=sys.stderr)
        return 3 if isinstance(exc, NotFoundError) else 1 if isinstance(exc, RestoreError) else 2
    print("\n".join(done.lines()))
    return 0
