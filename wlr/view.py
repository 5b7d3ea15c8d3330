"""Consistent reads of a replica while it catches up: every table at its Delta version of
the last consistent tick (``view`` and ``at.<schema.table>`` in ``wlr.config``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from wlcore.names import split_name
from wlcore.session import active_session
from wlcore.storage import Storage

from .book import StateBook
from .errors import ReplicaStateError

if TYPE_CHECKING:  # wlr.apply imports pyspark: `wlr status` and `wlr log` start without it
    from .apply import Applier


class ConsistentView:
    """The read side of :class:`wlr.Replica`: its tables as of the last consistent tick.

    Args:
        book: the replica's state (``view``, ``at.<table>`` and ``version.<table>``).
        spark: returns the SparkSession reads go through (None: the active one).
        applier: returns the replica's applier (Delta versions of its tables).
    """

    def __init__(self, book: StateBook, spark: Callable[[], Any], applier: Callable[[], Applier]) -> None:
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
        reader = (self._spark() or active_session()).read.format("delta")
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
        applier = self._applier()
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
