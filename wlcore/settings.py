"""Settings from YAML files and the ``key=value`` state files (``wlc.config``, ``wlr.config``).

The defaults ship inside the package (``wlcore/defaults/wlc.yaml``, read with
``importlib.resources``). Merged over them, in order: ``config/wlc.yaml`` of the working
folder when it exists (the documented place for overrides), the YAML file chosen with
:func:`use_config` (the command lines' ``--config``) or else named by the environment
variable ``WLC_CONFIG``, and ``WLC_DBFARM`` for the dbfarm. :func:`settings` returns them as
one typed object (:class:`wlcore.settings_model.Settings`), validated once when loaded and
loaded again only when one of those files, the chosen file or ``WLC_DBFARM`` changes. A key
the defaults do not have is an error naming the nearest valid key (except under
``spark.conf``, which takes any Spark setting). State files use MonetDB's ``wlc.config``
form: one ``key=value`` a line.
"""

from __future__ import annotations

import copy
import os
import re
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

from .durations import Every, every, number  # noqa: F401 (the settings' value types, as before)
from .errors import ConfigError
from .settings_model import FREE_FORM, Settings, validate  # noqa: F401

LOCAL_FILE = Path("config") / "wlc.yaml"  # overrides, relative to the working folder

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def defaults_file(name: str) -> Path:
    """The packaged default file ``name`` as a path (read with ``importlib.resources``).

    Args:
        name (str): ``wlc.yaml`` or ``log4j2.properties``.

    Returns:
        Path: the file inside the installed ``wlcore`` package.
    """
    return Path(str(resources.files("wlcore").joinpath("defaults", name)))


