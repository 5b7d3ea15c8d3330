"""Settings from YAML files and the ``key=value`` state files (``wlc.config``, ``wlr.config``).

The defaults ship inside the package (``wlcore/defaults/wlc.yaml``, read with
``importlib.resources``). Merged over them, in order: ``config/wlc.yaml`` of the working
folder when it exists (the documented place for overrides), the YAML file named by the
environment variable ``WLC_CONFIG`` (the command lines' ``--config``), and ``WLC_DBFARM``
for the dbfarm. A key the defaults do not have is an error naming the nearest valid key
(except under ``spark.conf``, which takes any Spark setting). State files use MonetDB's
``wlc.config`` form: one ``key=value`` a line.
"""
from __future__ import annotations

import copy
import difflib
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import ConfigError

LOCAL_FILE = Path("config") / "wlc.yaml"  # overrides, relative to the working folder
FREE_FORM = {"spark.conf", "replica.where"}  # sections whose keys are not checked against the defaults

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def defaults_file(name: str) -> Path:
    """The packaged default file ``name`` (``wlc.yaml``, ``log4j2.properties``) as a path."""
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


def _check_keys(base: Mapping, over: Mapping, source: str, prefix: str = "") -> None:
    """Raise ConfigError for a key of ``over`` that ``base`` (the defaults) does not have."""
    for key, value in over.items():
        dotted = f"{prefix}{key}"
        if dotted in FREE_FORM:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: setting {dotted!r} must be a mapping (of Spark settings, or of "
                                  "schema.table to a predicate)")
            continue
        if key not in base:
            valid = [f"{prefix}{k}" for k in base]
            near = difflib.get_close_matches(dotted, valid, n=1, cutoff=0.5)
            hint = f"did you mean {near[0]!r}?" if near else f"valid here: {', '.join(valid)}"
            raise ConfigError(f"{source}: unknown setting {dotted!r}; {hint}")
        if isinstance(base[key], dict):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: setting {dotted!r} must be a mapping (keys "
                                  f"{', '.join(base[key])}), not {value!r}")
            _check_keys(base[key], value, source, dotted + ".")


def settings() -> dict[str, Any]:
    """Return the merged settings: the packaged defaults, then ``config/wlc.yaml`` of the
    working folder (when present), then ``$WLC_CONFIG``, then ``$WLC_DBFARM``.

    Raises:
        ConfigError: a YAML file named by ``WLC_CONFIG`` is missing, a file is not a YAML
            mapping, or it has a key the defaults do not have (the message names the
            nearest valid key).
    """
    data = _load_yaml(defaults_file("wlc.yaml"))
    files = [LOCAL_FILE] if LOCAL_FILE.is_file() else []
    extra = os.environ.get("WLC_CONFIG")
    if extra:
        files.append(Path(extra))
    for path in files:
        over = _load_yaml(path)
        _check_keys(data, over, str(path))
        data = _merge(data, over)
    if os.environ.get("WLC_DBFARM"):
        data["dbfarm"] = os.environ["WLC_DBFARM"]
    return data


def _load_yaml(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file {path} does not exist; fix WLC_CONFIG (or --config)") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"configuration file {path} must hold a YAML mapping, not {type(data).__name__}")
    return data


def add_common(parser) -> None:
    """The options every command line takes: ``--config FILE``, ``--verbose`` and ``--version``
    (the package version and the batch format version, :func:`wlcore.version.version_text`)."""
    from .version import version_text
    parser.add_argument("--config", metavar="FILE",
                        help="YAML settings merged over the defaults (as the WLC_CONFIG variable)")
    parser.add_argument("--verbose", action="store_true",
                        help="show everything: Spark's start-up output (Maven resolution), every logger at INFO, "
                             "Python's warnings in full")
    parser.add_argument("--version", action="version", version=version_text("%(prog)s"))


def use_config(args) -> None:
    """Apply ``--config`` of parsed command-line ``args`` (later reads of the settings use it)
    and check the settings; a missing file or a misspelled key exits with status 2."""
    if getattr(args, "config", None):
        path = Path(args.config).expanduser().resolve()
        if not path.is_file():
            _usage_error(f"--config {args.config}: no such file")
        os.environ["WLC_CONFIG"] = str(path)
    try:
        settings()  # a misspelled key stops the command here, before anything starts
    except ConfigError as exc:
        _usage_error(str(exc))


def _usage_error(text: str):
    import sys
    print(f"error: {text}", file=sys.stderr)
    raise SystemExit(2)


def dbfarm(value: str | os.PathLike | None = None) -> str:
    """Return the dbfarm folder: ``value`` when given, else ``$WLC_DBFARM``, else ``dbfarm`` from config.

    Local paths are made absolute; URLs (``scheme://...``) are returned unchanged.

    Raises:
        ConfigError: the value is empty, or names a file rather than a folder.
    """
    chosen = str(value) if value is not None else str(settings()["dbfarm"])
    if not chosen.strip():
        raise ConfigError("the dbfarm is empty: pass a folder (dbfarm=...) or set WLC_DBFARM",
                          cli="the dbfarm is empty: give the folder that holds the databases as the first argument")
    if "://" in chosen:
        return chosen.rstrip("/")
    path = Path(chosen).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"dbfarm {str(path)!r} is a file, not a folder: pass the folder that holds the "
                          "databases (dbfarm=... or WLC_DBFARM)",
                          cli=f"dbfarm {str(path)!r} is a file, not a folder: give the folder that holds the databases")
    return str(path)


