"""The replica a command line names (``wlr status``, ``wlr accept``, ``wlr restore``)."""

from __future__ import annotations

import argparse

from wlcore.errors import NotFoundError


def open_replica(args: argparse.Namespace):
    """The replica ``args.replica`` of dbfarm ``args.dbfarm`` as its ``wlr.config`` names its master
    (``wlr status``, ``wlr accept``, ``wlr restore``).

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``replica``.

    Returns:
        wlr.Replica: the replica, reading from the master (and master dbfarm) it follows.

    Raises:
        NotFoundError: no such dbfarm, or the database is not a replica (the replicas there are named).
        ConfigError: a malformed dbfarm or name.
    """
    from wlcore.settings import dbfarm as resolve_dbfarm
    from wlcore.storage import Storage

    from .errors import ReplicaStateError
    from .monitor import read_replica_state
    from .replica import Replica

    farm = resolve_dbfarm(args.dbfarm)
    try:
        cfg = read_replica_state(Storage.of(farm), Storage.join(farm, args.replica))
    except ReplicaStateError as exc:  # no replica of that name: "not found", as the command lines say it
        raise NotFoundError(str(exc), cli=exc.cli) from None
    return Replica(cfg.master, replica=args.replica, dbfarm=farm, master_dbfarm=cfg.masterfarm or None)