def cache_folder() -> Path:
    """The user's cache folder of wlc (``$XDG_CACHE_HOME/wlc``, by default ``~/.cache/wlc`` on
    Linux; the platform's user cache folder elsewhere, as :mod:`platformdirs` names it), where
    sessions put Spark's own files (warehouse, Derby) unless configured, and Spark's start-up
    output (:mod:`wlcore.jvm_output`). Not made here."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("wlc", appauthor=False))


def _merge(base: dict, over: Mapping) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# the coarsest modification-time granularity of the filesystems met (FAT: 2 s): a file whose
# modification time is not this much older than the moment it was read may have been written
# again since with the same status (git's "racily clean" entries), so its text is compared
_RACY_NS = 2_000_000_000


class _Loader:
    """The chosen configuration file and the settings last loaded, with what they came from:
    ``key`` the files' status (:func:`_stamp`) and ``WLC_DBFARM``, ``texts`` their contents,
    ``read_ns`` when they were read (``time.time_ns()``)."""

    def __init__(self) -> None:
        self.chosen: Path | None = None
        self.lock = threading.Lock()
        self.key: tuple | None = None
        self.texts: tuple[tuple[Path, str], ...] = ()
        self.read_ns = 0
        self.value: Settings | None = None


_loader = _Loader()


def config_file() -> Path | None:
    """The YAML file merged over the defaults and ``config/wlc.yaml``: the one chosen with
    :func:`use_config` (``--config``), else the one ``WLC_CONFIG`` names, else None (a
    process started from this one sees the choice only when given it, e.g. as ``WLC_CONFIG``
    in its environment)."""
    if _loader.chosen is not None:
        return _loader.chosen
    extra = os.environ.get("WLC_CONFIG")
    return Path(extra) if extra else None


def choose_config(path: str | os.PathLike | None) -> None:
    """Merge the YAML file ``path`` over the defaults from now on, in place of ``WLC_CONFIG``.
    Nothing is checked here: see :func:`use_config`.

    Args:
        path (str | os.PathLike | None): the file (None: ``WLC_CONFIG`` again).
    """
    with _loader.lock:
        _loader.chosen = None if path is None else Path(path)


def settings() -> Settings:
    """Return the settings: the packaged defaults, then ``config/wlc.yaml`` of the working
    folder (when present), then :func:`config_file`, then ``$WLC_DBFARM``, as one
    :class:`~wlcore.settings_model.Settings` (durations in seconds, intervals as
    :class:`~wlcore.durations.Every`). Loaded and validated once; loaded again when one of
    the files' contents, the chosen file or ``WLC_DBFARM`` changes. A call reads no file
    while each file's status (:func:`os.stat`: modification and change times, size, inode)
    is unchanged; a file modified less than 2 s before it was last read (the coarsest
    modification-time granularity) is read again and compared by its text, as git treats
    "racily clean" index entries.

    Raises:
        ConfigError: the YAML file named by ``WLC_CONFIG`` is missing, a file is not a YAML
            mapping, it has a key the defaults do not have (the message names the nearest
            valid key) or a malformed value (the message names the file and the key).
    """
    files = [LOCAL_FILE] if LOCAL_FILE.is_file() else []
    extra = config_file()
    if extra is not None:
        files.append(extra)
    stamps = tuple(_stamp(path) for path in files)
    farm = os.environ.get("WLC_DBFARM") or None
    key = (stamps, farm)
    with _loader.lock:
        value = _loader.value
        if value is not None and _loader.key == key and all(s[3] + _RACY_NS < _loader.read_ns for s in stamps):
            return value  # the files' status unchanged, and none written too near its reading
    read_ns = time.time_ns()
    texts = tuple((path, _read(path)) for path in files)
    with _loader.lock:
        if _loader.value is not None and _loader.key is not None and (_loader.texts, _loader.key[1]) == (texts, farm):
            _loader.key, _loader.read_ns = key, read_ns  # touched, or racily unchanged: the same text
            return _loader.value
    value = _load(texts, farm)
    with _loader.lock:
        _loader.key, _loader.texts, _loader.read_ns, _loader.value = key, texts, read_ns, value
    return value


def _stamp(path: Path) -> tuple[str, int, int, int, int, int]:
    """What tells a file changed without reading it: its absolute path (``config/wlc.yaml``
    is relative to the working folder), device, inode, modification time (ns), status
    change time (ns) and size (bytes), from :func:`os.stat`."""
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise _missing(path) from exc
    return (os.path.abspath(path), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _load(texts: tuple[tuple[Path, str], ...], farm: str | None) -> Settings:
    """Merge and validate: the defaults, then each file over them (each step validated, so
    an error names the file that brought it)."""
    path = defaults_file("wlc.yaml")
    data = _parse_yaml(path, _read(path))
    out = validate(data, str(path))
    for path, text in texts:
        data = _merge(data, _parse_yaml(path, text))
        out = validate(data, str(path))
    return out.model_copy(update={"dbfarm": farm}) if farm else out


def _read(path: Path) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError as exc:
        raise _missing(path) from exc


def _missing(path: Path) -> ConfigError:
    return ConfigError(f"configuration file {path} does not exist; fix WLC_CONFIG (or --config)")


def _parse_yaml(path: Path, text: str) -> dict:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"configuration file {path} must hold a YAML mapping, not {type(data).__name__}")
    return data


def add_common(parser) -> None:
    """Add the options every command line takes: ``--config FILE``, ``--verbose`` and ``--version``
    (the package version and the batch format version, :func:`wlcore.version.version_text`).

    Args:
        parser (argparse.ArgumentParser): the command line's parser, changed in place.
    """
    from .version import version_text

    parser.add_argument(
        "--config", metavar="FILE", help="YAML settings merged over the defaults (as the WLC_CONFIG variable)"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show everything: Spark's start-up output (Maven resolution), every logger at INFO, "
        "Python's warnings in full",
    )
    parser.add_argument("--version", action="version", version=version_text("%(prog)s"))


def use_config(args) -> None:
    """Apply ``--config`` of parsed command-line ``args`` (later reads of the settings in this
    process use it, :func:`choose_config`) and check the settings; a missing file or a
    misspelled key exits with status 2 and nothing is chosen.

    Args:
        args (argparse.Namespace): the parsed command line (its ``config``, None or absent: none).

    Raises:
        SystemExit: status 2, after an ``error: ...`` line on stderr.
    """
    path = None
    if getattr(args, "config", None):
        path = Path(args.config).expanduser().resolve()
        if not path.is_file():
            _usage_error(f"--config {args.config}: no such file")
    before = _loader.chosen
    try:
        if path is not None:
            choose_config(path)
        settings()  # a misspelled key stops the command here, before anything starts
    except ConfigError as exc:
        choose_config(before)
        _usage_error(str(exc))


def _usage_error(text: str):
    import sys

    print(f"error: {text}", file=sys.stderr)
    raise SystemExit(2)


def dbfarm(value: str | os.PathLike | None = None) -> str:
    """Return the dbfarm folder: ``value`` when given, else ``$WLC_DBFARM``, else ``dbfarm`` from config.

    Local paths are made absolute; URLs (``scheme://...``) are returned unchanged.

    Args:
        value (str | os.PathLike | None): the dbfarm given (None: from the environment or config).

    Returns:
        str: the absolute folder, or the URL without a trailing ``/``.

    Raises:
        ConfigError: the value is empty, or names a file rather than a folder.
    """
    chosen = str(value) if value is not None else settings().dbfarm
    if not chosen.strip():
        raise ConfigError(
            "the dbfarm is empty: pass a folder (dbfarm=...) or set WLC_DBFARM",
            cli="the dbfarm is empty: give the folder that holds the databases as the first argument",
        )
    if "://" in chosen:
        return chosen.rstrip("/")
    path = Path(chosen).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"dbfarm {str(path)!r} is a file, not a folder: pass the folder that holds the "
            "databases (dbfarm=... or WLC_DBFARM)",
            cli=f"dbfarm {str(path)!r} is a file, not a folder: give the folder that holds the databases",
        )
    return str(path)


def check_name(name: str, what: str) -> str:
    """Return ``name`` when it is a plain identifier (letters, digits, ``_``; not starting with a
    digit; at most 128 characters).

    Database, schema and table names become folder names and SQL identifiers, so nothing
    else is accepted (no ``/``, ``..``, spaces or quotes).

    Args:
        name (str): the name given.
        what (str): what it names (``database``, ``schema``), for the message.

    Returns:
        str: ``name``.

    Raises:
        ConfigError: the name is not a plain identifier; the message names ``what`` it was for.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"{what} name {name!r} is not allowed: use letters, digits and '_' only, "
            "starting with a letter or '_' (at most 128 characters)"
        )
    return name


