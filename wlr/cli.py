"""Command line of wlr (``wlr``, or ``python -m wlr``): ``status``, ``replicate``, ``log``, ``accept``, ``restore``
(:mod:`wlr.restore`), ``promote`` (:mod:`wlr.promote`), ``prune`` (a relay folder: :func:`wlr.relay.prune`). One
function ``cmd_<name>`` per subcommand; the errors they raise become messages and exit codes in
:func:`wlcore.commands.run`."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from wlcore.commands import (
    ExitCodes,
    guarded,
    metrics_option,
    retention_option,
    run,
    say_metrics,
    setup_terminal,
    subcommand,
)
from wlcore.errors import ConfigError, NotFoundError, WlcError
from wlcore.health import EXIT_FAILED, EXIT_NOT_FOUND
from wlcore.settings import add_common, settings, use_config

from .errors import NoStartError, ReplicaStateError, ReplicationError, RestoreError
from .failure import retry_delay
from .monitor import format_replica_status, shown
from .replay import ReplicateOptions


def _say(exc: WlcError, args: argparse.Namespace) -> str:
    """``exc``'s message with its fix as a command, filled in with this command line's names."""
    text = exc.cli
    replica = getattr(args, "replica", None) or (f"{args.master}_replica" if getattr(args, "master", None) else None)
    for placeholder, value in (
        ("<dbfarm>", args.dbfarm),
        ("<master>", getattr(args, "master", None)),
        ("<replica>", replica),
    ):
        if value:
            text = text.replace(placeholder, value)
    return text


def selection_args(args: argparse.Namespace) -> tuple[list[str] | None, dict[str, str] | None]:
    """``--tables`` and ``--where`` as ``replicate(tables=, where=)`` takes them.

    Raises:
        ConfigError: a ``--where`` without ``=``.
    """
    tables = [t.strip() for arg in (args.tables or []) for t in arg.split(",") if t.strip()] or None
    where = {}
    for arg in args.where or []:
        table, eq, pred = arg.partition("=")
        if not eq:
            raise ConfigError(f"--where {arg!r}: write TABLE=PREDICATE, e.g. \"sales.orders=o_region = 'EU'\"")
        where[table.strip()] = pred.strip()
    return tables, where or None


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

    from .monitor import read_replica_state
    from .replica import Replica

    farm = resolve_dbfarm(args.dbfarm)
    try:
        cfg = read_replica_state(Storage.of(farm), Storage.join(farm, args.replica))
    except ReplicaStateError as exc:  # no replica of that name: "not found", as the command lines say it
        raise NotFoundError(str(exc), cli=exc.cli) from None
    return Replica(cfg.master, replica=args.replica, dbfarm=farm, master_dbfarm=cfg.masterfarm or None, names=False)


def _follow(rep, call: ReplicateOptions) -> int:
    """``wlr replicate --follow``: follow until SIGINT/SIGTERM.

    Returns:
        0; 1 when a failure is stored in wlr.config at the stop (the follower retried it with
        backoff until then: ``replica.retry_max``).

    Raises:
        WlcError: the error that stopped the catch-up (said and given its exit status by
            :func:`wlcore.commands.run`, after the line saying where the replica stopped).
    """
    import signal
    import threading

    from wlcore import metrics

    out = logging.StreamHandler(sys.stdout)  # the wlr.log lines, as they are written
    out.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    lines = logging.getLogger("wlr.replica")
    lines.addHandler(out)
    lines.setLevel(logging.INFO)
    lines.propagate = False  # not a second time on stderr
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    failed: list[WlcError] = []

    def run() -> None:
        attempt, said = 0, ""
        while not done.is_set():
            try:
                rep.run(call)
                return
            except NoStartError as exc:  # nowhere to start yet (a snapshot will come): said once, tried again
                attempt += 1
                if exc.cli != said:
                    print(
                        f"{rep.name}: cannot start: {exc.cli}; tried again with backoff (replica.retry_max)", flush=True
                    )
                said = exc.cli
                done.wait(retry_delay(attempt, rep.beat(), settings().replica.retry_max))
            except WlcError as exc:  # stored in wlr.config too; the service stops
                failed.append(exc)
                done.set()
                return

    port = metrics.serve(call.metrics_port)  # refused before anything starts when taken
    print(f"{rep.name}: following {rep.master} (beat {rep.beat()} s); Ctrl-C or SIGTERM stops", flush=True)
    say_metrics(port)
    catch_up = threading.Thread(target=run, name="wlr-catch-up", daemon=True)
    catch_up.start()
    while not done.wait(1.0):
        if not catch_up.is_alive() and not rep.following():
            break  # the catch-up refused (a divergence), or following stopped at one
    rep.stop()  # each table ends the segment it is applying
    catch_up.join()
    rep.close()  # and the follow thread, when the catch-up had started it
    print(f"{rep.name}: stopped at transaction {rep.tick()}", flush=True)
    if failed:
        raise failed[0]
    return 1 if rep.status()["error"] else 0


def _say_target(call: ReplicateOptions) -> None:
    """``wlr replicate --until``: say at once what a date-only ``until`` was taken to mean, and
    print the replica's warnings (the wait for a target not published yet) as plain lines on
    stderr while it runs."""
    import warnings

    from wlcore.target import date_note

    from .errors import TargetWarning

    note = date_note(call.target, cli=True)
    if note:
        print(note, file=sys.stderr, flush=True)
    warnings.simplefilter("ignore", TargetWarning)  # said above, as the command line spells it
    out = logging.StreamHandler(sys.stderr)
    out.setFormatter(logging.Formatter("%(message)s"))
    out.setLevel(logging.WARNING)
    lines = logging.getLogger("wlr.replica")
    lines.addHandler(out)
    lines.propagate = False  # not a second time through the root handler


def build_parser() -> argparse.ArgumentParser:
    """The command line's argparse parser (its subcommands, arguments and help)."""
    parser = argparse.ArgumentParser(
        prog="wlr",
        description="Workload replay into Delta Lake replicas.",
        epilog="exit status: 0 ok; 1 the replica stopped at a failed transaction (verify: a table differs or "
        "was not compared); 2 bad input or a refused call; "
        "3 not found (no such dbfarm, database or table); status only: 4 the replica diverged from its "
        "source, 5 stale (the follower or capture stopped sending heartbeats without a clean stop), 6 the "
        "source cannot be read or refuses the replica (gone, moved, fenced)",
    )
    add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_status(sub)
    _add_replicate(sub)
    _add_log(sub)
    _add_accept(sub)
    _add_restore(sub)
    _add_promote(sub)
    _add_prune(sub)
    _add_verify(sub)
    return parser


