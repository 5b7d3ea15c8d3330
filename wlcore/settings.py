"""Settings from YAML files and the ``key=value`` state files (``wlc.config``, ``wlr.config``).

The defaults ship inside the package (``wlcore/defaults/wlc.yaml``, read with
``importlib.resources``). Merged over them, in order: ``config/wlc.yaml`` of the working
folder when it exists (the documented place for overrides), the YAML file chosen with
:func:`use_config` (the command lines' ``--config``) or else named by the environment
variable ``WLC_CONFIG``, and ``WLC_DBFARM`` for the dbfarm. :func:`settings` returns them as
one typed object (:class:`wlcore.settings.Settings`), loaded and validated once per process
and loaded again only when the working folder, the chosen file or ``WLC_DBFARM`` changes
(an edit of a file already loaded is read by :func:`reload`). A key
the defaults do not have is an error naming the nearest valid key (except under
``spark.conf``, which takes any Spark setting). State files use MonetDB's ``wlc.config``
form: one ``key=value`` a line.

The typed object is a pydantic model per section of ``wlc.yaml``: :func:`validate` turns the
merged YAML into :class:`Settings` and pydantic's errors into :class:`~wlcore.errors.ConfigError`
messages that name the file and the setting (an unknown key with the nearest valid one, a section
that is not a mapping with its keys, a malformed value with the forms accepted). Every key must be
in the packaged defaults, which are validated by the same model; the free-form sections
``spark.conf`` (any Spark setting) and ``replica.where`` (schema.table to a predicate) stay dicts.

Units are in the types: :data:`Seconds` and :data:`Wait` are float seconds, the intervals and
retentions (:data:`Duration`, :data:`SnapshotInterval`, :data:`LevelInterval`) are :class:`Every`
(seconds, transactions or batches) or None for off. Settings and arguments give them as ``2.5``
seconds, ``"6h"``, ``"500 transactions"`` or ``off``: :func:`seconds` and :func:`interval` say
what is wrong with a value (``ValueError`` without a name), :func:`number` and :func:`every` name
the setting or argument in a :class:`~wlcore.errors.ConfigError`. The units are the ones of the
Unix ``sleep`` command's suffixes (s, m, h, d) plus w for weeks.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError

from .errors import ConfigError

_UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_COUNTS = {
    "transactions": "transactions",
    "transaction": "transactions",
    "txns": "transactions",
    "txn": "transactions",
    "batches": "batches",
    "batch": "batches",
}
_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class Every:
    """An interval or a retention: ``amount`` of ``unit`` (``seconds``, ``transactions`` or ``batches``)."""

    amount: float
    unit: str = "seconds"

    def __str__(self) -> str:
        amount = int(self.amount) if float(self.amount).is_integer() else self.amount
        return f"{amount} s" if self.unit == "seconds" else f"{amount} {self.unit}"


def seconds(value: Any, minimum: float = 0.0) -> float:
    """Return ``value`` as float seconds of at least ``minimum``.

    Args:
        value (Any): a number, or text holding one.
        minimum (float): the least accepted, seconds.

    Returns:
        float: the seconds.

    Raises:
        ValueError: not a number (booleans included), NaN, or below ``minimum``; the message
            starts with ``must be`` and names the value, the caller prefixes what it was.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a number of seconds, not {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number of seconds, not {value!r}") from None
    if out != out or out < minimum:
        raise ValueError(f"must be >= {minimum:g} seconds, not {value!r}")
    return out


def number(value: Any, what: str, minimum: float = 0.0) -> float:
    """Return ``value`` as float seconds of at least ``minimum`` (see :func:`seconds`).

    Args:
        value (Any): a number, or text holding one.
        what (str): the setting or argument it is, for the message.
        minimum (float): the least accepted, seconds.

    Returns:
        float: the seconds.

    Raises:
        ConfigError: ``value`` is not such a number; the message names ``what``.
    """
    try:
        return seconds(value, minimum)
    except ValueError as exc:
        raise ConfigError(f"{what} {exc}") from None


def interval(value: Any, counts: tuple[str, ...] = ()) -> Every | None:
    """Parse an interval (``master.compact.level1``, ``master.snapshot_interval``, retention).

    Args:
        value (Any): None, ``false``, ``off`` or 0 mean off; a number is seconds; text is
            ``<n><unit>`` with unit s, m, h, d or w (``"90s"``, ``"6h"``, ``"1d"``), or
            ``"<n> transactions"`` / ``"<n> batches"`` where ``counts`` allows them.
        counts (tuple[str, ...]): the count units allowed (``"transactions"``, ``"batches"``).

    Returns:
        Every | None: the interval (seconds, or a count); None when off.

    Raises:
        ValueError: anything else; the message starts with ``must be`` and lists the accepted forms.
    """
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("off", "none", "")):
        return None
    forms = (
        "a number of seconds, '<n>s', '<n>m', '<n>h', '<n>d', '<n>w'"
        + "".join(f", '<n> {c}'" for c in counts)
        + " or off"
    )
    if isinstance(value, bool):
        raise ValueError(f"must be {forms}, not {value!r}")
    if isinstance(value, (int, float)):
        amount, unit = float(value), "seconds"
    else:
        m = _EVERY.match(str(value))
        word = m.group(2).lower() if m else ""
        if not m or not (word == "" or word in _UNITS or _COUNTS.get(word) in counts):
            raise ValueError(f"must be {forms}, not {value!r}")
        amount = float(m.group(1))
        if word in _COUNTS:
            unit = _COUNTS[word]
        else:
            amount, unit = amount * _UNITS.get(word, 1), "seconds"
    if amount != amount or amount < 0:
        raise ValueError(f"must be {forms}, not {value!r}")
    return Every(amount, unit) if amount > 0 else None