# ----------------------------------------------------------------------------- key=value files


def parse_kv(text: str, source: str = "<text>") -> dict[str, str]:
    """Parse ``key=value`` lines (MonetDB's wlc.config form); ``#`` starts a comment line.

    Args:
        text (str): the file's text.
        source (str): the file's name, for messages.

    Returns:
        dict[str, str]: ``{key: value}`` in the file's order, both stripped (a repeated key: the last).

    Raises:
        ConfigError: a non-empty line has no ``=``; the message names the file and line.
    """
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise ConfigError(f"{source}:{n}: expected key=value, got {raw!r}; fix or remove the line")
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def format_kv(values: Mapping[str, Any]) -> str:
    """Render a mapping as ``key=value`` lines (the inverse of :func:`parse_kv`).

    Args:
        values (Mapping[str, Any]): ``{key: value}``; a value is written as ``str(value)``, None empty.

    Returns:
        str: the lines, each ending with a newline.

    Raises:
        ConfigError: a key or value spans lines, or a key holds ``=``.
    """
    lines = []
    for key, value in values.items():
        text = "" if value is None else str(value)
        if len(text.splitlines()) > 1 or len(key.splitlines()) > 1 or "=" in key:
            raise ConfigError(f"cannot store {key!r}={text!r} as a key=value line")
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"