def _add_status(sub) -> None:
    """The ``wlr status`` subcommand (``sub``: the command line's subparsers)."""
    st = subcommand(sub, "status", cmd_status, help="print the replica's state, tick, clock, lag, liveness and error")
    st.add_argument("dbfarm", help="folder holding the databases")
    st.add_argument("replica", help="the replica database's name")
    st.add_argument("--json", action="store_true", help="print a JSON object instead of text")


def _add_replicate(sub) -> None:
    """The ``wlr replicate`` subcommand (``sub``: the command line's subparsers)."""
    rp = subcommand(sub, "replicate", cmd_replicate, help="apply the master's logs (until a txn id or instant)")
    rp.add_argument("dbfarm", help="folder holding the databases")
    rp.add_argument("master", help="the master database's name")
    rp.add_argument("replica", nargs="?", help="the replica database's name (default <master>_replica)")
    rp.add_argument(
        "--until",
        help="transaction id (int; -1: before the first) or ISO-8601 instant (inclusive; a "
        "date alone is the start of that day, UTC); a target not published yet is waited "
        "for up to replica.timeout seconds",
    )
    rp.add_argument(
        "--snapshot",
        type=int,
        metavar="TXN",
        help="a new replica starts from the master's snapshot at this transaction (wlr log --snapshots); "
        "default the newest at or before --until",
    )
    rp.add_argument(
        "--level0-only",
        action="store_true",
        help="replay level-0 batches only, not the master's compacted level-1/2 batches",
    )
    rp.add_argument(
        "--logs",
        metavar="URL",
        help="read a shipped copy of the master's logs (a folder or s3://bucket/path made by wlc ship)",
    )
    rp.add_argument(
        "--source",
        metavar="NAME",
        help="read from this master or relaying replica in the dbfarm (switching keeps the replica)",
    )
    rp.add_argument(
        "--relay",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ship what this replica applied to <replica>/wlr_relay for further replicas (--source)",
    )
    _add_selection(rp)
    rp.add_argument(
        "--follow",
        action="store_true",
        help="run as a service: apply what is published, then keep following until SIGINT or "
        "SIGTERM (which stop it after the current round of segments); a line per applied "
        "segment or transaction; a failed transaction or batch is retried by itself with backoff "
        "(replica.retry_max), never skipped",
    )
    metrics_option(rp)


