"""Selective replication: which tables a replica carries, and which rows of them.

MonetDB's roadmap asks for "selective replication by partitioning the log files based on
predicates" (its lazy logical replication manual). A replica may subscribe to some tables (``tables``: names or
``fnmatch`` patterns on ``schema.table``, e.g. ``"sales.*"``) and, per table, to the rows
matching a Spark SQL predicate (``where``: ``{"sales.orders": "o_region = 'EU'"}``), as a
PostgreSQL publication with a row filter. The predicate is applied to each row's state
after the change: a row that an update moves into it is inserted on the replica, a row
moved out of it is deleted (PostgreSQL turns such UPDATEs into INSERT and DELETE too).
Transactions of tables not carried are handled without being applied.

The replica records its selection in ``wlr.config`` (``select_tables``, ``select_where``,
JSON); a different selection needs a new replica (rows already left out cannot be brought
back from the logs).

A new selective replica's selection is settled and checked against its master before anything
is written (:func:`choose`, :func:`check_selected`, :func:`check_predicates`): the recorded
selection or the one asked or configured, predicates that parse and fit their tables, tables
that exist (as PostgreSQL's CREATE PUBLICATION refuses a table that does not exist).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wlcore import snapshots as snap
from wlcore.errors import ConfigError
from wlcore.logstore import LogStore
from wlcore.names import split_name
from wlcore.settings import settings
from wlcore.state import ReplicaState
from wlcore.storage import Storage

from .errors import ReplicaStateError

if TYPE_CHECKING:
    from wlcore.session import LateSession

_PATTERN = re.compile(r"^[^\s.]+\.[^\s.]+$")


@dataclass(frozen=True)
class Selection:
    """``tables``: patterns (empty: every table); ``where``: ``{schema.table: predicate}``."""

    tables: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, tables=None, where=None) -> "Selection":
        """Check and normalise (lower-case names, sorted) what a caller gave (PostgreSQL's
        publication table list and row filters).

        Args:
            tables (str | list[str] | None): ``schema.table`` names or ``fnmatch`` patterns
                (``"sales.*"``); None or empty: every table.
            where (dict[str, str] | None): ``{schema.table: Spark SQL predicate}``: the rows a table
                carries; None: every row.

        Returns:
            Selection: the normalised selection.

        Raises:
            ConfigError: a pattern is not ``schema.table`` (wildcards allowed), a ``where``
                key names a table the patterns leave out, or a predicate is empty.
        """
        if isinstance(tables, str):
            tables = [tables]
        pats = []
        for p in tables or ():
            p = str(p).strip().lower()
            if not _PATTERN.match(p):
                raise ConfigError(
                    f"tables: {p!r} is not a schema.table name or pattern (e.g. 'sales.*', 'hr.employees')"
                )
            pats.append(p)
        preds = []
        for name, pred in dict(where or {}).items():
            name = str(name).strip().lower()
            if not _PATTERN.match(name) or any(c in name for c in "*?["):
                raise ConfigError(f"where: {name!r} is not a schema.table name (one table a predicate)")
            if not str(pred or "").strip():
                raise ConfigError(
                    f"where: the predicate of {name} is empty; give a Spark SQL condition such as \"o_region = 'EU'\""
                )
            if pats and not any(fnmatch.fnmatchcase(name, p) for p in pats):
                raise ConfigError(f"where: {name} is not among tables={pats}; add it there or drop its predicate")
            preds.append((name, str(pred).strip()))
        return cls(tuple(sorted(set(pats))), tuple(sorted(preds)))

    @property
    def everything(self) -> bool:
        """True when the replica carries every table and every row (no selection)."""
        return not self.tables and not self.where

    def wants(self, table: str) -> bool:
        """True when the replica carries ``table`` (PostgreSQL's publication table list).

        Args:
            table (str): ``schema.table``, any case.
        """
        t = table.lower()
        return not self.tables or any(fnmatch.fnmatchcase(t, p) for p in self.tables)

    def predicate(self, table: str) -> str | None:
        """The row filter of ``table`` (PostgreSQL's publication row filter).

        Args:
            table (str): ``schema.table``, any case.

        Returns:
            str | None: the Spark SQL predicate; None when every row is carried.
        """
        return dict(self.where).get(table.lower())

    def to_state(self) -> dict[str, Any]:
        """The selection as ``wlr.config`` records it (:class:`wlcore.state.ReplicaState`'s
        fields): ``select_tables`` (a list) and ``select_where`` (a dict), each empty when not
        selected (:meth:`from_state` reads it)."""
        return {"select_tables": list(self.tables), "select_where": dict(self.where)}

    @classmethod
    def from_state(cls, state: ReplicaState) -> Selection:
        """The selection a replica's ``wlr.config`` records (none recorded: everything).

        Args:
            state (ReplicaState): the replica's state.

        Raises:
            ConfigError: the recorded values were edited into something malformed.
        """
        try:
            return cls.of(state.select_tables, state.select_where)
        except ConfigError as exc:
            raise ConfigError(
                f"the replica's recorded selection (select_tables, select_where in wlr.config) is damaged ({exc}); "
                "make a new replica"
            ) from None

    def describe(self) -> str:
        """The selection for messages: ``every table, every row``, or ``tables sales.*; sales.orders WHERE ...``."""
        if self.everything:
            return "every table, every row"
        parts = [f"tables {', '.join(self.tables)}" if self.tables else "every table"]
        parts += [f"{t} WHERE {p}" for t, p in self.where]
        return "; ".join(parts)


def check_same(recorded: Selection, asked: Selection, replica: str) -> None:
    """Refuse an existing replica asked for another selection (rows it left out cannot be
    brought back from the logs).

    Args:
        recorded (Selection): the selection the replica's ``wlr.config`` records.
        asked (Selection): the selection asked for now.
        replica (str): the replica's name, for the message.

    Raises:
        ReplicaStateError: the two differ.
    """
    if recorded != asked:
        raise ReplicaStateError(
            f"replica {replica!r} carries {recorded.describe()}, not {asked.describe()}: rows it left out cannot be "
            f"brought back from the logs; make a new replica with the new selection "
            f"(wlr.replicate(..., replica='<new name>', tables=..., where=...))",
            cli=f"replica {replica!r} carries {recorded.describe()}, not {asked.describe()}; make a new replica "
            "with the new selection (wlr replicate <dbfarm> <master> <new name> --tables ... --where ...)",
        )


def choose(state: ReplicaState | None, asked: Selection | None, replica: str, spark: LateSession) -> Selection:
    """Settle a replica's selection: the recorded one, or for a new replica the one asked or configured.

    Args:
        state (ReplicaState | None): the replica's state (None, or state ``restoring``: a new replica).
        asked (Selection | None): what ``replicate(tables=, where=)`` asks for (None: nothing).
        replica (str): the replica's name, for messages.
        spark (LateSession): the replica's session (made when first needed) whose SQL parser checks a new
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


def check_selected(selection: Selection | None, store: LogStore, start_path: str) -> None:
    """Refuse a new selective replica that names a table (or pattern) that neither a published
    transaction nor its start snapshot knows, naming the nearest.

    Args:
        selection (Selection | None): the replica's selection (None: every table).
        store (LogStore): the source's log folder (its storage holds the snapshots too).
        start_path (str): the folder of the snapshot the replica starts from ("": an empty start).

    Raises:
        NotFoundError: a table or pattern matches nothing the master has.
    """
    if selection is None or not (selection.tables or selection.where):
        return
    from .txlog import check_tables, known_tables

    known = known_tables(store, start_path)
    where = f"in master {store.database!r} (its snapshot and published transactions)"
    check_tables(selection.tables, known, where)
    check_tables([t for t, _p in selection.where], known, where)


def check_predicates(selection: Selection | None, spark: LateSession, storage: Storage, start_path: str) -> None:
    """Refuse a ``where`` predicate that does not fit its table in the snapshot a new replica
    starts from (an unknown column, a type error), before anything is written.

    Args:
        selection (Selection | None): the replica's selection (None: every row).
        spark (LateSession): the replica's session (made when first needed) that analyses the predicates.
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