def every(value: Any, what: str, counts: tuple[str, ...] = ()) -> Every | None:
    """Parse an interval setting or argument (see :func:`interval`).

    Args:
        value (Any): the setting's or argument's value.
        what (str): its name for the message (``master.compact.level1``, ``--level1``).
        counts (tuple[str, ...]): the count units allowed (``"transactions"``, ``"batches"``).

    Returns:
        Every | None: the interval; None when off.

    Raises:
        ConfigError: a malformed value; the message names ``what`` and the accepted forms.
    """
    try:
        return interval(value, counts)
    except ValueError as exc:
        raise ConfigError(f"{what} {exc}") from None


# pydantic's float takes true as 1.0 and says 'greater than or equal'; tests assert 'must be >= 0.01 seconds'
def _seconds_from(minimum: float):
    return PlainValidator(lambda value: seconds(value, minimum))


# pydantic has no type for '6h' or '500 transactions' (its timedelta takes ISO 8601 'PT6H', not units or counts)
def _interval_of(*counts: str):
    return PlainValidator(lambda value: interval(value, counts))


# pydantic's bool also takes 't', 'y', '1' and 1.0; StrictBool refuses YAML's quoted 'yes'/'on' that ours takes
def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
        return value.strip().lower() in ("true", "yes", "on")
    raise ValueError(f"must be true or false, not {value!r}")


# pydantic's str refuses None (an empty YAML value, ours "") and numbers unless coerced model-wide
def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"must be text, not {value!r}")
    return str(value)


# PositiveInt takes true as 1 and says 'greater than 0'; tests assert 'must be a whole number >= 1, not 0'
def _count(value: Any) -> int:
    try:
        out = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        out = float("nan")
    if not out.is_integer() or out < 1:
        raise ValueError(f"must be a whole number >= 1, not {value!r}")
    return int(out)


# ByteSize takes '0.5' as 0 and true as 1, which tests refuse ('size in bytes >= 0 (a number, or with KiB ...')
_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def _bytes(value: Any) -> int:
    text = str(value).strip().lower().replace(" ", "") if not isinstance(value, bool) else "?"
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(digits) :]
    try:
        out = float(digits) * _BYTE_UNITS[unit]
    except (KeyError, ValueError):
        out = float("nan")
    if not out.is_integer() or out < 0:
        raise ValueError(f"must be a size in bytes >= 0 (a number, or with KiB, MiB, GiB, KB, MB, GB), not {value!r}")
    return int(out)


