"""The catalog calls of a master: its schemas and tables in the Spark session catalog (:mod:`wlcore.catalog`)."""

from __future__ import annotations

import logging
import os
import time
import warnings
from typing import Any, Callable

from wlcore.catalog import create_schema, register, warehouse_folder, warehouse_schemas
from wlcore.storage import Storage

log = logging.getLogger("wlc.catalog")


class MasterCatalog:
    """The catalog calls of one :class:`wlc.Master`: its schema folders in the Spark session catalog.

    Args:
        spark: returns the Spark session (called when a catalog call needs it: Spark starts late).
        storage: the storage of the dbfarm.
        path: the database folder.
        dbname: the database name (in warnings).
        skip_schemas: returns the folders of the database that are not schemas (the log folder
            when it sits inside the database).
        check_every: returns the seconds between two looks at Spark's warehouse folder (at least 1).
    """

    def __init__(
        self,
        spark: Callable[[], Any],
        storage: Storage,
        path: str,
        dbname: str,
        skip_schemas: Callable[[], set[str]],
        check_every: Callable[[], float],
    ):
        self._spark = spark
        self.storage = storage
        self.path = path
        self.dbname = dbname
        self._skip_schemas = skip_schemas
        self._check_every = check_every
        self._known_schemas: set[str] | None = None  # schemas in Spark's warehouse folder already seen
        self._warehouse: str | None = None
        self._schemas_checked = float("-inf")  # time.monotonic() of that look

    def create_schema(self, schema: str) -> str:
        """Register SQL schema ``schema`` located at ``<db>/<schema>`` in the session catalog.

        Tables made with ``CREATE TABLE <schema>.<t>`` then live in the master's layout
        and ``DROP TABLE`` removes their folder (which capture records as a drop).

        Args:
            schema (str): the schema's name, a plain identifier.

        Returns:
            str: ``schema``.

        Raises:
            ConfigError: ``schema`` is not a plain identifier, or this session's catalog
                has a schema of that name elsewhere.
        """
        return create_schema(self._spark(), self.storage, self.path, schema)

    def register(self) -> dict[str, str]:
        """Register every schema folder of the database, and the Delta tables in them, in
        this process's session catalog (:mod:`wlcore.catalog`); :func:`wlc.master` and
        :func:`wlc.attach` call it. Call it again to see schemas and tables other
        processes made since. Returns ``{schema folder: reason}`` for folders left out, and
        ``{"schema.table": reason}`` for tables whose names the session catalog does not take.
        """
        spark = self._spark()
        left_out = register(spark, self.storage, self.path, self._skip_schemas())
        self._warehouse = warehouse_folder(spark)
        self._known_schemas = warehouse_schemas(self._warehouse)
        return left_out

    def check_schemas(self) -> None:
        """Warn, once each, about schemas made in Spark's own warehouse while capturing (a
        ``CREATE SCHEMA`` without a location: its tables would not be captured)."""
        if (
            self._known_schemas is None
            or self._warehouse is None
            or time.monotonic() - self._schemas_checked < max(self._check_every(), 1.0)
        ):
            return
        self._schemas_checked = time.monotonic()
        found = warehouse_schemas(self._warehouse)
        for name in sorted(found - self._known_schemas):
            text = (
                f"schema {name!r} was made at {os.path.join(self._warehouse, name + '.db')}, outside master "
                f"{self.dbname!r}: its tables are not captured; make master schemas with "
                f"Master.create_schema({name!r}) (e.g. wlc.current().create_schema({name!r})) or "
                f"CREATE SCHEMA ... LOCATION '<db>/{name}'"
            )
            log.warning(text)
            warnings.warn(text, stacklevel=2)
        self._known_schemas |= found