def _add_selection(rp: argparse.ArgumentParser) -> None:
    """``wlr replicate``'s arguments for a new replica: its tables and rows, and ``--empty``."""
    rp.add_argument(
        "--tables",
        action="append",
        metavar="PATTERN",
        help="a new replica carries only these tables (schema.table or a pattern such as 'sales.*'; "
        "repeat or separate by commas)",
    )
    rp.add_argument(
        "--where",
        action="append",
        metavar="TABLE=PREDICATE",
        help="a new replica carries only the rows of TABLE matching the Spark SQL PREDICATE "
        "(e.g. \"sales.orders=o_region = 'EU'\"); repeat for more tables",
    )
    rp.add_argument(
        "--empty",
        action="store_true",
        help="make a new replica even when --until is before the master's first transaction (it then "
        "holds none of the master's transactions); refused without it",
    )


def _add_log(sub) -> None:
    """The ``wlr log`` subcommand (``sub``: the command line's subparsers)."""
    lg = subcommand(
        sub,
        "log",
        cmd_log,
        ((ReplicaStateError, EXIT_NOT_FOUND),),  # not a master: "not found", as the command lines say it
        help="list the master's published transactions (to find a recovery target)",
        description="List a master's published transactions, oldest first: txn id, GTID, commit "
        "time (UTC), table, operation, change rows by type, batch. Exit status 0, or "
        "3 when the database is not a master or --table names a table the master "
        "never had (the nearest are named).",
    )
    lg.add_argument("dbfarm", help="folder holding the databases")
    lg.add_argument("master", help="the master database's name")
    lg.add_argument("--table", help="only this table (schema.table)")
    lg.add_argument("--operation", help="only operations starting with this (e.g. DROP, MERGE, WRITE)")
    lg.add_argument("--since", help="from this transaction id or ISO-8601 instant (inclusive)")
    lg.add_argument("--until", help="up to this transaction id or ISO-8601 instant (inclusive)")
    lg.add_argument("--json", action="store_true", help="print a JSON array instead of a table")
    lg.add_argument(
        "--snapshots",
        action="store_true",
        help="list the snapshots a new replica can start from (txn, time, batch, folder) instead",
    )
    lg.add_argument("--logs", metavar="URL", help="read a shipped copy of the logs (wlc ship) instead of the master")


def _add_verify(sub) -> None:
    """The ``wlr verify`` subcommand (``sub``: the command line's subparsers)."""
    ve = subcommand(
        sub,
        "verify",
        cmd_verify,
        help="compare every replica table with its master at the replica's last consistent tick "
        "(definition, row count, a hash of every row); exit 1 when one differs or cannot be compared",
    )
    ve.add_argument("dbfarm", help="folder holding the databases")
    ve.add_argument("replica", help="the replica database's name")


def _add_accept(sub) -> None:
    """The ``wlr accept`` subcommand (``sub``: the command line's subparsers)."""
    ac = subcommand(sub, "accept", cmd_accept, help="skip exactly the failed transaction")
    ac.add_argument("dbfarm", help="folder holding the databases")
    ac.add_argument("replica", help="the replica database's name")


def _add_restore(sub) -> None:
    """The ``wlr restore`` subcommand (``sub``: the command line's subparsers)."""
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


def _add_promote(sub) -> None:
    """The ``wlr promote`` subcommand (``sub``: the command line's subparsers)."""
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


def _add_prune(sub) -> None:
    """The ``wlr prune`` subcommand (``sub``: the command line's subparsers)."""
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


def cmd_status(args: argparse.Namespace) -> int:
    """``wlr status``: print replica ``args.replica``'s status (text, or ``--json``).

    Returns:
        the status's ``exit``: 0 healthy, 1 stopped at a failed transaction, 4 diverged, 5 stale,
        6 the source unreachable (:mod:`wlcore.health`).

    Raises:
        NotFoundError: no such dbfarm or replica.
    """
    import json

    s = open_replica(args).status()
    if args.json:
        print(json.dumps({k: shown(v) if hasattr(v, "isoformat") else v for k, v in s.items()}, indent=1))
    else:
        print(format_replica_status(s, args.dbfarm))
    return s["exit"]


