"""Table names as capture and replay carry them: ``schema.table`` and the folders behind them.

A master table is the Delta table in folder ``<db>/<schema>/<table>``; any folder name
Delta accepts is replicated (quotes, dashes, spaces, dots, non-ASCII letters, backticks).
Its *qualified name* is ``schema.table``; a part holding ``.`` or a backtick is written in
backticks with backticks doubled, as in Spark SQL: ``sales.`q1.orders```. Names read from a
batch are untrusted: :func:`split_name` refuses parts that would leave the database folder.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse

from .errors import ConfigError

_PLAIN_PART = re.compile(r"^[^.`]+$")
_SAFE_FOLDER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# Spark's session catalog takes schema and table names of these characters only (else
# INVALID_SCHEMA_OR_RELATION_NAME), and folds them to lower case
_CATALOG_NAME = re.compile(r"^[A-Za-z0-9_]+$")
# control characters and everything str.splitlines() breaks a line at (U+0085, U+2028, U+2029)
_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def quote_ident(name: str) -> str:
    """A Spark SQL identifier in backticks, backticks inside doubled.

    Args:
        name (str): any name (a schema, table or column).

    Returns:
        str: ```name```.
    """
    return "`" + name.replace("`", "``") + "`"


def catalog_name(part: str) -> bool:
    """True when Spark's session catalog takes ``part`` as a schema, table or view name.

    Args:
        part (str): a schema or table folder name.

    Returns:
        bool: True for letters, digits and ``_`` only; a Delta table of any other name is
        replicated, but has no name in the session catalog (read it by path).
    """
    return bool(_CATALOG_NAME.match(part))


def qualified(schema: str, table: str) -> str:
    """``schema.table``, each part in backticks when it holds ``.`` or a backtick (as Spark SQL writes it).

    Args:
        schema (str): the schema's folder name.
        table (str): the table's folder name.

    Returns:
        str: the qualified name (:func:`split_name` reads it back).
    """
    return ".".join(p if _PLAIN_PART.match(p) else quote_ident(p) for p in (schema, table))


def uncarried_reason(part: str) -> str | None:
    """Why a folder name cannot be a replicated schema or table.

    Control characters and line separators (a newline, a tab, U+2028) would make the
    ``key=value`` state files and the logs ambiguous; bytes that are not UTF-8 cannot be
    written into a JSON manifest.

    Args:
        part (str): a schema or table folder name.

    Returns:
        str | None: the reason, with the fix (rename the folder); None when it can be carried.
    """
    if _CONTROL.search(part):
        return "its name holds a control character (newline, tab...); rename the folder"
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not valid UTF-8; rename the folder"
    return None


def check_part(part: str, what: str) -> str:
    """Return ``part`` when it is a folder name that stays inside its parent folder.

    Args:
        part (str): a schema or table name.
        what (str): what it names (``schema``, ``table``), for the message.

    Returns:
        str: ``part``.

    Raises:
        ConfigError: empty, ``.``/``..``, holds ``/`` or NUL, or cannot be carried.
    """
    if not isinstance(part, str) or part in ("", ".", "..") or "/" in part or "\x00" in part:
        raise ConfigError(
            f"{what} name {part!r} is not allowed: it must be one folder name (not empty, not '.' or '..', no '/')"
        )
    reason = uncarried_reason(part)
    if reason:
        raise ConfigError(f"{what} name {part!r} is not allowed: {reason}")
    return part


def split_name(name: str) -> tuple[str, str]:
    """``"schema.table"`` (parts optionally in backticks) -> ``(schema, table)``, both checked.

    Args:
        name (str): a qualified name (:func:`qualified`), e.g. ``sales.`q1.orders```.

    Returns:
        tuple[str, str]: the schema and table folder names.

    Raises:
        ConfigError: the name is not two parts, or a part would leave the database folder.
    """
    parts = _split(name) if isinstance(name, str) else None
    if parts is None or len(parts) != 2:
        raise ConfigError(
            f"table name {name!r} must be 'schema.table'; write a part that holds '.' "
            "or '`' in backticks, e.g. sales.`q1.orders`"
        )
    return check_part(parts[0], "schema"), check_part(parts[1], "table")


def _split(name: str) -> list[str] | None:
    parts, i, n = [], 0, len(name)
    while True:
        if i < n and name[i] == "`":
            j, buf = i + 1, []
            while True:
                k = name.find("`", j)
                if k < 0:
                    return None
                buf.append(name[j:k])
                if name.startswith("``", k):
                    buf.append("`")
                    j = k + 2
                    continue
                i = k + 1
                break
            parts.append("".join(buf))
        else:
            k = name.find(".", i)
            k = n if k < 0 else k
            part = name[i:k]
            if "`" in part:
                return None
            parts.append(part)
            i = k
        if i == n:
            return parts
        if name[i] != ".":
            return None
        i += 1


def batch_folder(name: str) -> str:
    """A folder name for table ``name``'s rows inside a batch: the name itself when it is
    plain ASCII, else ``t_`` and a hash (Spark reads Parquet paths as globs: ``{``, ``[``...).

    Args:
        name (str): the qualified name ``schema.table``.

    Returns:
        str: the name, or ``t_`` and 20 hex digits of its SHA-256.
    """
    if _SAFE_FOLDER.match(name):
        return name
    return "t_" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:20]


def state_key(prefix: str, name: str) -> str:
    """A ``key=value`` state-file key for table ``name`` (percent-encoded beyond plain names).

    Args:
        prefix (str): the key family (``version.``, ``at.``).
        name (str): the qualified table name.

    Returns:
        str: ``prefix`` and the encoded name.
    """
    return prefix + urllib.parse.quote(name, safe=".")


def name_of_key(prefix: str, key: str) -> str:
    """The table name of a state-file key made by :func:`state_key`.

    Args:
        prefix (str): the key family the key starts with (``version.``, ``at.``).
        key (str): the key.

    Returns:
        str: the qualified table name, decoded.
    """
    return urllib.parse.unquote(key[len(prefix) :])
