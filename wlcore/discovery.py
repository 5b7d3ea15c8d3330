"""Finding a master database's replicated tables on the shared filesystem (see :mod:`wlcore.names`)."""

from __future__ import annotations

from .deltalog import is_delta_table
from .names import qualified, quote_ident, split_name, uncarried_reason
from .storage import Storage

RESERVED = {"wlc_logs", "wlc_snapshot"}  # the master's own folders, never schemas
NOT_REPLICATED_SCHEMAS = {"tmp"}


def delta_ref(uri: str) -> str:
    """``delta.`<path>``` for SQL on a path-based Delta table.

    Args:
        uri (str): the table's URI as Spark reads it (backticks in it are doubled).

    Returns:
        str: the table reference.
    """
    return "delta." + quote_ident(uri)


def discover_tables(
    storage: Storage, db_path: str, skip: frozenset[str] | set[str] = frozenset(), refused: dict[str, str] | None = None
) -> dict[str, str]:
    """Replicated tables of a database (see :mod:`wlcore.names`).

    Every Delta table at ``<db>/<schema>/<table>`` is replicated, whatever its folder name,
    except schema ``tmp``. A Delta table that cannot be carried (a name with a control
    character or not UTF-8, a table directly under the database folder) is put in
    ``refused`` as ``{path: reason}`` so the master can say so, never skipped silently.

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database's folder.
        skip (frozenset[str] | set[str]): schema folders to leave out (besides the master's own).
        refused (dict[str, str] | None): filled in place with ``{path: reason}`` (None: not kept).

    Returns:
        dict[str, str]: ``{"schema.table": folder}``.
    """
    out = {}
    for schema in storage.subdirs(db_path):
        if schema in RESERVED or schema in skip or schema in NOT_REPLICATED_SCHEMAS:
            continue
        schema_path = Storage.join(db_path, schema)
        if is_delta_table(storage, schema_path):
            if refused is not None:
                refused[schema_path] = (
                    "a Delta table directly in the database folder is not replicated; move it to <db>/<schema>/<table>"
                )
            continue
        for table in storage.subdirs(schema_path):
            path = Storage.join(schema_path, table)
            if table == "_delta_log" or not is_delta_table(storage, path):
                continue
            reason = uncarried_reason(schema) or uncarried_reason(table)
            if reason:
                if refused is not None:
                    refused[path] = reason
                continue
            out[qualified(schema, table)] = path
    return out


def table_path(db_path: str, name: str) -> str:
    """The folder of table ``name`` in the database folder ``db_path``: ``<db>/<schema>/<table>``.

    Args:
        db_path (str): the database's folder.
        name (str): ``schema.table``.

    Raises:
        ConfigError: ``name`` is not ``schema.table``.
    """
    schema, table = split_name(name)
    return Storage.join(db_path, schema, table)
