"""``wlr restore``: the command line of :mod:`wlr.restore` (its subparser and its subcommand)."""

from __future__ import annotations

import argparse

from wlcore.commands import subcommand


def add_parser(sub) -> None:
    """Add the ``wlr restore`` subcommand.

    Args:
        sub (argparse._SubParsersAction): the command line's subparsers.
    """
    rs = subcommand(
        sub,
        "restore",
        cmd_restore,
        help="make a replica table again in a master (schema, properties, constraints, data)",
        description="Make replica table TABLE again in master INTO, as the replica holds it at its last consistent "
        "tick: columns, partitioning, clustering, comment, properties (wlc.key), constraints, table "
        "features and rows. Capture records it like any other table.",
        epilog="exit status: 0 restored; 1 the restore failed while writing (the message says what was undone); "
        "2 refused (the table exists, the target is not a master, a bad name); 3 no such replica, master "
        "or replica table",
    )
    rs.add_argument("dbfarm", help="folder holding the databases")
    rs.add_argument("replica", help="the replica holding the table (e.g. a point-in-time replica)")
    rs.add_argument("table", help="the replica table (schema.table)")
    rs.add_argument("--into", required=True, metavar="MASTER", help="the master database to restore into")
    rs.add_argument("--as", dest="as_", metavar="SCHEMA.TABLE", help="the master table's name (default: TABLE)")
    rs.add_argument("--replace", action="store_true", help="replace the master table when it exists")


def cmd_restore(args: argparse.Namespace) -> int:
    """``wlr restore``: make replica table ``args.table`` again in master ``args.into`` and print what
    was restored (the other exit statuses, of the subparser's epilog, come from the error raised,
    :data:`wlr.cli.EXIT_CODES`).

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``replica``, ``table``,
            ``into``, ``as_`` (the master table's name; None: ``table``), ``replace``.

    Returns:
        int: 0.

    Raises:
        NotFoundError: no such dbfarm, replica or master.
        NoSuchTableError: the table is not on the replica (the nearest are named).
        MasterStateError: ``into`` is not a master, or stopped logging.
        TableExistsError: the master table exists and ``--replace`` was not given.
        ConfigError: a malformed name.
        RestoreError: a write failed (the message says what was undone).
    """
    from .cli_replica import open_replica

    rep = open_replica(args)
    done = rep.restore_table(args.table, args.into, as_=args.as_, replace=args.replace, dbfarm=rep.dbfarm)
    print("\n".join(done.lines()))
    return 0
