"""Command line of wlc (the ``wlc`` command, or ``python -m wlc``): ``master``, ``capture``, ``status``,
the log's life cycle: ``snapshot``, ``compact``, ``prune``, and ``ship``. One function ``cmd_<name>`` per
subcommand; the errors they raise become messages and exit codes in :func:`wlcore.commands.run`."""

from __future__ import annotations

import argparse
import signal
import threading

from wlcore.commands import guarded, metrics_option, retention_option, run, say_metrics, setup_terminal, subcommand
from wlcore.health import format_status
from wlcore.promotion import log_name
from wlcore.settings import add_common, dbfarm as resolve_dbfarm, use_config
from wlcore.utc import utcnow


def _names(parser: argparse.ArgumentParser, dbname: str = "the master database's name") -> None:
    """A subcommand's two positional arguments: the dbfarm and the database (help ``dbname``)."""
    parser.add_argument("dbfarm", help="folder holding the databases")
    parser.add_argument("dbname", help=dbname)


def build_parser() -> argparse.ArgumentParser:
    """The command line's argparse parser (its subcommands, arguments and help)."""
    parser = argparse.ArgumentParser(
        prog="wlc",
        description="Workload capture for Delta Lake masters.",
        epilog="exit status: 0 ok; 2 bad input or a refused call; 3 not found (no such dbfarm, database or "
        "table); status only: 5 capture is stale (no heartbeat for capture.stale_after seconds without a "
        "clean stop)",
    )
    add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    ma = subcommand(
        sub,
        "master",
        cmd_master,
        help="put a database in master mode (MonetDB's CALL wlc.master()); then run wlc capture",
        description="Put a database of an existing dbfarm in master "
        "mode: write its wlc.config and snapshot the tables it holds. A deliberate step, done once; "
        "wlc capture then captures it. A database folder that does not exist yet is made (empty).",
    )
    ma.add_argument("dbfarm", help="folder holding the databases (must exist)")
    ma.add_argument("dbname", help="the database's name (a folder in the dbfarm)")
    ma.add_argument("--logs", help="log folder (default <dbfarm>/<dbname>/wlc_logs)")
    ma.add_argument("--beat", type=float, help="heartbeat in seconds (default master.beat of config, 300)")
    cap = subcommand(
        sub, "capture", cmd_capture, help="capture a master's commits until interrupted (wlc master makes one)"
    )
    _names(cap, "the master database's name (made a master by wlc master)")
    cap.add_argument("--beat", type=float, help="set the heartbeat in seconds")
    metrics_option(cap)
    st = subcommand(
        sub, "status", cmd_status, help="print a master's state, tick, logs, heartbeat and capture liveness"
    )
    _names(st)
    st.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    sn = subcommand(
        sub,
        "snapshot",
        cmd_snapshot,
        help="take a snapshot at the last published transaction while capture goes on "
        "(flushes first when no other process captures)",
    )
    _names(sn)
    co = subcommand(
        sub, "compact", cmd_compact, help="merge published batches into level-1 and level-2 batches, as far as due"
    )
    _names(co)
    co.add_argument("--level1", help="override master.compact.level1: a duration ('1h') or '<n> batches'")
    co.add_argument("--level2", help="override master.compact.level2: a duration ('1d') or '<n> batches'")
    _add_prune(sub)
    _add_ship(sub)
    return parser


def _add_ship(sub) -> None:
    """The ``wlc ship`` subcommand (``sub``: the command line's subparsers)."""
    sh = subcommand(sub, "ship", cmd_ship, help="copy published batches and snapshots to another folder or an S3 URL")
    _names(sh)
    sh.add_argument("url", help="destination: a folder, or s3://bucket/path (storage.s3 in config)")
    sh.add_argument("--follow", action="store_true", help="keep shipping whatever is published until interrupted")
    retention_option(sh, "the copy's own retention, stored with it")
    metrics_option(sh)