# list[str] refuses one bare name and an empty YAML value (None), which ours takes as [name] and []
def _names(value: Any) -> list[str]:
    value = [value] if isinstance(value, str) else [] if value is None else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of schema.table names or patterns, not {value!r}")
    return list(value)


# bool | Literal['auto'] would take 'yes' and word its error by union member; tests assert 'true, false or auto'
def _s3a(value: Any) -> bool | Literal["auto"]:
    if isinstance(value, bool):
        return value
    if str(value).lower() != "auto":
        raise ValueError(f"must be true, false or auto, not {value!r}")
    return "auto"


OFF_WORDS = ("", "off", "false", "none")


def port_number(value: Any) -> int | None:
    """A TCP port as the ``metrics.port`` setting, ``--metrics-port`` and ``metrics_port=`` take it:
    a whole number from 0 to 65535 (0: any free port), or off.

    Args:
        value (Any): the value given: an int or its digits; ``off``, ``""``, ``false``, ``none``,
            None or False (YAML's reading of a bare ``off``): no port.

    Returns:
        int | None: the port; None: off.

    Raises:
        ValueError: anything else (True, a negative, fractional or too large number, other text).
    """
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in OFF_WORDS):
        return None
    if isinstance(value, bool) or not str(value).strip().isdigit() or not 0 <= int(value) <= 65535:
        raise ValueError(f"must be a port from 0 to 65535 (0: any free port) or off, not {value!r}")
    return int(value)


FEATURE_NAMES = {"change_feed": "delta.enableChangeDataFeed", "in_commit_timestamps": "delta.enableInCommitTimestamps"}
"""The table features capture may switch on (:mod:`wlcore.tabledef`), by their setting names."""


def feature_names(raw: Any) -> list[str]:
    """``raw`` as a checked list of :data:`FEATURE_NAMES` keys.

    Args:
        raw (Any): a name, a list of names, or ``none``/False/None for none.

    Returns:
        list[str]: the names (empty: none).

    Raises:
        ConfigError: anything else.
    """
    if raw is None or raw is False or raw == "none":
        return []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or any(str(v) not in FEATURE_NAMES for v in raw):
        raise ConfigError(
            f"capture.table_features must be a list of {', '.join(FEATURE_NAMES)} (or [] for none), not {raw!r}"
        )
    return [str(v) for v in raw]


def _features(value: Any) -> list[str]:
    return feature_names([] if value is None else value)  # None (an empty YAML value): nothing switched on


Seconds = Annotated[float, _seconds_from(0.0)]
"""Float seconds, at least 0."""
Wait = Annotated[float, _seconds_from(0.01)]
"""Float seconds between two looks (polls, beats), at least 0.01."""
Duration = Annotated["Every | None", _interval_of()]
"""A duration (seconds), None for off: ``3600``, ``"6h"``, ``"30d"``, ``off``."""
SnapshotInterval = Annotated["Every | None", _interval_of("transactions")]
"""A duration or ``"<n> transactions"``, None for off."""
LevelInterval = Annotated["Every | None", _interval_of("batches")]
"""A duration (UTC-aligned windows) or ``"<n> batches"``, None for off."""
Flag = Annotated[bool, PlainValidator(_flag)]
Text = Annotated[str, PlainValidator(_text)]
Count = Annotated[int, PlainValidator(_count)]
"""A whole number, at least 1."""
Size = Annotated[int, PlainValidator(_bytes)]
"""A size in bytes, at least 0: ``16777216``, ``"16 MiB"``, ``"64MB"``."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Compact(_Section):
    """``master.compact``: background compaction and the window of each level."""

    auto: Flag
    level1: LevelInterval
    level2: LevelInterval

    def by_level(self) -> dict[int, Every | None]:
        """The window of each compacted level: ``{1: level1, 2: level2}`` (None: off)."""
        return {1: self.level1, 2: self.level2}


class Retention(_Section):
    """``master.retention``: how long each level is kept by ``wlc.prune()`` (None: forever)."""

    level0: Duration
    level1: Duration
    level2: Duration
    snapshots: Duration

    def by_name(self) -> dict[str, Every | None]:
        """``{"level0": ..., "level1": ..., "level2": ..., "snapshots": ...}``, as
        :func:`wlcore.retention.retain` takes it."""
        return {"level0": self.level0, "level1": self.level1, "level2": self.level2, "snapshots": self.snapshots}


class MasterSettings(_Section):
    """``master``: ``beat`` (seconds a batch stays open), snapshots, compaction, retention."""

    beat: Seconds
    snapshot_interval: SnapshotInterval
    compact: Compact
    retention: Retention


class CaptureSettings(_Section):
    """``capture``: the capture loop's timings (seconds) and the table features it may switch on."""

    settle: Seconds
    polling: Flag
    poll_interval: Wait
    retry_max: Wait
    stage_within: Seconds
    stale_after: Seconds
    table_features: Annotated[list[str], PlainValidator(_features)]
    deltars: Flag


