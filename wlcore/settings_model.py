"""The settings as one typed, validated object: a model per section of ``wlc.yaml``.

:func:`validate` turns the merged YAML (a nested dict) into :class:`Settings` with pydantic
and turns pydantic's errors into :class:`~wlcore.errors.ConfigError` messages that name the
file and the setting: an unknown key with the nearest valid one, a section that is not a
mapping with its keys, a malformed value with the forms accepted. Every key must be in the
packaged defaults (``wlcore/defaults/wlc.yaml``), which are validated by the same model;
the free-form sections ``spark.conf`` (any Spark setting) and ``replica.where`` (schema.table
to a predicate) stay dicts.

Units are in the types: :data:`Seconds` and :data:`Wait` are float seconds, the intervals
and retentions (:data:`Duration`, :data:`SnapshotInterval`, :data:`LevelInterval`) are
:class:`~wlcore.durations.Every` (seconds, transactions or batches) or None for off.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError

from .durations import Every, interval, seconds
from .errors import ConfigError


def _seconds_from(minimum: float):
    return PlainValidator(lambda value: seconds(value, minimum))


def _interval_of(*counts: str):
    return PlainValidator(lambda value: interval(value, counts))


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
        return value.strip().lower() in ("true", "yes", "on")
    raise ValueError(f"must be true or false, not {value!r}")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"must be text, not {value!r}")
    return str(value)


def _count(value: Any) -> int:
    try:
        out = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        out = float("nan")
    if not out.is_integer() or out < 1:
        raise ValueError(f"must be a whole number >= 1, not {value!r}")
    return int(out)


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def _bytes(value: Any) -> int:
    text = str(value).strip().lower().replace(" ", "") if not isinstance(value, bool) else "?"
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(digits) :]
    try:
        out = float(digits) * _UNITS[unit]
    except (KeyError, ValueError):
        out = float("nan")
    if not out.is_integer() or out < 0:
        raise ValueError(f"must be a size in bytes >= 0 (a number, or with KiB, MiB, GiB, KB, MB, GB), not {value!r}")
    return int(out)


def _names(value: Any) -> list[str]:
    value = [value] if isinstance(value, str) else [] if value is None else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of schema.table names or patterns, not {value!r}")
    return list(value)


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
"""The table features capture may switch on (:mod:`wlcore.features`), by their setting names."""


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