def cmd_ship(args: argparse.Namespace) -> int:
    """``wlc ship``: copy what master ``args.dbname`` published to ``args.url``, once or (``--follow``) until
    SIGINT/SIGTERM, and print what was shipped.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``dbname``, ``url``, ``follow``,
            ``retention`` (the copy's own, stored with it first).

    Returns:
        int: 0 (the pass, or the following, ended without error).

    Raises:
        ConfigError: a malformed ``--retention`` (nothing is shipped).
        NotFoundError: no such dbfarm or database.
        MasterStateError: not a master.
        WlcError: a copy failed while following (the shipper's error, re-raised).
        ConfigError: ``--metrics-port`` without ``--follow``; MetricsError: the port is malformed or taken.
    """
    from wlcore import metrics
    from wlcore.databases import Dbfarm
    from wlcore.errors import ConfigError
    from wlcore.retention import retention_args
    from wlcore.ship import Shipper, add_copy
    from wlcore.storage import Storage

    if args.metrics_port is not None and not args.follow:
        raise ConfigError("--metrics-port serves metrics while following: add --follow")
    retention = retention_args(args.retention)
    farm = resolve_dbfarm(args.dbfarm)
    args.dbname = Dbfarm(farm).require_master(args.dbname)  # a promoted master by folder or database name
    port = metrics.serve(args.metrics_port) if args.follow else None  # a taken port: refused before copying
    path = Storage.join(farm, args.dbname)
    shipper = Shipper(
        Storage.of(farm), path, log_name(Storage.of(farm), path, args.dbname), args.url, retention=retention
    )
    report = shipper.once()
    shipper.kwargs.pop("retention")  # stored: the following passes leave it as it is
    add_copy(Storage.of(farm), path, args.url)  # wlc prune prunes it too
    print("\n".join(report.lines()), flush=True)
    if not args.follow:
        return 0
    signal.signal(signal.SIGTERM, lambda *_: shipper.stop())
    signal.signal(signal.SIGINT, lambda *_: shipper.stop())
    print(f"shipping {args.dbname} to {shipper.to} as batches are published; Ctrl-C stops", flush=True)
    say_metrics(port)
    shipper.follow(background=False)
    print("\n".join(shipper.report.lines()))
    if shipper.error is not None:
        raise shipper.error
    return 0


def _lifecycle(args: argparse.Namespace):
    """The :class:`wlc.lifecycle.Lifecycle` of master ``args.dbname`` and its dbfarm folder; a database
    that is not a master is refused here (an error naming what it is and the fix) before Spark starts."""

    from .lifecycle import Lifecycle

    farm = resolve_dbfarm(args.dbfarm)
    cycle = Lifecycle.of(farm, args.dbname)  # a promoted master's batches carry its database's name
    cycle.config()
    return cycle, farm