class ReplicaSettings(_Section):
    """``replica``: follow mode's beat and the defaults of ``replicate()`` (seconds; a
    selection of tables and rows; replay by segments; tables replayed at once; SQL names)."""

    beat: Wait
    retry_max: Wait
    follow: Flag
    logs: Text
    tables: Annotated[list[str], PlainValidator(_names)]
    where: dict[str, Any]
    stale_after: Seconds
    timeout: Seconds
    collapse: Flag
    parallelism: Count
    rewrite_bytes: Size
    deltars_bytes: Size
    names: Flag
    spark_idle: Duration


class S3Settings(_Section):
    """``storage.s3``: an S3-compatible store's endpoint, keys and region (empty: the AWS defaults)."""

    endpoint_url: Text
    key: Text
    secret: Text
    region: Text


class StorageSettings(_Section):
    """``storage``: object-store access, ``wlc ship --follow``'s ``ship_poll`` (seconds) and how
    often a shipping pass prunes its copy (``ship_prune``, a duration; None: never)."""

    s3: S3Settings
    ship_poll: Wait
    ship_prune: Duration


class MetricsSettings(_Section):
    """``metrics``: where capture, followers and shippers serve ``/metrics`` for Prometheus."""

    port: Annotated[int | None, PlainValidator(port_number)]
    host: Text


class SparkSettings(_Section):
    """``spark``: the session wlc and wlr start (``conf``: any Spark setting)."""

    master: Text
    s3a: Annotated[bool | Literal["auto"], PlainValidator(_s3a)]
    app_name: Text
    log_level: Text
    metastore: Text
    conf: dict[str, Any]


class Settings(_Section):
    """All settings: the packaged defaults with the override files merged over them."""

    dbfarm: Text
    master: MasterSettings
    capture: CaptureSettings
    replica: ReplicaSettings
    storage: StorageSettings
    metrics: MetricsSettings
    spark: SparkSettings


FREE_FORM = {"spark.conf", "replica.where"}  # sections whose keys are not checked
_STRUCTURE = ("extra_forbidden", "model_type", "dict_type")


def validate(data: dict, source: str) -> Settings:
    """Return ``data`` (the merged settings, a nested dict) as :class:`Settings`.

    Args:
        data (dict): the settings; every key of the packaged defaults, values as YAML gives them.
        source (str): the file the last values came from, named in the error.

    Raises:
        ConfigError: the first problem, named as ``<source>: unknown setting 'a.b'; did you mean
            'a.c'?``, ``<source>: setting 'a' must be a mapping ...`` or ``<source>: a.b must be ...``.
    """
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = min(range(len(errors)), key=lambda i: (errors[i]["type"] not in _STRUCTURE, i))
        raise ConfigError(f"{source}: {_message(errors[first])}") from None


