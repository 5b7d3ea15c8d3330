"""``wlr prune``: a relaying replica's relay folder pruned by retention (its subparser and its
subcommand; :func:`wlr.relay.prune` does it)."""

from __future__ import annotations

import argparse

from wlcore.commands import retention_option, subcommand


def add_parser(sub) -> None:
    """Add the ``wlr prune`` subcommand.

    Args:
        sub (argparse._SubParsersAction): the command line's subparsers.
    """
    pr = subcommand(
        sub,
        "prune",
        cmd_prune,
        help="delete what a relay's retention no longer promises in <replica>/wlr_relay",
        description="Delete the batches and snapshots of a relaying replica's relay folder that its retention "
        "no longer promises (its own, stored with it; levels not set there: master.retention's), by the "
        "rules of wlc prune: nothing a replica reading the relay needs to reach a promised point. Says what "
        "the relay still promises.",
    )
    pr.add_argument("dbfarm", help="folder holding the databases")
    pr.add_argument("replica", help="the relaying replica's name")
    pr.add_argument("--dry-run", action="store_true", help="only say what would be deleted and what stays reachable")
    retention_option(pr, "store the relay's own retention first")


def cmd_prune(args: argparse.Namespace) -> int:
    """``wlr prune``: prune replica ``args.replica``'s relay folder and print what was deleted and
    what it still promises.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``replica``, ``dry_run``,
            ``retention``.

    Returns:
        int: 0.

    Raises:
        ConfigError: a malformed ``--retention`` (nothing is deleted).
        NotFoundError: no such dbfarm or replica.
        ReplicaStateError: the replica relays nothing.
        ShipError: the relay folder holds no shipped copy of the replica's master.
    """
    from wlcore.errors import NotFoundError
    from wlcore.retention import described_retention, retention_args
    from wlcore.settings import dbfarm as resolve_dbfarm
    from wlcore.storage import Storage

    from .errors import ReplicaStateError
    from .monitor import read_replica_state
    from .relay import prune
    from .source import RELAY_DIR

    changes = retention_args(args.retention)
    farm = resolve_dbfarm(args.dbfarm)
    try:
        read_replica_state(Storage.of(farm), Storage.join(farm, args.replica))
    except ReplicaStateError as exc:  # not a replica: "not found", as the other commands say it
        raise NotFoundError(str(exc), cli=exc.cli) from None
    report = prune(args.replica, farm, dry_run=args.dry_run, retention=changes)
    folder = Storage.join(farm, args.replica, RELAY_DIR)
    print(report.block(f"relay {folder} (retention: {described_retention(Storage.of(folder), folder, changes)}):"))
    return 0
