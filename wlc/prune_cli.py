"""``wlc prune``: the master's own folder and its shipped copies pruned by retention (its
subparser and its subcommand; :mod:`wlc.lifecycle` and :func:`wlcore.ship.prune_copy` do it)."""

from __future__ import annotations

import argparse

from wlcore.commands import retention_option, subcommand
from wlcore.settings import dbfarm as resolve_dbfarm


def add_parser(sub) -> None:
    """Add the ``wlc prune`` subcommand.

    Args:
        sub (argparse._SubParsersAction): the command line's subparsers.
    """
    pr = subcommand(
        sub,
        "prune",
        cmd_prune,
        help="delete the batches and snapshots retention no longer promises, in the master's folder and its copies",
        description="Delete what retention no longer promises: in the master's own folder (master.retention), "
        "then in every shipped copy it ships to (each by its own retention, stored with the copy; levels not "
        "set there: master.retention's). Nothing a replica needs to reach a promised point is deleted. Says "
        "what each folder still promises.",
    )
    pr.add_argument("dbfarm", help="folder holding the databases")
    pr.add_argument("dbname", help="the master database's name")
    pr.add_argument("--dry-run", action="store_true", help="only say what would be deleted and what stays reachable")
    pr.add_argument("--copy", metavar="URL", help="prune only this shipped copy of the master (a folder or s3:// URL)")
    retention_option(pr, "with --copy: store the copy's own retention first")


def cmd_prune(args: argparse.Namespace) -> int:
    """``wlc prune``: prune master ``args.dbname``'s folder by ``master.retention`` and each of its
    shipped copies by its own retention (or only the copy ``--copy``), printing what was deleted
    and what each folder still promises.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``dbname``, ``dry_run``,
            ``copy`` (None: the master and every copy) and ``retention`` (with ``--copy``).

    Returns:
        int: 0.

    Raises:
        ConfigError: ``--retention`` without ``--copy``, or a malformed one (nothing pruned).
        NotFoundError: no such dbfarm or database.
        MasterStateError: not a master.
        ShipError: a copy holds no shipped copy of this master, or could not be pruned (the
            others were pruned; the message names each).
    """
    from wlcore.errors import ConfigError
    from wlcore.retention import described_retention, retention_args
    from wlcore.ship import ShipError, dest_root, prune_copy
    from wlcore.ship.copies import known_copies
    from wlcore.storage import Storage

    from .lifecycle import Lifecycle

    changes = retention_args(args.retention)
    if changes and not args.copy:
        raise ConfigError(
            "--retention sets a shipped copy's own retention: name the copy with --copy URL "
            "(the master's own folder keeps master.retention of config)"
        )
    farm = resolve_dbfarm(args.dbfarm)
    cycle = Lifecycle.of(farm, args.dbname)  # refuses a database that is not a master, naming what it is
    dbid = cycle.config().dbid
    if args.copy:
        copies = [dest_root(args.copy)]
    else:
        report = cycle.prune(dry_run=args.dry_run)
        print(report.block(f"master {args.dbname} ({cycle.path}):"))
        copies = known_copies(cycle.storage, cycle.path)
    failed = []
    for url in copies:
        try:
            copy = prune_copy(url, cycle.dbname, dry_run=args.dry_run, retention=changes, dbid=dbid)
            print(copy.block(f"shipped copy {url} (retention: {described_retention(Storage.of(url), url, changes)}):"))
        except (ShipError, OSError) as exc:
            print(f"shipped copy {url}: not pruned: {exc}")
            failed.append(f"{url} ({exc})")
    if failed:
        raise ShipError(
            "could not prune " + "; ".join(failed) + ". Fix the copy, or remove its line from "
            f"{Storage.join(cycle.path, 'wlc.copies')} when it is gone for good"
        )
    return 0