def check_name(name: str, what: str) -> str:
    """Return ``name`` when it is a plain identifier (letters, digits, ``_``; not starting with a digit).

    Database, schema and table names become folder names and SQL identifiers, so nothing
    else is accepted (no ``/``, ``..``, spaces or quotes).

    Raises:
        ConfigError: the name is not a plain identifier; the message names ``what`` it was for.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"{what} name {name!r} is not allowed: use letters, digits and '_' only, "
            "starting with a letter or '_' (at most 128 characters)"
        )
    return name


def number(value: Any, what: str, minimum: float = 0.0) -> float:
    """Return ``value`` as a float of at least ``minimum``, or raise ConfigError naming ``what``."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number of seconds, not {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a number of seconds, not {value!r}") from None
    if out != out or out < minimum:
        raise ConfigError(f"{what} must be >= {minimum:g} seconds, not {value!r}")
    return out


_UNITS = {"s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
          "w": 604800, "week": 604800, "weeks": 604800}
_COUNTS = {"transactions": "transactions", "transaction": "transactions", "txns": "transactions",
           "txn": "transactions", "batches": "batches", "batch": "batches"}
_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class Every:
    """An interval or a retention: ``amount`` of ``unit`` (``seconds``, ``transactions`` or ``batches``)."""

    amount: float
    unit: str = "seconds"

    def __str__(self) -> str:
        amount = int(self.amount) if float(self.amount).is_integer() else self.amount
        return f"{amount} s" if self.unit == "seconds" else f"{amount} {self.unit}"


def every(value: Any, what: str, counts: tuple[str, ...] = ()) -> Every | None:
    """Parse an interval setting: None, ``false``, ``off`` or 0 mean off (returns None); a
    number is seconds; text is ``<n><unit>`` with unit s, m, h, d or w (``"90s"``, ``"6h"``,
    ``"1d"``), or ``"<n> transactions"`` / ``"<n> batches"`` where ``counts`` allows them.

    Raises:
        ConfigError: anything else; the message names ``what`` and the accepted forms.
    """
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("off", "none", "")):
        return None
    forms = "a number of seconds, '<n>s', '<n>m', '<n>h', '<n>d', '<n>w'" + "".join(
        f", '<n> {c}'" for c in counts) + " or off"
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be {forms}, not {value!r}")
    if isinstance(value, (int, float)):
        amount, unit = float(value), "seconds"
    else:
        m = _EVERY.match(str(value))
        word = m.group(2).lower() if m else ""
        if not m or not (word == "" or word in _UNITS or _COUNTS.get(word) in counts):
            raise ConfigError(f"{what} must be {forms}, not {value!r}")
        amount = float(m.group(1))
        if word in _COUNTS:
            unit = _COUNTS[word]
        else:
            amount, unit = amount * _UNITS.get(word, 1), "seconds"
    if amount != amount or amount < 0:
        raise ConfigError(f"{what} must be {forms}, not {value!r}")
    return Every(amount, unit) if amount > 0 else None


# ----------------------------------------------------------------------------- key=value files

def parse_kv(text: str, source: str = "<text>") -> dict[str, str]:
    """Parse ``key=value`` lines (MonetDB's wlc.config form); ``#`` starts a comment line.

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
    """Render a mapping as ``key=value`` lines; ``None`` values are written empty."""
    lines = []
    for key, value in values.items():
        text = "" if value is None else str(value)
        if len(text.splitlines()) > 1 or len(key.splitlines()) > 1 or "=" in key:
            raise ConfigError(f"cannot store {key!r}={text!r} as a key=value line")
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"