def cmd_verify(args: argparse.Namespace) -> int:
    """``wlr verify``: compare replica ``args.replica`` with its master table by table and print
    the result (:meth:`wlr.Replica.verify`); nothing is written.

    Returns:
        0 every table compared and equal; 1 a table differs or could not be compared, or nothing
        could (the tables, what differs, the first differing rows and why are printed).

    Raises:
        NotFoundError: no such dbfarm or replica, or the master's folder is not there.
        ReplicaStateError: the replica is being restored, or its source refuses it.
    """
    result = open_replica(args).verify()
    print(result.render())
    return 0 if result.equal else 1


def cmd_accept(args: argparse.Namespace) -> int:
    """``wlr accept``: skip exactly the transaction replica ``args.replica`` stopped at (PostgreSQL's ALTER
    SUBSCRIPTION ... SKIP of a failed transaction) and say which; 0 ok.

    Raises:
        NotFoundError: no such dbfarm or replica. ReplicaStateError: nothing to accept.
    """
    print(f"skipped transaction {open_replica(args).accept()}")
    return 0


def cmd_replicate(args: argparse.Namespace) -> int:
    """``wlr replicate``: apply master ``args.master``'s logs to its replica up to ``--until`` and say
    where the replica is, or (``--follow``) follow as a service until SIGINT/SIGTERM.

    Returns:
        0; with ``--follow``, 1 when replay stopped at a failed transaction.

    Raises:
        ConfigError: ``--follow`` with ``--until``; a malformed ``--until`` or ``--where``.
        NotFoundError: no such dbfarm or master. ReplicationError: a transaction failed.
        ReplicationTimeout: the target was not published in time.
    """
    from .replica import Replica

    if args.follow and args.until is not None:
        raise ConfigError("--follow and --until exclude each other: follow everything, or stop at a target")
    if args.metrics_port is not None and not args.follow:
        raise ConfigError("--metrics-port serves metrics while following: add --follow")
    until = args.until
    if until is not None and until.lstrip("-").isdigit():
        until = int(until)
    tables, where = selection_args(args)
    call = ReplicateOptions.of(
        until,
        follow=bool(args.follow),
        snapshot=args.snapshot,
        compacted=not args.level0_only,
        relay=args.relay,
        tables=tables,
        where=where,
        empty=args.empty,
        metrics_port=args.metrics_port,
        service=bool(args.follow),
    )
    # names in this process's own session catalog would serve nobody; in a shared catalog (a Hive
    # metastore) they are other applications' names of the replica's tables, kept current here
    from .catalog import shared_catalog

    names = shared_catalog() and settings().replica.names
    if args.follow:
        return _follow(
            Replica(
                args.master, replica=args.replica, dbfarm=args.dbfarm, logs=args.logs, source=args.source, names=names
            ),
            call,
        )
    _say_target(call)
    rep = Replica(
        args.master, replica=args.replica, dbfarm=args.dbfarm, logs=args.logs, source=args.source, names=names
    )
    stopped_by = _catch_up(rep, call)
    if stopped_by is not None:
        again = " ".join(
            [f"wlr replicate {args.dbfarm} {args.master} {rep.name}"]
            + ([f"--until {args.until}"] if args.until is not None else [])
            + ([f"--logs {args.logs}"] if args.logs else [])
        )
        print(
            f"{rep.name}: stopped by {stopped_by} at transaction {rep.tick()} ({shown(rep.clock())}); "
            f"go on with: {again}",
            file=sys.stderr,
            flush=True,
        )
        return 128 + _SIGNALS[stopped_by]
    print(f"{rep.name}: at transaction {rep.tick()} ({shown(rep.clock())})")
    return 0


_SIGNALS = {"Ctrl-C": 2, "SIGTERM": 15}  # what stopped a catch-up -> its signal number (exit status 128 + it)


