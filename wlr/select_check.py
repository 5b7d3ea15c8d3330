"""A selective replica's selection settled and checked against its master before anything is
written (:mod:`wlr.select`): the recorded selection or the one asked or configured, predicates
that parse and fit their tables, tables that exist (as PostgreSQL's CREATE PUBLICATION refuses
a table that does not exist).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wlcore import snapshots as snap
from wlcore.errors import ConfigError
from wlcore.names import split_name
from wlcore.replica_state import ReplicaState
from wlcore.settings import settings
from wlcore.storage import Storage

from .select import Selection, check_same


def choose(state: ReplicaState | None, asked: Selection | None, replica: str, spark: Callable[[], Any]) -> Selection:
    """Settle a replica's selection: the recorded one, or for a new replica the one asked or configured.

    Args:
        state (ReplicaState | None): the replica's state (None, or state ``restoring``: a new replica).
        asked (Selection | None): what ``replicate(tables=, where=)`` asks for (None: nothing).
        replica (str): the replica's name, for messages.
        spark (Callable[[], SparkSession]): gives the session whose SQL parser checks a new
            replica's predicates (called only when there are predicates: a set-up without them
            starts no Spark session).

    Returns:
        Selection: the selection replay uses.

    Raises:
        ReplicaStateError: an existing replica is asked for another selection than it records.
        ConfigError: a new replica's predicate does not parse.
    """
    if state is not None and state.state != "restoring":
        recorded = Selection.from_state(state)
        if asked is not None:
            check_same(recorded, asked, replica)
        return recorded
    cfg = settings().replica
    chosen = asked or Selection.of(cfg.tables or None, cfg.where or None)
    if not chosen.where:
        return chosen
    parser = spark()._jsparkSession.sessionState().sqlParser()
    for table, pred in chosen.where:  # parsed now: a typo fails before anything is written
        try:
            parser.parseExpression(pred)
        except Exception as exc:  # noqa: BLE001 (Py4JJavaError: ParseException)
            first = str(exc).split("ParseException:", 1)[-1].strip().splitlines()[0]
            raise ConfigError(
                f"where: the predicate of {table} does not parse ({first}); "
                "give a Spark SQL condition such as \"o_region = 'EU'\""
            ) from None
    return chosen


def check_selected(selection: Selection | None, storage: Storage, logs: str, master: str, start_path: str) -> None:
    """Refuse a new selective replica that names a table (or pattern) that neither a published
    transaction nor its start snapshot knows, naming the nearest.

    Args:
        selection (Selection | None): the replica's selection (None: every table).
        storage (Storage): the storage holding the source's logs and snapshots.
        logs (str): the log folder read.
        master (str): the master's name.
        start_path (str): the folder of the snapshot the replica starts from ("": an empty start).

    Raises:
        NotFoundError: a table or pattern matches nothing the master has.
    """
    if selection is None or not (selection.tables or selection.where):
        return
    from .txlog import check_tables, known_tables

    known = known_tables(storage, logs, master, start_path)
    where = f"in master {master!r} (its snapshot and published transactions)"
    check_tables(selection.tables, known, where)
    check_tables([t for t, _p in selection.where], known, where)


def check_predicates(selection: Selection | None, spark: Callable[[], Any], storage: Storage, start_path: str) -> None:
    """Refuse a ``where`` predicate that does not fit its table in the snapshot a new replica
    starts from (an unknown column, a type error), before anything is written.

    Args:
        selection (Selection | None): the replica's selection (None: every row).
        spark (Callable[[], SparkSession]): gives the session that analyses the predicates.
        storage (Storage): the storage holding the snapshot.
        start_path (str): the snapshot's folder ("": an empty start, nothing to check).

    Raises:
        ConfigError: a predicate does not fit; the message names the table's columns.
    """
    if selection is None or not selection.where or not start_path:
        return
    from pyspark.sql import functions as F

    session = spark()
    tables = {n.lower(): n for n in snap.read(storage, start_path).tables}
    for table, pred in selection.where:
        if table not in tables:
            continue  # created later: checked when it is applied
        schema, name = split_name(tables[table])
        uri = storage.uri(Storage.join(start_path, schema, name))
        try:
            session.read.format("delta").load(uri).filter(F.expr(pred)).schema  # noqa: B018 (resolving the schema analyses the predicate)
        except Exception as exc:  # noqa: BLE001 (AnalysisException: the caller's predicate)
            raise ConfigError(
                f"where: the predicate of {table} does not fit the table "
                f"({str(exc).splitlines()[0]}); correct it (columns: "
                f"{', '.join(session.read.format('delta').load(uri).columns)})"
            ) from None
