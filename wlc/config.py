"""Settings from ``config/*.yaml`` and the ``key=value`` state files (``wlc.config``, ``wlr.config``).

Defaults live in ``config/wlc.yaml`` beside the packages; a YAML file named by the
environment variable ``WLC_CONFIG`` is merged over them, and ``WLC_DBFARM`` overrides
the dbfarm. State files use MonetDB's ``wlc.config`` form: one ``key=value`` a line.
"""
from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
DEFAULTS_FILE = CONFIG_DIR / "wlc.yaml"

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _merge(base: dict, over: Mapping) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def settings() -> dict[str, Any]:
    """Return the merged settings: ``config/wlc.yaml``, then ``$WLC_CONFIG``, then ``$WLC_DBFARM``.

    Raises:
        ConfigError: a YAML file is missing or is not a mapping.
    """
    data = _load_yaml(DEFAULTS_FILE)
    extra = os.environ.get("WLC_CONFIG")
    if extra:
        data = _merge(data, _load_yaml(Path(extra)))
    if os.environ.get("WLC_DBFARM"):
        data["dbfarm"] = os.environ["WLC_DBFARM"]
    return data


def _load_yaml(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file {path} does not exist; fix WLC_CONFIG or restore it") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"configuration file {path} must hold a YAML mapping, not {type(data).__name__}")
    return data


def dbfarm(value: str | os.PathLike | None = None) -> str:
    """Return the dbfarm folder: ``value`` when given, else ``$WLC_DBFARM``, else ``dbfarm`` from config.

    Local paths are made absolute; URLs (``scheme://...``) are returned unchanged.

    Raises:
        ConfigError: the value is empty, or names a file rather than a folder.
    """
    chosen = str(value) if value is not None else str(settings()["dbfarm"])
    if not chosen.strip():
        raise ConfigError("the dbfarm is empty: pass a folder (dbfarm=...) or set WLC_DBFARM")
    if "://" in chosen:
        return chosen.rstrip("/")
    path = Path(chosen).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"dbfarm {str(path)!r} is a file, not a folder: pass the folder that holds the "
                          "databases (dbfarm=... or WLC_DBFARM)")
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