def _catch_up(rep, call: ReplicateOptions) -> str | None:
    """``rep.run(call)`` in a thread, so that Ctrl-C or SIGTERM stops it at the next safe point:
    each table ends the segment (with ``replica.collapse: false``, the transaction) it is applying,
    what landed is recorded, and nothing is left half-applied. A second Ctrl-C quits at once.

    Returns:
        None when the call ended by itself; else what stopped it (``"Ctrl-C"`` or ``"SIGTERM"``).

    Raises:
        WlcError: what the call raised.
    """
    import signal
    import threading

    stopped_by: list[str] = []
    failed: list[BaseException] = []

    def stop(signum, _frame) -> None:
        if stopped_by and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: at once (guarded says "interrupted")
        stopped_by.append("Ctrl-C" if signum == signal.SIGINT else "SIGTERM")
        rep.interrupt()

    def work() -> None:
        try:
            rep.run(call)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, raised there
            failed.append(exc)

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        worker = threading.Thread(target=work, name="wlr-catch-up", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
            if stopped_by:
                rep.interrupt()  # again: a stop asked while the call was still starting is not lost
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if failed:
        raise failed[0]
    return stopped_by[0] if stopped_by else None


def cmd_log(args: argparse.Namespace) -> int:
    """``wlr log``: print master ``args.master``'s published transactions (or, ``--snapshots``, the
    snapshots a new replica can start from) as a table or ``--json``; 0 ok.

    Raises:
        NotFoundError: no such dbfarm or master, or ``--table`` names a table the master never had.
        ConfigError: a malformed ``--since``/``--until``.
    """
    import json

    from .txlog import SNAPSHOT_COLUMNS, format_table, snapshots, transactions

    if args.snapshots:
        found, columns = snapshots(args.master, args.dbfarm, args.logs), SNAPSHOT_COLUMNS
    else:
        found = transactions(
            args.master,
            args.dbfarm,
            table=args.table,
            operation=args.operation,
            since=args.since,
            until=args.until,
            logs=args.logs,
        )
        columns = None
    if args.json:
        print(json.dumps(found, indent=1))
    elif columns:
        print(format_table(found, columns))
    elif not found:
        print(_none_found(args))
    else:
        print(format_table(found))
        starts = snapshots(args.master, args.dbfarm, args.logs)
        print(
            "snapshots at transactions "
            + ", ".join(str(s["txn"]) + ("" if s["path"] else " (the empty start)") for s in starts)
            + " (wlr log --snapshots lists them)"
        )
    return 0


def _none_found(args: argparse.Namespace) -> str:
    """The line ``wlr log`` prints when no published transaction matches: where the log ends."""
    from .txlog import last_published

    asked = " ".join(
        f"{flag} {value}"
        for flag, value in (
            ("--table", args.table),
            ("--operation", args.operation),
            ("--since", args.since),
            ("--until", args.until),
        )
        if value is not None
    )
    tick = last_published(args.master, args.dbfarm, args.logs)
    end = f"the log ends at transaction {tick}" if tick >= 0 else f"{args.master} has published no transaction yet"
    return f"no published transaction matches{' ' + asked if asked else ''}: {end}"


def cmd_restore(args: argparse.Namespace) -> int:
    """``wlr restore``: make replica table ``args.table`` again in master ``args.into`` and print what
    was restored (the other exit statuses, of the subparser's epilog, come from the error raised,
    :data:`EXIT_CODES`).

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
    rep = open_replica(args)
    done = rep.restore_table(args.table, args.into, as_=args.as_, replace=args.replace, dbfarm=rep.dbfarm)
    print("\n".join(done.lines()))
    return 0


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
    from wlcore.retention import described_retention, retention_args
    from wlcore.settings import dbfarm as resolve_dbfarm
    from wlcore.storage import Storage

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


EXIT_CODES: ExitCodes = ((NotFoundError, EXIT_NOT_FOUND), (ReplicationError, EXIT_FAILED), (RestoreError, EXIT_FAILED))
"""The exit status of each error a ``wlr`` subcommand raises (any other :class:`WlcError`: 2,
bad input or a refused call), as the parser's epilogs state: 3 not found; 1 replay stopped at a
failed transaction (raised by replication only) or a restore failed while writing (raised by
``wlr restore`` only)."""


def main(argv: list[str] | None = None) -> int:
    """Run the ``wlr`` command line with ``argv`` (default ``sys.argv[1:]``).

    Returns:
        the exit status (see the parser's epilog): a subcommand's own, or the one
        :func:`wlcore.commands.run` gives the error that stopped it (:data:`EXIT_CODES`). A
        malformed command line or ``--config`` exits 2 (``SystemExit``) before any subcommand runs.
    """
    return guarded(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    use_config(args)
    setup_terminal(args)
    return run(args, EXIT_CODES, _say)
