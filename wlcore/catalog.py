"""A master's schemas and tables in the Spark session catalog, at their folders.

Spark's own warehouse is elsewhere: a plain ``CREATE SCHEMA sales`` puts the schema (and
every table made in it) under ``spark-warehouse/``, where capture never looks. Registering
each schema folder ``<db>/<schema>`` as a catalog schema located there makes the obvious
way work: ``CREATE TABLE sales.orders ...``, ``spark.table("sales.orders")`` and ``DROP
TABLE sales.orders`` act on the master's folders. Delta tables already in those folders
(made by path, or by another process) are registered as *managed* tables, as a table made
by name in such a schema is, so ``DROP TABLE`` removes the folder and capture records the
drop; Spark's SQL registers an existing folder only as an external table, so the table type
is changed through Spark's session catalog (the Java API; when that fails the table stays
external and a warning says ``DROP TABLE`` would keep its folder).

The session catalog belongs to one Spark application: every process that writes master
tables by name calls :func:`wlc.master` or :func:`wlc.attach` (which call :func:`register`).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
import warnings

from .deltalog import RESERVED, is_delta_table
from .errors import ConfigError
from .names import catalog_name, qualified, quote_ident
from .settings import check_name
from .storage import Storage
from .tabledef import sql_string as _lit

log = logging.getLogger("wlc.catalog")


def local_path(uri: str) -> str | None:
    """The local path a ``file:`` URI (percent-decoded) or a plain path (made absolute) names.

    Args:
        uri (str): a ``file:`` URI, a plain path, or a URL of another scheme.

    Returns:
        str | None: the absolute path without a trailing ``/``; None for another scheme (``s3a://``...).
    """
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    return (urllib.parse.unquote(parsed.path) if parsed.scheme else os.path.abspath(uri)).rstrip("/") or "/"


def _same_place(a: str, b: str) -> bool:
    la, lb = local_path(a), local_path(b)
    return la == lb if la is not None else a.rstrip("/") == b.rstrip("/")


def schema_location(spark, schema: str) -> str | None:
    """Where the session catalog has schema ``schema``.

    Args:
        spark (SparkSession): the session whose catalog is asked.
        schema (str): the schema's name.

    Returns:
        str | None: its location URI; None when the catalog has no such schema.
    """
    if not spark.catalog.databaseExists(schema):
        return None
    return spark.catalog.getDatabase(schema).locationUri


def create_schema(spark, storage: Storage, db_path: str, schema: str) -> str:
    """Register ``schema`` in the session catalog at ``<db_path>/<schema>``.

    Args:
        spark (SparkSession): the session whose catalog gets it.
        storage (Storage): the storage holding the database (gives the location's URI).
        db_path (str): the database's folder.
        schema (str): the schema's name, a plain identifier.

    Returns:
        str: ``schema``.

    Raises:
        ConfigError: ``schema`` is not a plain identifier, or the catalog already has a
            schema of that name somewhere else (the message names both places).
    """
    check_name(schema, "schema")
    loc = storage.uri(Storage.join(db_path, schema))
    have = schema_location(spark, schema)
    if have is not None and not _same_place(have, loc):
        raise ConfigError(
            f"schema {schema!r} is already in this Spark session's catalog at {have}, not at the "
            f"master's {loc}; drop it there (DROP SCHEMA {quote_ident(schema)}) or use another "
            "schema name"
        )
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)} LOCATION {_lit(loc)}")
    return schema


def register(spark, storage: Storage, db_path: str, skip: frozenset[str] | set[str] = frozenset()) -> dict[str, str]:
    """Register every schema folder of the database at ``db_path`` and the Delta tables in them.

    Schema folders whose names are not plain identifiers, tables whose names the session
    catalog does not take (:func:`wlcore.names.catalog_name`), and folders in ``skip`` or
    reserved for capture, are left out. Tables already in the catalog are left as they are.

    Args:
        spark (SparkSession): the session whose catalog gets them.
        storage (Storage): the storage holding the database.
        db_path (str): the database's folder.
        skip (frozenset[str] | set[str]): schema folder names to leave out.

    Returns:
        dict[str, str]: ``{schema folder: reason}`` for schema folders that could not be
        registered (a name that is not an identifier, a schema of that name elsewhere in the
        catalog) and ``{"schema.table": reason}`` for such tables; each is also logged as a warning.
    """
    left_out: dict[str, str] = {}
    for schema in storage.subdirs(db_path):
        if schema in RESERVED or schema in skip or schema.startswith((".", "_")):
            continue
        schema_path = Storage.join(db_path, schema)
        if is_delta_table(storage, schema_path):
            continue  # not a schema: capture reports such a table
        try:
            create_schema(spark, storage, db_path, schema)
        except ConfigError as exc:
            left_out[schema] = str(exc)
            log.warning("schema folder %s not registered in the session catalog: %s", schema, exc)
            continue
        for table in storage.subdirs(schema_path):
            path = Storage.join(schema_path, table)
            if table == "_delta_log" or not is_delta_table(storage, path):
                continue
            if not catalog_name(table):
                name = qualified(schema, table)
                left_out[name] = (
                    f"{table!r} is not a name Spark's session catalog takes (letters, digits and '_' only); "
                    "read and write the table by path (Master.table_path)"
                )
                log.warning("table %s not registered in the session catalog: %s", name, left_out[name])
                continue
            ref = f"{quote_ident(schema)}.{quote_ident(table)}"
            if not spark.catalog.tableExists(ref):
                _adopt(spark, schema, table, ref, storage.uri(path))
    return left_out


def _adopt(spark, schema: str, table: str, ref: str, uri: str) -> None:
    """Register the Delta table at ``uri`` as managed table ``schema.table``."""
    spark.sql(f"CREATE TABLE IF NOT EXISTS {ref} USING delta LOCATION {_lit(uri)}")
    try:
        jvm = spark._jvm
        catalog = spark._jsparkSession.sessionState().catalog()
        ident = jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(table, jvm.scala.Some(schema))
        external = catalog.getTableMetadata(ident)
        copy = next(m for m in external.getClass().getMethods() if m.getName() == "copy")
        args = [getattr(external, f"copy$default${i}")() for i in range(1, copy.getParameterCount() + 1)]
        args[1] = jvm.org.apache.spark.sql.catalyst.catalog.CatalogTableType.MANAGED()
        managed = external.copy(*args)
        catalog.dropTable(ident, False, False)  # an external entry: its folder stays
        catalog.createTable(managed, False, False)
    except Exception as exc:  # Spark's internals differ: the table stays usable, but external
        warnings.warn(
            f"table {ref} is registered as an external table ({type(exc).__name__}); DROP TABLE "
            f"would keep its folder {uri}, so capture would not see the drop: remove the folder "
            "to drop it",
            stacklevel=3,
        )


def warehouse_folder(spark) -> str | None:
    """Spark's warehouse folder (where ``CREATE SCHEMA x`` without a location puts ``x.db``).

    Args:
        spark (SparkSession): the session (its ``spark.sql.warehouse.dir``).

    Returns:
        str | None: the local folder; None when it is not local.
    """
    return local_path(spark.conf.get("spark.sql.warehouse.dir", "spark-warehouse"))


def warehouse_schemas(folder: str | None) -> set[str]:
    """Names of the schemas in Spark's local warehouse folder (its ``<name>.db`` folders).

    A folder listing, not a catalog call: capture looks every second, and listing the
    session catalog costs a sixth of a second of JVM time a call.

    Args:
        folder (str | None): the warehouse folder (:func:`warehouse_folder`; None: none).

    Returns:
        set[str]: the schema names; empty when the folder is None or missing.
    """
    if folder is None or not os.path.isdir(folder):
        return set()
    return {n[:-3] for n in os.listdir(folder) if n.endswith(".db")}
