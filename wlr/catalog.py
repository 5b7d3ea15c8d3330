"""The consistent view of a replica: every table read at its Delta version of the last consistent
tick while the replica catches up (:class:`ConsistentView`), and its tables by name in Spark SQL:
views in the Spark session catalog at that tick (:class:`ReplicaCatalog`).

Replica table ``schema.table`` of replica ``shop_replica`` is the view
``shop_replica__schema.table``: a schema of the session catalog for each schema of each
replica (the replica's name, two underscores, the schema's name), so a master's schemas
(``sales``) and the schemas of several replicas live side by side in one session. Each view
reads its table at the Delta version of the last consistent tick (``at.<table>`` in
``wlr.config``, :mod:`wlr.catalog`) through Delta time travel: ``SELECT * FROM
delta.`<folder>` VERSION AS OF <version>``. Spark refuses writes through a view (``INSERT``,
``TRUNCATE``, ``ALTER``: "expects a table but ... is a view"), and Delta refuses ``UPDATE``,
``DELETE`` and ``MERGE`` into a time-travelled read, so the replica's tables stay read-only
through their names; ``DROP VIEW`` removes a name only, never a table, and the next
registration puts it back. A session that has the names says so in one line of its own:
its ``spark.sql`` raises :class:`wlr.ReadOnlyError` for a write Spark refused through a
replica's name (:func:`guard_writes`), as a PostgreSQL hot standby says "cannot execute
INSERT in a read-only transaction", where Spark and Delta name a view or a historical scan.

Why views in the session catalog: Spark's session catalog is the one catalog every
SparkSession with Delta has (a catalog of our own would need a JVM catalog plugin on the
class path; a Hive metastore needs a database server to be shared between processes), a
catalog *table* entry at the replica's folder would read the folder's newest version (not the
consistent tick) and would accept writes, and a view pins the version and refuses writes.

The session catalog belongs to one Spark application: the process that replays moves the
views after each round (:meth:`ReplicaCatalog.refresh`); another process registers them
with :func:`wlr.register` (they then stand at the tick read, until it registers again).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wlcore.deltalog import metadata_at
from wlcore.errors import first_line
from wlcore.names import catalog_name, quote_ident, split_name
from wlcore.session import LateSession
from wlcore.settings import settings
from wlcore.state import ReplicaState
from wlcore.storage import Storage
from wlcore.tabledef import sql_string as _string

from .book import StateBook
from .errors import ReadOnlyError, ReplicaStateError

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from polars import LazyFrame

    from .book import ReplicaApplier


# Consistent reads of a replica while it catches up: every table at its Delta version of
# the last consistent tick (``view`` and ``at.<schema.table>`` in ``wlr.config``).


class ConsistentView:
    """The read side of :class:`wlr.Replica`: its tables as of the last consistent tick.

    Args:
        book: the replica's state (``view``, ``at.<table>`` and ``version.<table>``).
        spark: the replica's session (reads go through the one given, else the active one).
        applier: the replica's applier (Delta versions of its tables).
    """

    def __init__(self, book: StateBook, spark: LateSession, applier: ReplicaApplier) -> None:
        self.book = book
        self.storage = book.storage
        self.path = book.path
        self.name = book.name
        self._spark = spark
        self._applier = applier

    def path_of(self, table: str) -> str:
        """The folder (URI) of a replica table, as Spark reads it.

        Args:
            table (str): ``"schema.table"``.

        Raises:
            ConfigError: the name is not two parts, or a part would leave the database folder.
        """
        schema, name = split_name(table)
        return self.storage.uri(Storage.join(self.path, schema, name))

    def table(self, table: str):
        """The replica table as a DataFrame (read-only use), as of the last consistent tick.

        While replay catches up, tables land segment by segment and stand at different
        transactions; this reads the Delta version each table had at the last tick where
        every table was consistent (``view`` in ``wlr.config``, versions in ``at.<table>``),
        through Delta time travel, so two tables read together are a pair of states that
        existed together on the master. A plain Spark reader gets the same view with
        ``spark.read.format("delta").option("versionAsOf", replica.versions()[name])``.

        Args:
            table (str): ``"schema.table"``.

        Returns:
            DataFrame: the table at that version (its newest when no view is recorded yet).

        Raises:
            ReplicaStateError: the table is not on the replica at that tick.
        """
        st = self.book.current()
        reader = self._spark.base().read.format("delta")
        if st.has("view"):
            if table not in st.views:
                from wlcore.databases import did_you_mean

                raise ReplicaStateError(
                    f"table {table} is not on replica {self.name} at transaction {st.view}"
                    + did_you_mean(table, sorted(self.versions()), "tables")
                )
            reader = reader.option("versionAsOf", st.views[table])
        return reader.load(self.path_of(table))

    def tables(self) -> dict:
        """Every replica table as of the last consistent tick: ``{"schema.table": DataFrame}``."""
        return {name: self.table(name) for name in sorted(self.versions())}

    def versions(self) -> dict[str, int]:
        """``{"schema.table": Delta version}`` of every replica table at the last consistent tick
        (:meth:`view_tick`); read them with ``versionAsOf``."""
        return dict(self.book.current().views)

    def view_tick(self) -> int:
        """The transaction the reads of :meth:`table` stand at (the last consistent tick)."""
        return self.book.current().view_tick

    def pin(self) -> PinnedView:
        """The last consistent tick read now, for readers without Spark (:class:`PinnedView`)."""
        return PinnedView(self.storage, self.path, self.name, self.book.current())

    def set_view(self, tick: int, done: dict[str, int]) -> None:
        """Record each table's Delta version at ``tick`` for consistent reads (``at.<table>``); the caller saves.

        A table at or before ``tick`` is at its ``version.<table>`` (set with its progress,
        so a commit still landing is not seen). A table past ``tick`` (landing faster, or
        another table failed before it) is read back at its version holding exactly
        ``tick``; when a segment spans ``tick`` there is none, and the previous view stays.

        Args:
            tick (int): the transaction the view stands at (every transaction <= ``tick`` applied).
            done (dict[str, int]): ``{table: last transaction applied}`` of the round's tables.
        """
        applier = self._applier.current()
        state = self.book.state
        view = {}
        for name, version in list(state.versions.items()):
            at = version if done.get(name, -1) <= tick else applier.tables.version_at(name, tick)
            if at is None:
                return
            if at >= 0:
                view[name] = at
        state.set_views(view)
        state.view = tick  # the caller saves


class PinnedView:
    """A replica's last consistent tick, read once from its ``wlr.config`` (``view`` and
    ``at.<table>``, written together in one atomic replace): the tick, and each table's Delta
    version and folder. Readers without Spark (polars, delta-rs) read every table at its version
    and get a pair of states that existed together on the master, also while replay moves the
    replica on, in this process or another: a version, once written, never changes.

    Make one with :func:`wlr.pin` (any process) or :meth:`wlr.Replica.pin`; pin again for a
    newer tick. Local replicas only (a replica in an object store is read through Spark).

    Args:
        storage (Storage): the storage holding the replica.
        path (str): the replica's folder.
        name (str): the replica's name.
        state (ReplicaState): its ``wlr.config`` as read.

    Attributes:
        replica (str): the replica's name.
        tick (int): the transaction every table stands at (-1: the state the replica started
            from, its start snapshot or nothing, before any transaction replayed since).

    Raises:
        ReplicaStateError: the replica is being restored (``wlr restore``), or records no
            consistent view (made by an older version and not replayed since).
    """

    def __init__(self, storage: Storage, path: str, name: str, state: ReplicaState) -> None:
        if state.state == "restoring":
            raise ReplicaStateError(
                f"replica {name} is being restored (wlr restore): its tables are not consistent; "
                "pin it when the restore has finished"
            )
        if not state.has("view"):
            raise ReplicaStateError(
                f"replica {name} records no consistent view (made by an older version); "
                f"replay it once (wlr.Replica(master, {name!r}, dbfarm).replicate()), then pin it"
            )
        if storage.os_path(path) is None:
            raise ReplicaStateError(
                f"replica {name} is in an object store ({storage.uri(path)}): pinned reads are for local "
                "replicas; read it through Spark (Replica.table(), versionAsOf)"
            )
        self._storage = storage
        self._path = path
        self.replica = name
        self.tick: int = state.view_tick
        self._versions: dict[str, int] = state.read_versions()

    def __repr__(self) -> str:
        return f"PinnedView(replica={self.replica!r}, tick={self.tick}, tables={len(self._versions)})"

    @property
    def versions(self) -> dict[str, int]:
        """``{"schema.table": Delta version}`` of every table at :attr:`tick` (a copy)."""
        return dict(self._versions)

    def path(self, table: str) -> str:
        """The local folder of replica table ``table``. A reader of it at its version
        (``pl.read_delta(path, version=)``) skips :meth:`delta_table`'s check of the table.

        Args:
            table (str): ``"schema.table"``.

        Returns:
            str: the folder's path.

        Raises:
            ReplicaStateError: the table is not on the replica at this tick.
        """
        self._version(table)
        schema, name = split_name(table)
        return self._storage.os_path(Storage.join(self._path, schema, name)) or ""

    def delta_table(self, table: str) -> DeltaTable:
        """delta-rs's ``DeltaTable`` of ``table`` at its version of this tick
        (``DeltaTable(path, version=)``), checked to be the table of this tick.

        Args:
            table (str): ``"schema.table"``.

        Returns:
            deltalake.DeltaTable: the table at that version; its data files are read where it
            is read (:meth:`polars` reads through it).

        Raises:
            ReplicaStateError: the table is not on the replica at this tick, or replay dropped it
                and made it again since (its version of that number is another state), or the
                version is gone (the table dropped, or its log cleaned up): pin again; or the
                table uses column mapping (delta-rs 1.x reads its columns as NULLs).
        """
        from deltalake import DeltaTable

        version = self._version(table)
        path = self.path(table)
        try:
            dt = DeltaTable(path, version=version)
        except Exception as exc:  # deltalake's errors have no common base
            if not os.path.isdir(os.path.join(path, "_delta_log")):
                raise self._gone(table, version, "the table is gone") from None
            raise self._gone(table, version, f"delta-rs cannot load it: {first_line(exc)}") from None
        self._check(table, version)
        meta = metadata_at(self._storage, Storage.join(self._path, *split_name(table)), version)
        if meta is not None and meta.column_mapping:
            raise ReplicaStateError(
                f"table {table} of replica {self.replica} uses column mapping, which delta-rs 1.x reads as NULLs; "
                f"read it through Spark (wlr.Replica(master, {self.replica!r}, dbfarm).table({table!r}))"
            )
        return dt

    def polars(self, table: str) -> LazyFrame:
        """The table as a polars ``LazyFrame`` at its version of this tick
        (``polars.scan_delta`` of :meth:`delta_table`): ``.collect()`` reads the files of that
        version, or fails when they are gone, never another state of the table.

        Args:
            table (str): ``"schema.table"``.

        Returns:
            polars.LazyFrame: the table at that version.

        Raises:
            ReplicaStateError: as :meth:`delta_table`.
            ImportError: polars is not installed (``pip install 'wlc-wlr[polars]'``).
        """
        try:
            import polars as pl
        except ImportError as exc:
            raise ImportError(f"PinnedView.polars() needs polars: pip install 'wlc-wlr[polars]' ({exc})") from None
        return pl.scan_delta(self.delta_table(table))

    def _version(self, table: str) -> int:
        version = self._versions.get(table)
        if version is None:
            from wlcore.databases import did_you_mean

            raise ReplicaStateError(
                f"table {table} is not on replica {self.replica} at transaction {self.tick}"
                + did_you_mean(table, sorted(self._versions), "tables")
            )
        return version

    def _check(self, table: str, version: int) -> None:
        """Check that commit ``version`` of the table belongs to this tick: a table replay
        dropped and made again since (in the middle of a round, before the view moved) starts its
        versions anew, and its commit of the same number carries the replay tag of a later
        transaction."""
        from .apply import made_again_after

        later = made_again_after(self._storage, Storage.join(self._path, *split_name(table)), version, self.tick)
        if later is not None:
            raise self._gone(table, version, f"it holds transaction {later}, made again after transaction {self.tick}")

    def _gone(self, table: str, version: int, why: str) -> ReplicaStateError:
        return ReplicaStateError(
            f"table {table} of replica {self.replica} at version {version} is not the one of transaction "
            f"{self.tick} ({why}); pin the replica again (wlr.pin({self.replica!r}, dbfarm))"
        )


log = logging.getLogger("wlr.replica")


SEPARATOR = "__"


_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# the statements that write into a table, and the name they write (Spark SQL's grammar: a name
# of up to three parts, each bare or in backticks)
_PART = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"


_WRITE = re.compile(
    r"\b(?:INSERT\s+(?:INTO|OVERWRITE)(?:\s+TABLE)?|UPDATE|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE\s+TABLE|ALTER\s+TABLE)"
    rf"\s+({_PART}(?:\s*\.\s*{_PART}){{0,2}})",
    re.IGNORECASE,
)


_VIEW_COMMENT = re.compile(
    r"^replica (?P<replica>\S+)'s table (?P<table>\S+) at Delta version \d+ \(read-only(?:; master (?P<master>\S+))?\)$"
)


def _parts(name: str) -> list[str]:
    """The parts of a Spark SQL name as :data:`_WRITE` found it (backticks taken off)."""
    parts = re.findall(_PART, name)
    return [p[1:-1].replace("``", "`") if p.startswith("`") else p for p in parts]


def read_only_error(spark: Any, statement: str, error: BaseException) -> ReadOnlyError | None:
    """The error to raise for ``statement`` when it wrote through a replica table's name.

    Args:
        spark (SparkSession): the session that ran it.
        statement (str): the Spark SQL statement.
        error (BaseException): what Spark raised for it.

    Returns:
        ReadOnlyError | None: the refusal in one line naming the replica, its table and its
        master; None when ``error`` is no analysis error (a statement that does not parse is
        its author's to fix) or the statement writes no view of a replica's (its comment,
        written by :class:`ReplicaCatalog`, says which).
    """
    from pyspark.errors import AnalysisException, ParseException

    if not isinstance(error, AnalysisException) or isinstance(error, ParseException):
        return None
    for found in _WRITE.finditer(statement):
        parts = _parts(found.group(1))
        if len(parts) == 3 and parts[0].lower() == "spark_catalog":
            parts = parts[1:]
        if len(parts) != 2:
            continue
        try:
            described = spark.catalog.getTable(".".join(quote_ident(p) for p in parts))
        except Exception:  # noqa: BLE001 (no such name: not a replica's)
            continue
        comment = _VIEW_COMMENT.match(described.description or "")
        if described.tableType != "VIEW" or comment is None:
            continue
        replica, table, master = comment.group("replica", "table", "master")
        on = f"its master {master}" if master else "its master"
        return ReadOnlyError(
            f"replica {replica} is read-only: {sql_text(*parts)} reads its table {table}; "
            f"write {table} on {on}, and replay brings the change here",
            replica,
            table,
            error,
        )
    return None


def guard_writes(spark: Any) -> None:
    """Make ``spark.sql`` raise :class:`ReadOnlyError` (instead of Spark's or Delta's message)
    for a write Spark refused through a replica table's name; every other statement, and
    every other error, is Spark's as before. Done once per session object.

    Args:
        spark (SparkSession): the session whose catalog has replica names.
    """
    if getattr(spark, "_wlr_guards_writes", False):
        return
    run = spark.sql

    @functools.wraps(run)
    def sql(sqlQuery: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return run(sqlQuery, *args, **kwargs)
        except Exception as exc:
            refusal = read_only_error(spark, sqlQuery, exc) if isinstance(sqlQuery, str) else None
            if refusal is None:
                raise
            raise refusal from None  # Spark's own is refusal.spark_error

    spark.sql = sql
    spark._wlr_guards_writes = True


def sql_schema(replica: str, schema: str) -> str:
    """The session catalog schema holding the views of replica ``replica``'s schema ``schema``.

    Args:
        replica (str): the replica's database name.
        schema (str): the schema's folder name on the replica.

    Returns:
        str: ``<replica>__<schema>``.
    """
    return f"{replica}{SEPARATOR}{schema}"


def sql_text(schema: str, view: str) -> str:
    """``schema.view`` as written in Spark SQL: a part in backticks when it does not start with a
    letter or ``_`` (``r__s.`2024```: digits alone would read as a number).

    Args:
        schema (str): the session catalog schema.
        view (str): the view's name.

    Returns:
        str: the qualified name.
    """
    return ".".join(p if _BARE.match(p) else quote_ident(p) for p in (schema, view))


@dataclass
class NamePlan:
    """The SQL names of a replica's tables: ``names`` ``{"schema.table": (sql schema, view)}``
    and ``left_out`` ``{"schema.table": reason}`` for tables that cannot have one."""

    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)


def plan_names(replica: str, tables: list[str]) -> NamePlan:
    """The view of each replica table, and the tables left out with the reason and the fix.

    A part that is not a Spark SQL identifier (letters, digits, ``_``: Spark's session catalog
    refuses others) gets no name, nor do two tables whose names differ only in case (Spark's
    names ignore case); they stay readable with :meth:`wlr.Replica.table`.

    Args:
        replica (str): the replica's database name (an identifier: :func:`wlcore.settings.check_name`).
        tables (list[str]): qualified names ``schema.table`` (:func:`wlcore.names.qualified`).

    Returns:
        NamePlan: the names and the tables left out.
    """
    plan = NamePlan()
    seen: dict[tuple[str, str], str] = {}
    for table in sorted(tables):
        schema, name = split_name(table)
        bad = [p for p in (schema, name) if not catalog_name(p)]
        if bad:
            plan.left_out[table] = (
                f"{bad[0]!r} is not a name Spark's session catalog takes (letters, digits and '_' only); "
                f"read the table with replica.table({table!r})"
            )
            continue
        sql = (sql_schema(replica, schema), name)
        key = (sql[0].lower(), sql[1].lower())
        if key in seen:
            other = seen[key]
            plan.left_out[table] = (
                f"its SQL name {sql[0]}.{sql[1]} is also table {other}'s (Spark's names ignore case); "
                f"read it with replica.table({table!r})"
            )
            continue
        seen[key] = table
        plan.names[table] = sql
    return plan


def shared_catalog() -> bool:
    """True when this process's Spark catalog is a Hive metastore other applications share:
    setting ``spark.metastore``, or ``spark.sql.catalogImplementation: hive`` in ``spark.conf``
    (the process that replays then keeps the names current for them, starting Spark to do so)."""
    cfg = settings().spark
    return bool(cfg.metastore) or str(cfg.conf.get("spark.sql.catalogImplementation", "")).lower() == "hive"


class TickRecord:
    """A replica's last consistent tick as its tick record in the Spark catalog says it (view
    ``<replica>.tick``, replaced whole by the process that replays it): how a reader in another
    Spark application pins one tick across tables in a metastore that has no multi-table swap.

    The views ``<replica>__<schema>.<table>`` move one by one after a round; the record is
    replaced first with ``settled`` false and the new tick, then once more with ``settled`` true
    when every view stands at that tick (a seqlock). A reader by name that reads the record
    before and after its queries and sees the same settled tick (:meth:`still_current`) read one
    tick. A reader that pins reads the record once and each table by its location at its
    version (:meth:`table`): a Delta version never changes, so these reads are of one tick
    whenever they run, until the table's log is cleaned up.

    Args:
        spark (SparkSession): the session whose catalog holds the record.
        replica (str): the replica's name.

    Attributes:
        replica (str): the replica's name.
        tick (int): the transaction every table stands at.
        settled (bool): every view of the replica stood at ``tick`` when the record was read.
        location (str): the replica's folder (URI); table ``s.t`` is ``<location>/s/t``.
        master (str): the replica's master.
        versions (dict[str, int]): ``{"schema.table": Delta version}`` at ``tick``.

    Raises:
        ReplicaStateError: the catalog has no tick record of that replica (no process has
            registered its names in this catalog).
    """

    def __init__(self, spark: Any, replica: str) -> None:
        self._spark = spark
        self.replica = replica
        row = self._read()
        self.tick: int = int(row.tick)
        self.settled: bool = bool(row.settled)
        self.location: str = str(row.location)
        self.master: str = str(row.master)
        self.versions: dict[str, int] = {str(k): int(v) for k, v in (row.versions or {}).items()}

    def __repr__(self) -> str:
        return f"TickRecord(replica={self.replica!r}, tick={self.tick}, settled={self.settled}, tables={len(self.versions)})"

    def _read(self) -> Any:
        from pyspark.errors import AnalysisException

        try:
            return self._spark.table(f"{quote_ident(self.replica)}.`tick`").first()
        except AnalysisException:
            raise ReplicaStateError(
                f"this Spark catalog has no tick record of replica {self.replica} (view {self.replica}.tick): "
                f"the process that replays it registers it (replica.names, spark.metastore in config), "
                f"or call wlr.register({self.replica!r}, dbfarm)"
            ) from None

    def still_current(self) -> bool:
        """Read the record again: True when it still says this tick, settled (reads by name made
        since this record was read stood at one tick)."""
        row = self._read()
        return self.settled and bool(row.settled) and int(row.tick) == self.tick

    def path(self, table: str) -> str:
        """The folder (URI) of replica table ``table``.

        Raises:
            ReplicaStateError: the table is not on the replica at this tick.
        """
        if table not in self.versions:
            from wlcore.databases import did_you_mean

            raise ReplicaStateError(
                f"table {table} is not on replica {self.replica} at transaction {self.tick}"
                + did_you_mean(table, sorted(self.versions), "tables")
            )
        return "/".join([self.location.rstrip("/"), *split_name(table)])

    def sql(self, table: str) -> str:
        """The table at this tick as Spark SQL reads it: ``delta.`<folder>` VERSION AS OF <version>``.

        Raises:
            ReplicaStateError: the table is not on the replica at this tick.
        """
        return f"delta.{quote_ident(self.path(table))} VERSION AS OF {self.versions[table]}"

    def table(self, table: str) -> Any:
        """The table at its version of this tick, as a DataFrame (read-only use).

        Raises:
            ReplicaStateError: the table is not on the replica at this tick.
        """
        path = self.path(table)
        return self._spark.read.format("delta").option("versionAsOf", self.versions[table]).load(path)


class ReplicaCatalog:
    """The views of one replica's tables in the Spark session catalog (module docstring).

    Args:
        book: the replica's state (``view`` and ``at.<table>``).
        view: the replica's consistent view (the folders of its tables).
        spark: the replica's session (the one given, else the process's).
        serve: move the names after every round (:meth:`refresh`); False: only :meth:`register` makes them.

    Attributes:
        left_out: ``{"schema.table": reason}`` of the tables the last registration gave no
            name (a name the catalog does not take, a schema of that name that is not the
            replica's, a view that could not be made); each is also said once in a warning.
    """

    def __init__(self, book: StateBook, view: ConsistentView, spark: LateSession, serve: bool) -> None:
        self.book = book
        self.view = view
        self._spark = spark
        self.serve = serve
        self._lock = threading.Lock()
        self._made: dict[str, tuple[str, str, int]] = {}  # table -> (sql schema, view, Delta version)
        self._schemas: set[str] = set()  # session catalog schemas this object made or checked
        self._seen: tuple | None = None  # (view tick, versions) the views stand at
        self._warned: set[tuple[str, str]] = set()
        self._recorded: tuple | None = None  # (view tick, versions, settled) of the tick record
        self._trouble: str | None = None  # the last failure to move the names, as said in wlr.log
        self._said = False  # the names in a shared catalog said current in wlr.log (once, and after trouble)
        self.left_out: dict[str, str] = {}
        self.shared = shared_catalog()

    def sql_name(self, table: str) -> str:
        """The Spark SQL name of replica table ``table``: ``<replica>__<schema>.<table>``.

        Args:
            table (str): ``"schema.table"``.

        Returns:
            str: the name to write in SQL, e.g. ``shop_replica__sales.orders``.

        Raises:
            ConfigError: ``table`` is not ``schema.table``.
            ReplicaStateError: the table can have no SQL name (the message says why and how to
                read it), or is not on the replica at the last consistent tick (the message names
                the nearest tables).
        """
        plan = plan_names(self.book.name, [table])
        if table in plan.left_out:
            raise ReplicaStateError(
                f"table {table} of replica {self.book.name} has no SQL name: {plan.left_out[table]}"
            )
        st = self.book.current()
        versions = st.read_versions()
        if table not in versions:
            from wlcore.databases import did_you_mean

            raise ReplicaStateError(
                f"table {table} is not on replica {self.book.name} at transaction {st.view_tick}"
                + did_you_mean(table, sorted(versions), "tables")
            )
        return sql_text(*plan.names[table])

    def register(self, spark: Any = None) -> dict[str, str]:
        """Register (or move) the views of every replica table at the last consistent tick, now.

        Tables left out (a name Spark's catalog does not take, a schema of that name that is not
        this replica's) are said in a warning each and kept in :attr:`left_out`.

        Args:
            spark (SparkSession | None): the session whose catalog gets them (None: the one given
                to the replica, else the process's; started from config when none runs).

        Returns:
            dict[str, str]: ``{"schema.table": "<replica>__<schema>.<table>"}`` of the tables registered.
        """
        from wlcore.session import active_session, starting

        session = spark or self._spark.running()
        if session is None:
            starting(f"to register the tables of replica {self.book.name}")
            session = active_session()
        with self._lock:
            self._sync(session, remake=True)
            return {t: sql_text(s, v) for t, (s, v, _n) in sorted(self._made.items())}

    def refresh(self) -> None:
        """Move the views to the last consistent tick after a round of replay, when it moved;
        nothing when names are not served (``replica.names`` off, ``wlr replicate``) or no Spark
        runs in this process (nobody could query them). Never raises: a failure is said in
        ``wlr.log`` (once while it lasts), the views stay where they were, and the next round tries
        again. In a shared catalog the first move, and the first after a failure, are said there too."""
        if not self.serve:
            return
        if self.shared:  # readers are other applications: Spark runs here to keep their names current
            if self._key() == self._seen:
                return
            session = self._spark()
        else:
            session = self._spark.running()  # no Spark here (a delta-rs follower): nobody to read
            if session is None or self._key() == self._seen:  # wlr.config read only when Spark runs
                return
        try:
            with self._lock:
                self._sync(session)
        except Exception as exc:  # noqa: BLE001 (replay goes on: names are a convenience for readers)
            text = f"the tables' SQL names were not moved to the last tick: {first_line(exc)}; tried again after the next round"
            if text != self._trouble:  # in wlr.log once, not at every beat it fails again
                self.book.log(text, logging.WARNING)
            self._trouble = text
            return
        # where an operator looks: a shared catalog's names current, the first time and after trouble
        if self.shared and (self._trouble or not self._said):
            self.book.log(
                f"SQL names current in the shared catalog: the tables' views and the tick record "
                f"{self.book.name}.tick at transaction {self._seen[0] if self._seen else 0}"
            )
            self._said = True
        self._trouble = None

    def _key(self, st: ReplicaState | None = None) -> tuple:
        """(view tick, versions) of the last consistent tick as ``st`` has it (None: ``wlr.config`` now)."""
        st = st or self.book.current()
        return (st.view_tick, tuple(sorted(st.read_versions().items())))

    def _sync(self, spark: Any, remake: bool = False) -> None:
        """Create, move and drop views so that they match the last consistent tick (``remake``:
        every view made again, also one a user changed with ``ALTER VIEW``)."""
        guard_writes(spark)
        st = self.book.current()  # one read of wlr.config: the tick, the versions and the master
        seen = self._key(st)
        versions = dict(seen[1])
        master = st.master
        plan = plan_names(self.book.name, list(versions))
        left_out = dict(plan.left_out)
        for schema in sorted({s for s, _v in plan.names.values()}):
            reason = self._ensure_schema(spark, schema)
            if reason:
                for table in [t for t, (s, _v) in plan.names.items() if s == schema]:
                    left_out[table] = reason
                    del plan.names[table]
        present = {s: self._views_in(spark, s) for s in {s for s, _v in plan.names.values()}}
        moved = [
            (table, schema, name)
            for table, (schema, name) in plan.names.items()
            if remake or self._made.get(table) != (schema, name, versions[table]) or name.lower() not in present[schema]
        ]
        gone = [t for t in self._made if t not in plan.names]
        if moved or gone:  # the seqlock's first half: readers of the names see "moving" until the end
            self._record(spark, seen, master, settled=False, remake=remake)

        def create(item: tuple[str, str, str]) -> str | None:
            table, schema, name = item
            try:
                self._create_view(spark, table, schema, name, versions[table], master)
                return None
            except Exception as exc:  # noqa: BLE001 (Py4JJavaError, AnalysisException: said, the others go on)
                return f"its view could not be made: {str(exc).splitlines()[0]}"

        # a view's analysis at a new version loads the table's Delta snapshot in the JVM (a log
        # listing and its checksum, about 25 ms; a Spark job too where the version has no
        # checksum): the tables' views are made side by side
        threads = min(len(moved), settings().replica.parallelism)
        if threads > 1:
            with ThreadPoolExecutor(threads, thread_name_prefix="wlr-names") as pool:
                failed = list(pool.map(create, moved))
        else:
            failed = [create(item) for item in moved]
        for (table, schema, name), reason in zip(moved, failed):
            if reason is not None:
                left_out[table] = reason
                self._made[table] = (schema, name, -1)  # its older view goes below: never a mix of ticks
        for table in [t for t in self._made if t not in plan.names or t in left_out]:
            schema, name, _n = self._made.pop(table)
            spark.sql(f"DROP VIEW IF EXISTS {quote_ident(schema)}.{quote_ident(name)}")
        for schema in sorted(self._schemas - {s for s, _v, _n in self._made.values()} - {self.book.name}):
            self._drop_schema(spark, schema)
        self._record(spark, seen, master, settled=True, remake=remake)
        self._seen = seen
        self.left_out = left_out
        self._warn(left_out)

    def _record(self, spark: Any, seen: tuple, master: str, settled: bool, remake: bool = False) -> None:
        """Replace the tick record, view ``<replica>.tick`` (one row: ``tick``, ``settled``,
        ``location``, ``master``, ``versions``), when it does not say ``seen`` and ``settled``
        already: one metastore call, so a reader reads the old record or the new one whole."""
        key = (*seen, settled)
        if key == self._recorded and not remake:
            return
        schema = self.book.name
        reason = self._ensure_schema(spark, schema, f"replica {schema}'s tick record (wlr)")
        if reason:
            self._say_once(
                ("(tick record)", reason), f"replica {schema}: no tick record ({schema}.tick) is kept: {reason}"
            )
            return
        tick, versions = seen
        pairs = ", ".join(f"{_string(t)}, CAST({int(v)} AS BIGINT)" for t, v in versions)
        text = (
            f"CREATE OR REPLACE VIEW {quote_ident(schema)}.`tick` COMMENT "
            f"{_string(f'replica {schema} at its last consistent tick (wlr): a reader pins it here')} AS SELECT "
            f"CAST({int(tick)} AS BIGINT) AS tick, {str(settled).lower()} AS settled, "
            f"{_string(self.view.storage.uri(self.view.path))} AS location, {_string(master)} AS master, "
            f"CAST(map({pairs}) AS MAP<STRING, BIGINT>) AS versions"
        )
        spark._jsparkSession.sql(text)
        self._recorded = key

    def _ensure_schema(self, spark: Any, schema: str, comment: str | None = None) -> str | None:
        """Make session catalog schema ``schema`` for this replica; returns why it cannot be (None: it is)."""
        if schema in self._schemas and spark.catalog.databaseExists(schema):
            return None
        comment = comment or self._comment(schema)
        if spark.catalog.databaseExists(schema):
            if spark.catalog.getDatabase(schema).description != comment:
                return (
                    f"schema {schema} of this Spark session's catalog is not replica {self.book.name}'s views; "
                    f"drop it (DROP SCHEMA {quote_ident(schema)} CASCADE) or rename it, then call replica.register()"
                )
        else:  # the location: an empty folder beside Spark's warehouse, never the replica's own
            warehouse = str(spark.conf.get("spark.sql.warehouse.dir", "spark-warehouse")).rstrip("/")
            location = f"{warehouse}/wlr_names/{schema}"
            spark.sql(
                f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)} COMMENT {_string(comment)} "
                f"LOCATION {_string(location)}"
            )
        self._schemas.add(schema)
        return None

    def _comment(self, schema: str) -> str:
        replica_schema = schema[len(self.book.name) + len(SEPARATOR) :]
        return f"replica {self.book.name}'s schema {replica_schema} at its last consistent tick (wlr)"

    @staticmethod
    def _views_in(spark: Any, schema: str) -> set[str]:
        rows = spark.sql(f"SHOW TABLES IN {quote_ident(schema)}").collect()
        return {r.tableName.lower() for r in rows if not r.isTemporary}

    def _create_view(self, spark: Any, table: str, schema: str, name: str, version: int, master: str) -> None:
        path = self.view.path_of(table)
        comment = f"replica {self.book.name}'s table {table} at Delta version {version} (read-only; master {master})"
        text = (
            f"CREATE OR REPLACE VIEW {quote_ident(schema)}.{quote_ident(name)} COMMENT {_string(comment)} "
            f"AS SELECT * FROM delta.{quote_ident(path)} VERSION AS OF {int(version)}"
        )
        from py4j.protocol import Py4JJavaError

        try:  # the command runs in the JVM: PySpark's DataFrame around it costs twice the command
            spark._jsparkSession.sql(text)
        except Py4JJavaError:
            spark.sql(text)  # again through PySpark, for Spark's own exception (AnalysisException...)
        self._made[table] = (schema, name, int(version))

    def _drop_schema(self, spark: Any, schema: str) -> None:
        """Drop an emptied schema of this replica's views (kept when someone put an object in it)."""
        self._schemas.discard(schema)
        if spark.catalog.databaseExists(schema) and not self._views_in(spark, schema):
            spark.sql(f"DROP SCHEMA IF EXISTS {quote_ident(schema)}")

    def _warn(self, left_out: dict[str, str]) -> None:
        for table, reason in sorted(left_out.items()):
            self._say_once((table, reason), f"replica {self.book.name}: table {table} has no SQL name: {reason}")

    def _say_once(self, key: tuple[str, str], text: str) -> None:
        """Log ``text`` and warn with it, once per ``key`` for this object."""
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(text)
        warnings.warn(text, stacklevel=5)
