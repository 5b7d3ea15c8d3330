"""``wlr promote``: the command line of :mod:`wlr.promote` (its subparser and its subcommand)."""

from __future__ import annotations

import argparse
import os
import sys

from wlcore.commands import subcommand


def add_parser(sub) -> None:
    """Add the ``wlr promote`` subcommand.

    Args:
        sub (argparse._SubParsersAction): the command line's subparsers.
    """
    pp = subcommand(
        sub,
        "promote",
        cmd_promote,
        help="make a replica the master of its database (failover)",
        description="Make replica REPLICA the master of the database it replicates, as PostgreSQL's pg_promote: "
        "the database keeps its name, id, transaction ids and GTIDs; a new epoch begins at the replica's tick + 1; "
        "the old master's folder is fenced so that its capture may not publish again. Other replicas switch to "
        "it with: wlr replicate DBFARM DATABASE OTHER --source REPLICA.",
        epilog="exit status: 0 promoted; 2 refused (not caught up with everything published, replay failed, "
        "a selective replica, a follower running: nothing changed); 3 no such dbfarm or replica",
    )
    pp.add_argument("dbfarm", help="folder holding the databases")
    pp.add_argument("replica", help="the replica to promote")
    pp.add_argument(
        "--force",
        action="store_true",
        help="promote a replica that is not caught up or whose replay failed; the published transactions "
        "the new history leaves out are listed",
    )
    pp.add_argument(
        "--capture",
        action="store_true",
        help="then capture the promoted master in this process (runs: wlc capture DBFARM REPLICA)",
    )


def cmd_promote(args: argparse.Namespace) -> int:
    """``wlr promote``: promote replica ``args.replica`` and print what was done; with ``--capture``,
    run ``wlc capture`` on it in place of this process (replay never imports capture).

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``replica``, ``force``,
            ``capture``, ``config``.

    Returns:
        int: 0 (``--capture``: the process becomes ``wlc capture`` and never returns).

    Raises:
        PromotionError: the replica is not caught up, failed, or selective (without ``--force``).
        ReplicaStateError: not a replica, or a follower replays into it.
        NotFoundError: no such dbfarm or replica.
        ConfigError: a malformed name.
    """
    from .promote import promote

    done = promote(args.replica, args.dbfarm, force=args.force)
    print("\n".join(done.lines(args.dbfarm, args.replica)), flush=True)
    if args.capture:
        cmd = [sys.executable, "-m", "wlc", "capture", args.dbfarm, args.replica]
        if args.config:
            cmd[3:3] = ["--config", args.config]
        os.execv(sys.executable, cmd)
    return 0