def _message(error: Mapping[str, Any]) -> str:
    loc = [str(part) for part in error["loc"]]
    dotted = ".".join(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        prefix = ".".join(loc[:-1]) + "." if len(loc) > 1 else ""
        valid = [prefix + k for k in _model_at(loc[:-1]).model_fields]
        near = difflib.get_close_matches(dotted, valid, n=1, cutoff=0.5)
        hint = f"did you mean {near[0]!r}?" if near else f"valid here: {', '.join(valid)}"
        return f"unknown setting {dotted!r}; {hint}"
    if kind == "dict_type" and dotted in FREE_FORM:
        return f"setting {dotted!r} must be a mapping (of Spark settings, or of schema.table to a predicate)"
    if kind == "model_type":
        keys = ", ".join(_model_at(loc).model_fields)
        return f"setting {dotted!r} must be a mapping (keys {keys}), not {error['input']!r}"
    if kind == "value_error":
        text = str(error["ctx"]["error"])
        return text if text.startswith(dotted + " ") else f"{dotted} {text}"
    if kind == "missing":
        return f"setting {dotted!r} is missing"
    return f"{dotted}: {error['msg']}"


def _model_at(loc: list[str]) -> type[BaseModel]:
    model: type[BaseModel] = Settings
    for part in loc:
        model = model.model_fields[part].annotation  # type: ignore[assignment]
    return model


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
    output (:func:`wlcore.session.quiet_start`). Not made here."""
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


class _Loader:
    """The chosen configuration file and the settings last loaded, with what they were loaded
    for: ``choice`` (:func:`_choice`: the working folder, the chosen file, ``WLC_DBFARM``) and
    ``texts`` the files' contents."""

    def __init__(self) -> None:
        self.chosen: Path | None = None
        self.lock = threading.Lock()
        self.choice: tuple | None = None
        self.texts: tuple[tuple[Path, str], ...] = ()
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


def _choice() -> tuple[str | None, Path | None, str | None]:
    """What the settings are loaded for: the working folder (``config/wlc.yaml`` is relative to
    it; None: it was deleted), :func:`config_file` and ``WLC_DBFARM``. No file is looked at."""
    try:
        cwd: str | None = os.getcwd()
    except FileNotFoundError:
        cwd = None
    return cwd, config_file(), os.environ.get("WLC_DBFARM") or None


def settings() -> Settings:
    """Return the settings: the packaged defaults, then ``config/wlc.yaml`` of the working
    folder (when present), then :func:`config_file`, then ``$WLC_DBFARM``, as one
    :class:`~wlcore.settings.Settings` (durations in seconds, intervals as
    :class:`~wlcore.settings.Every`). Loaded and validated once per process; loaded again only
    when the choice changes (the working folder, :func:`choose_config` / :func:`use_config`,
    ``WLC_CONFIG`` or ``WLC_DBFARM``). A call looks at no file: an edit of a file already
    loaded is seen after :func:`reload`.

    Raises:
        ConfigError: the YAML file named by ``WLC_CONFIG`` is missing, a file is not a YAML
            mapping, it has a key the defaults do not have (the message names the nearest
            valid key) or a malformed value (the message names the file and the key).
    """
    choice = _choice()
    with _loader.lock:
        value = _loader.value
        if value is not None and _loader.choice == choice:
            return value
    return _load_for(choice)


def reload() -> Settings:
    """Read the settings' files again and return the settings (the same object when no file's
    text changed), for a process that must see an edit of a file it already loaded.

    Raises:
        ConfigError: as :func:`settings`.
    """
    return _load_for(_choice())


def _load_for(choice: tuple[str | None, Path | None, str | None]) -> Settings:
    cwd, extra, farm = choice
    files = [LOCAL_FILE] if cwd is not None and LOCAL_FILE.is_file() else []
    if extra is not None:
        files.append(extra)
    texts = tuple((path, _read(path)) for path in files)
    with _loader.lock:
        same = _loader.value is not None and _loader.choice is not None and _loader.choice[2] == farm
        if same and _loader.texts == texts:
            _loader.choice = choice
            return _loader.value  # type: ignore[return-value]
    value = _load(texts, farm)
    with _loader.lock:
        _loader.choice, _loader.texts, _loader.value = choice, texts, value
    return value


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
    (the package version and the batch format version, :func:`wlcore.version_text`).

    Args:
        parser (argparse.ArgumentParser): the command line's parser, changed in place.
    """
    from . import version_text

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