def cmd_snapshot(args: argparse.Namespace) -> int:
    """``wlc snapshot``: snapshot master ``args.dbname`` at its last published transaction (flushing first
    when no other process captures it) and print where.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``dbname``.

    Returns:
        int: 0.

    Raises:
        NotFoundError: no such dbfarm or database.
        MasterStateError: not a master.
    """
    import warnings

    from wlcore.errors import MasterStateError
    from wlcore.session import active_session

    from .master import Master

    cycle, farm = _lifecycle(args)
    m = Master(args.dbname, dbfarm=farm, capture=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.start()
    except MasterStateError:  # another process captures: the snapshot ends at its last published batch
        start = cycle.snapshot(active_session())
        print(f"capture runs in another process: snapshot at its last published transaction {start.txn}")
    else:
        try:
            start = m.snapshot()
        finally:
            m.close()
    print(f"snapshot at transaction {start.txn} ({start.time.isoformat() if start.time else 'start'}): {start.path}")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    """``wlc compact``: merge master ``args.dbname``'s published batches into level-1/2 batches as far as
    due; print what was made, or when the next window closes.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``dbname``, ``level1``
            and ``level2`` (override ``master.compact``; None: config's).

    Returns:
        int: 0.

    Raises:
        ConfigError: a malformed ``--level1``/``--level2``.
        NotFoundError: no such dbfarm or database.
        MasterStateError: not a master.
    """
    from wlcore.session import active_session
    from wlcore.settings import every

    cycle, _ = _lifecycle(args)
    chosen = {1: every(args.level1, "--level1", ("batches",)), 2: every(args.level2, "--level2", ("batches",))}
    chosen = {k: v for k, v in chosen.items() if v is not None}
    made = cycle.compact(active_session(), chosen, print)
    if made:
        print(f"{len(made)} compacted batches made")
    else:
        print("nothing to compact yet: " + "; ".join(cycle.next_due(chosen) or ["compaction is off (master.compact)"]))
    return 0


def cmd_master(args: argparse.Namespace) -> int:
    """``wlc master``: put database ``args.dbname`` in master mode (no capture; MonetDB's
    ``CALL wlc.master()``) and say what was done; a master already is left as it is.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``dbname``, ``logs``, ``beat``.

    Returns:
        int: 0.

    Raises:
        ConfigError: a bad ``--beat`` (before anything is made).
        NotFoundError: no such dbfarm.
        MasterStateError: the database is a replica.
    """
    from wlcore.databases import MASTER, PLAIN, REPLICA, Dbfarm
    from wlcore.settings import number
    from wlcore.state import MasterState, read_master_state
    from wlcore.storage import Storage
    from wlcore.utc import utc_iso

    from .master import Master

    farm = resolve_dbfarm(args.dbfarm)
    beat = number(args.beat, "--beat") if args.beat is not None else None  # before anything is made
    dbs = Dbfarm(farm)
    kind = dbs.kind(args.dbname)
    if kind == REPLICA:
        dbs.require_master(args.dbname)  # a replica never becomes a master: the error names what it is
    if kind == MASTER:
        cfg = read_master_state(dbs.storage, Storage.join(farm, args.dbname)) or MasterState()
        created, tick = utc_iso(cfg.created) if cfg.created else "-", cfg.tick if cfg.has("tick") else "-"
        print(
            f"{args.dbname} is already a master (since {created}, last published transaction "
            f"{tick}); nothing changed. Capture it with: wlc capture {farm} {args.dbname}"
        )
        return 0
    m = Master(args.dbname, dbfarm=farm, logs=args.logs, capture=False)
    tables = m.create(beat)
    made = "made the empty database folder; " if kind != PLAIN else ""
    made += f"made the log folder {m.setup.made_logs}; " if m.setup.made_logs else ""
    held = (
        f"{tables} table{'s' if tables != 1 else ''} in its first snapshot"
        if tables
        else "no table yet (replicas start empty)"
    )
    print(
        f"{args.dbname} is a master now: {made}{held}, logs in {m.logs}, beat {m.beat_seconds:g} s.\n"
        f"Capture it with: wlc capture {farm} {args.dbname}"
    )
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    """``wlc capture``: capture existing master ``args.dbname`` until SIGINT/SIGTERM, then publish what
    is open and say where capture stopped.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``dbname``, ``beat``.

    Returns:
        int: 0 after a clean stop.

    Raises:
        ConfigError: a bad ``--beat`` (before anything starts).
        NotFoundError: no such dbfarm or database.
        MasterStateError: not a master (only ``wlc master`` makes one), or captured elsewhere.
    """
    import warnings
    from datetime import timedelta

    from wlcore.databases import Dbfarm
    from wlcore.settings import number

    from .master import Master

    farm = resolve_dbfarm(args.dbfarm)
    beat = number(args.beat, "--beat") if args.beat is not None else None  # before anything is made
    args.dbname = Dbfarm(farm).require_master(args.dbname)  # only wlc master (or wlc.master()) makes a master
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*already in master mode.*")  # it is: that is the point
        m = Master(args.dbname, dbfarm=farm, metrics_port=args.metrics_port).start()
    if beat is not None:
        m.beat(beat)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    b = m.beat_seconds
    soon = (utcnow() + timedelta(seconds=b)).strftime("%H:%M:%SZ")
    first = (
        "each transaction is published as its own batch at once"
        if b == 0
        else f"the first batch is published {b:g} s after the first commit captured (about {soon} for a commit "
        f"made now), and so each batch; change it with --beat SECONDS (0: a batch per transaction)"
    )
    print(f"capturing {m.path} into {m.logs} (beat {b:g} s): {first}; Ctrl-C stops", flush=True)
    say_metrics(m.metrics_port)
    done.wait()
    m.flush()
    m.close()
    print(f"capture stopped at transaction {m.tick()}")  # flushed: the last published is the last logged
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``wlc status``: print master ``args.dbname``'s status (text, or ``--json``); reads state files
    only, never Spark.

    Args:
        args (argparse.Namespace): the parsed command line: ``dbfarm``, ``dbname``, ``json``.

    Returns:
        int: 0, or 5 (``EXIT_STALE``) when capture is stale.

    Raises:
        NotFoundError: no such dbfarm or database.
        MasterStateError: not a master.
    """
    import json

    from wlcore.health import status

    s = status(args.dbname, args.dbfarm)
    if args.json:
        print(json.dumps(s, indent=1))
    else:
        print(format_status(s))
    return s["exit"]


def main(argv: list[str] | None = None) -> int:
    """Run the ``wlc`` command line.

    Args:
        argv (list[str] | None): the arguments (None: ``sys.argv[1:]``).

    Returns:
        int: the exit status (see the parser's epilog): a subcommand's own, or the one
        :func:`wlcore.commands.run` gives the error that stopped it. A malformed command line
        or ``--config`` exits 2 (``SystemExit``) before any subcommand runs.
    """
    return guarded(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    use_config(args)
    setup_terminal(args)
    return run(args)


def _add_prune(sub) -> None:
    """Add the ``wlc prune`` subcommand: the master's own folder and its shipped copies pruned by
    retention (:mod:`wlc.lifecycle` and :func:`wlcore.ship.prune_copy` do it).

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
    from wlcore.ship import ShipError, dest_root, known_copies, prune_copy
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
