"""The catalog calls of a master: its schemas and tables in the Spark session catalog (:mod:`wlcore.catalog`)."""
from __future__ import annotations

import logging
import os
import time
import warnings

from wlcore.catalog import create_schema, register, warehouse_folder, warehouse_schemas

log = logging.getLogger("wlc.catalog")


class MasterCatalog:
    """The catalog calls of :class:`wlc.Master` (a mixin: the master has ``spark``,
    ``storage``, ``path``, ``dbname``, ``poll_interval`` and ``_skip_schemas``)."""

    def create_schema(self, schema: str) -> str:
        """Register SQL schema ``schema`` located at ``<db>/<schema>`` in the session catalog.

        Tables made with ``CREATE TABLE <schema>.<t>`` then live in the master's layout
        and ``DROP TABLE`` removes their folder (which capture records as a drop).
        Returns the schema name.

        Raises:
            ConfigError: ``schema`` is not a plain identifier, or this session's catalog
                has a schema of that name elsewhere.
        """
        return create_schema(self.spark, self.storage, self.path, schema)

    def register_catalog(self) -> dict[str, str]:
        """Register every schema folder of the database, and the Delta tables in them, in
        this process's session catalog (:mod:`wlcore.catalog`); :func:`wlc.master` and
        :func:`wlc.attach` call it. Call it again to see schemas and tables other
        processes made since. Returns ``{schema folder: reason}`` for folders left out.
        """
        left_out = register(self.spark, self.storage, self.path, self._skip_schemas())
        self._warehouse = warehouse_folder(self.spark)
        self._known_schemas = warehouse_schemas(self._warehouse)
        return left_out

    def _check_schemas(self) -> None:
        """Warn, once each, about schemas made in Spark's own warehouse while capturing (a
        ``CREATE SCHEMA`` without a location: its tables would not be captured)."""
        if self._known_schemas is None or time.monotonic() - self._schemas_checked < max(self.poll_interval, 1.0):
            return
        self._schemas_checked = time.monotonic()
        found = warehouse_schemas(self._warehouse)
        for name in sorted(found - self._known_schemas):
            text = (f"schema {name!r} was made at {os.path.join(self._warehouse, name + '.db')}, outside master "
                    f"{self.dbname!r}: its tables are not captured; make master schemas with "
                    f"Master.create_schema({name!r}) (e.g. wlc.current().create_schema({name!r})) or "
                    f"CREATE SCHEMA ... LOCATION '<db>/{name}'")
            log.warning(text)
            warnings.warn(text, stacklevel=2)
        self._known_schemas |= found

