"""The state files: MonetDB's ``key=value`` files of a master (``wlc.config``) and of a replica (``wlr.config``).

## The form: typed files that write back what they read

A state file is a pydantic model whose fields are its keys, each annotated with a :class:`Codec`
turning the file's text into a typed value (an int, a UTC datetime, a dict) and back. The keys keep
the order they have in the file, as a Python dict keeps insertion order: assigning a field
that is not in the file yet appends its key (the model validates each assignment), :meth:`StateFile.drop` removes one, and keys
no field knows are kept as text in ``extra`` and written back where they stood. So a file
read and written again is the same text, byte for byte, and a new one lists its keys in
the order they were first set (the order the dict-based writers used).

## A master's ``wlc.config``, and what it says about capture

The file has MonetDB's keys (``snapshot``, ``logs``, ``state`` 1 started / 2 stopped,
``batches`` next batch number, ``beat`` seconds, ``write`` time of the last transaction
recorded) plus ``dbid`` (the database id in every GTID), ``format`` (batch format version),
``tick`` (last transaction id published) and ``watermark`` (every master commit at or before it
is in a published batch), ``epoch`` (this capture session's random id), ``epochs`` (the epoch
history, :mod:`wlcore.epochs`), ``heartbeat`` and ``capture_stopped``. Capture writes it; the
replay side, status and shipping read it. :class:`MasterState` is the file as a typed object;
:func:`read_master_state` and :func:`write_master_state` are the one reader and writer.

The paths it names inside the database folder (``logs``, ``snapshot``: :data:`MASTER_PATH_KEYS`) are
written relative to that folder and read back resolved against where the folder is now, so a
master folder moved, copied or restored from a backup still finds its logs and snapshots. A file
written before keeps absolute paths and is still read; :func:`check_paths` names such a path
when it is stale (the folder was moved) and how to fix it.

## A replica's ``wlr.config``

The replay side writes it after every round: which master it follows (``master``,
``masterfarm``, ``dbid``) through which source (``source``, ``source_kind``, the selection
``select_tables`` / ``select_where``), where it stands (``logs``, ``batches`` the next batch,
``tick`` the last *applied* transaction, ``clock`` its commit time, ``skipped``
transactions), its ``state`` (``restoring``, ``new``, ``idle``, ``following``, ``failed``),
a failure (``error_batch``, ``error_txn``, ``error_table``, ``error_cause``) and a follower's
retries of it (``retries``, ``retry_at``), the epoch
history (``epochs``, ``epoch``), the consistent view (``view`` and ``at.<table>``), each
table's Delta version (``version.<table>``), ``until``, ``relay`` and ``heartbeat``.
:func:`read_replica_state` and :func:`write_replica_state` are its one reader and writer.
The master's paths it names (:data:`REPLICA_PATH_KEYS`) are written relative to the replica's folder when
they are in the replica's dbfarm (``masterfarm=..``, ``logs=../m/wlc_logs``) and read back against
where the folder is now, so a dbfarm moved or restored elsewhere keeps its replicas' masters.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Callable, ClassVar, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, PrivateAttr, ValidationError, model_validator
from pydantic_core import CoreSchema, core_schema

from .errors import ConfigError, StalePathError
from .names import name_of_key, state_key
from .settings import format_kv, parse_kv, settings
from .storage import Storage
from .utc import parse_utc, utc_iso

S = TypeVar("S", bound="StateFile")


@dataclass(frozen=True)
class Codec:
    """How one key's text becomes a typed value (``parse``) and back (``render``); ``render``
    of ``parse(text)`` is ``text`` for every text today's writers produce.

    A codec is pydantic metadata: a field annotated ``Annotated[int, INT]`` is validated by
    ``parse`` when given text (a file's line) and kept as given otherwise (a value set in
    code), and serialized (``model_dump``) by ``render``.
    """

    parse: Callable[[str], Any]
    render: Callable[[Any], str]

    def validate(self, value: Any) -> Any:
        """``value`` as the field holds it: text parsed, anything else as given."""
        return self.parse(value) if isinstance(value, str) else value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self.validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                self.render, return_schema=core_schema.str_schema()
            ),
        )


def _int_or_none(text: str) -> int | None:
    return int(text) if text.strip() else None


def _seconds(value: float | None) -> str:
    """Seconds as the master writes them: ``"3"`` for whole seconds, else ``repr`` (``"0.5"``)."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


TEXT = Codec(str, lambda v: "" if v is None else str(v))
INT = Codec(_int_or_none, lambda v: "" if v is None else str(int(v)))
SECONDS = Codec(lambda t: float(t) if t.strip() else None, _seconds)
UTC = Codec(lambda t: parse_utc(t) if t.strip() else None, lambda v: "" if v is None else utc_iso(v))


def _json_of(kind: type, text: str) -> Any:
    value = json.loads(text) if text.strip() else kind()
    if not isinstance(value, kind):
        raise ValueError(f"not a JSON {'object' if kind is dict else 'list'}")
    return value


JSON_DICT = Codec(lambda t: _json_of(dict, t), lambda v: json.dumps(v, sort_keys=True) if v else "")
JSON_LIST = Codec(lambda t: _json_of(list, t), lambda v: json.dumps(list(v)) if v else "")
FLAG = Codec(lambda t: t == "1", lambda v: "1" if v else "")


def utc_or(word: str) -> Codec:
    """A UTC instant, or the literal ``word`` (``watermark=stopped``)."""
    return Codec(lambda t: word if t == word else UTC.parse(t), lambda v: word if v == word else UTC.render(v))


class StateFile(BaseModel):
    """Base of the typed state files: a pydantic model whose fields (other than ``extra`` and
    the :attr:`FAMILIES`) are keys of the file, each annotated with its :class:`Codec`
    (``tick: Annotated[int, INT] = -1``).

    ``extra`` holds keys no field knows (a newer version's), as text, written back as read.
    The keys keep the order they were set in (a file's: its lines'): pydantic validates each
    assignment, and the validator of the model appends a key it sees set for the first time.
    """

    model_config = ConfigDict(validate_assignment=True)

    FAMILIES: ClassVar[tuple[str, ...]] = ()  # fields that hold a family of keys (``version.<table>``)
    KEY_FIELDS: ClassVar[frozenset[str]] = frozenset()  # the fields that are keys of the file (set per subclass)
    extra: dict[str, str] = Field(default_factory=dict)
    _keys: list[str] = PrivateAttr(default_factory=list)
    _seen: set[str] = PrivateAttr(default_factory=set)  # the fields of model_fields_set already looked at

    __hash__ = object.__hash__  # one state is one file: compared and hashed by identity

    def __eq__(self, other: object) -> bool:
        return self is other

    def model_post_init(self, context: Any, /) -> None:
        """The keys given to the constructor are the file's first keys, in the fields' order."""
        given = self.model_fields_set
        self._keys = [k for k in type(self).model_fields if k in given and k in self.KEY_FIELDS]
        self._seen = set(given)

    @model_validator(mode="after")
    def _keep_order(self) -> "StateFile":
        """Append a key set for the first time (one assignment at a time: their order is kept)."""
        private = self.__pydantic_private__
        if private is None or "_seen" not in private:  # constructing: model_post_init takes it from here
            return self
        seen, given = private["_seen"], self.__pydantic_fields_set__
        if len(given) != len(seen):  # a field set for the first time (pydantic adds it to model_fields_set)
            keys = private["_keys"]
            for name in given - seen:
                if name in self.KEY_FIELDS and name not in keys:
                    keys.append(name)
            seen.update(given)
        return self

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.KEY_FIELDS = frozenset(n for n in cls.model_fields if n != "extra" and n not in cls.FAMILIES)

    @classmethod
    def is_key(cls, name: str) -> bool:
        """True when the field ``name`` is a key of the file (not ``extra`` nor a family)."""
        return name in cls.KEY_FIELDS

    # -------------------------------------------------------------- keys
    @classmethod
    def of(cls: type[S], **values: Any) -> S:
        """A new state holding exactly ``values``, its keys in the order given (None: an empty value)."""
        out = cls()
        for key, value in values.items():
            setattr(out, key, value)
        return out

    def has(self, key: str) -> bool:
        """True when ``key`` is in the file (possibly empty)."""
        return key in self._keys or key in self.extra

    def _holds(self, key: str) -> bool:
        """True when ``key`` is one this state can hold (subclasses add their key families)."""
        return self.is_key(key) or key in self.extra

    def keys(self) -> list[str]:
        """The file's keys, in the order they are written."""
        keys = [k for k in self._keys if self._holds(k)]
        return keys + [k for k in self.extra if k not in keys]

    def drop(self, key: str) -> None:
        """Remove ``key`` from the file (its field returns to its default)."""
        self._untrack(key)
        self.extra.pop(key, None)
        if self.is_key(key):
            self.__dict__[key] = type(self).model_fields[key].get_default(call_default_factory=True)
            self.model_fields_set.discard(key)
            self._seen.discard(key)

    def _track(self, key: str) -> None:
        """Record ``key`` as set (for keys kept outside the typed fields, e.g. ``version.<table>``)."""
        if key not in self._keys:
            self._keys.append(key)

    def _untrack(self, key: str) -> None:
        if key in self._keys:
            self._keys.remove(key)

    def copy(self: S) -> S:  # type: ignore[override]  # pydantic's deprecated copy(): this one keeps the keys' order
        """An independent copy (same keys, same order)."""
        return type(self).from_text(self.to_text())

    # -------------------------------------------------------------- text
    def text(self, key: str) -> str | None:
        """The file's text of ``key`` (its codec's rendering; None: not a key this state holds).

        Args:
            key (str): the key.

        Returns:
            str | None: the text written for it.
        """
        return self._text_of(key)

    def _text_of(self, key: str) -> str | None:
        """The text of ``key`` (None: not held). Subclasses add their key families here."""
        if self.is_key(key):
            return self.model_dump(include={key})[key]
        return self.extra.get(key)

    def _take(self, key: str, text: str, source: str) -> None:
        """Set ``key`` from its ``text`` read from ``source``. Subclasses add their key families here."""
        if not self.is_key(key):
            self.extra[key] = text
            self._track(key)
            return
        try:
            setattr(self, key, text)
        except ValidationError as exc:
            cause = exc.errors()[0].get("ctx", {}).get("error", exc)
            raise ConfigError(f"{source}: {key}={text!r} is malformed ({cause}); fix or remove the line") from None

    def to_text(self) -> str:
        """The file's text: ``key=value`` lines (:func:`wlcore.settings.format_kv`), its keys in order."""
        pairs = {}
        rendered = self.model_dump(exclude={"extra", *self.FAMILIES})  # each typed key's text, by its codec
        for key in self.keys():
            text = rendered[key] if key in rendered else self._text_of(key)
            if text is not None:
                pairs[key] = text
        return format_kv(pairs)

    @classmethod
    def from_text(cls: type[S], text: str, source: str = "<text>") -> S:
        """Parse a state file's ``text`` (``source`` names it in errors).

        Raises:
            ConfigError: a line is not ``key=value``, or a typed key's value is malformed;
                the message names the file and the key.
        """
        out = cls()
        for key, value in parse_kv(text, source).items():
            out._take(key, value, source)
        return out


MASTER_CONFIG = "wlc.config"
LOCK_FILE = "wlc.lock"  # held (Storage.lock) by the process that captures the database
LOG_FILE = "wlc.log"  # a line per published batch
STARTED, STOPPED = 1, 2
WATERMARK_STOPPED: Final = "stopped"  # ``watermark`` once the master stopped logging
WATERMARK = utc_or(WATERMARK_STOPPED)  # the ``watermark`` key's codec


class MasterState(StateFile):
    """A master's ``wlc.config`` (MonetDB's keys and wlc's), typed; see the module.

    Its keys are written in the order they were first set (a new master's: ``snapshot``
    to ``not_replicated`` below), a file read and written back is the same text.

    Attributes:
        snapshot: folder of the newest snapshot ("": none yet).
        logs: the log folder (path or URL; "": ``<db>/wlc_logs``, see :func:`logs_of`).
        state: :data:`STARTED` (1) or :data:`STOPPED` (2), as MonetDB's.
        batches: the next batch number to publish.
        beat: seconds between a batch's first record and its publication (None: the default).
        write: UTC commit time of the last published transaction (None: none yet).
        dbid: the database id in every GTID.
        format: the batch format version (:data:`wlcore.FORMAT_VERSION`).
        tick: id of the last *published* transaction (-1: none).
        watermark: every master commit at or before this UTC instant is in a published
            batch; :data:`WATERMARK_STOPPED` once the master stopped; None: not known yet.
        created: UTC instant the database became a master.
        not_replicated, feed_notes, held: per-table notes ``{table or path: text}``
            (:class:`wlc.master_record.TableNotes`).
        epoch: this capture session's random id; epochs: the epoch history as text
            (:func:`wlcore.epochs.parse` reads it; kept as text so a damaged one is reported
            where it is used).
        heartbeat: UTC instant capture last said it was alive; capture_stopped: UTC instant
            capture stopped cleanly (absent while it runs).
        database, shipped, shipped_from, relay_of: a shipped copy's or relay's (:mod:`wlcore.ship`):
            the master's name, when it was shipped (UTC), from where, and the relaying replica.
            A promoted master's ``database`` is the name of the database it holds (its batches'
            prefix) when its folder has another name (:mod:`wlcore.promotion`).
        promoted, promoted_from, promoted_tick: a master made by promoting a replica: the UTC
            instant, the folder of the master it followed, and the last transaction of the old
            history it kept (its new epoch starts at ``promoted_tick + 1``).
        capture_error, capture_error_since: why capture's scans fail (the error's one line) and
            since when (UTC), while they do (absent once a scan went well again).
    """

    snapshot: Annotated[str, TEXT] = ""
    logs: Annotated[str, TEXT] = ""
    state: Annotated[int, INT] = STARTED
    batches: Annotated[int, INT] = 0
    beat: Annotated[float | None, SECONDS] = None
    write: Annotated[datetime | None, UTC] = None
    dbid: Annotated[str, TEXT] = ""
    format: Annotated[int | None, INT] = None
    tick: Annotated[int, INT] = -1
    watermark: Annotated[datetime | Literal["stopped"] | None, WATERMARK] = None
    created: Annotated[datetime | None, UTC] = None
    not_replicated: Annotated[dict[str, str], JSON_DICT] = Field(default_factory=dict)
    epoch: Annotated[str, TEXT] = ""
    epochs: Annotated[str, TEXT] = ""
    heartbeat: Annotated[datetime | None, UTC] = None
    capture_stopped: Annotated[datetime | None, UTC] = None
    feed_notes: Annotated[dict[str, str], JSON_DICT] = Field(default_factory=dict)
    held: Annotated[dict[str, str], JSON_DICT] = Field(default_factory=dict)
    database: Annotated[str, TEXT] = ""
    shipped: Annotated[datetime | None, UTC] = None
    shipped_from: Annotated[str, TEXT] = ""
    relay_of: Annotated[str, TEXT] = ""
    promoted: Annotated[datetime | None, UTC] = None
    promoted_from: Annotated[str, TEXT] = ""
    promoted_tick: Annotated[int | None, INT] = None
    capture_error: Annotated[str, TEXT] = ""
    capture_error_since: Annotated[datetime | None, UTC] = None

    @property
    def stopped(self) -> bool:
        """True when the master stopped logging for good (``state=2``)."""
        return self.state == STOPPED

    @property
    def watermark_time(self) -> datetime | None:
        """The watermark as a UTC instant (None: not known yet, or the master stopped)."""
        return None if self.watermark in (None, WATERMARK_STOPPED) else self.watermark  # type: ignore[return-value]

    @property
    def is_shipped(self) -> bool:
        """True for a shipped copy's or relay's state (it has ``shipped``)."""
        return bool(self.has("shipped") and self.shipped)


def logs_of(cfg: MasterState | None, db_path: str) -> str:
    """The log folder of the master at ``db_path``.

    Args:
        cfg (MasterState | None): its ``wlc.config`` (None: not known).
        db_path (str): the master's folder.

    Returns:
        str: ``logs`` of ``cfg`` when set, else ``<db>/wlc_logs``.
    """
    return (cfg.logs if cfg is not None else "") or Storage.join(db_path, "wlc_logs")


MASTER_PATH_KEYS: Final = ("logs", "snapshot")  # kept relative to the database folder when inside it


def _is_absolute(path: str) -> bool:
    return "://" in path or posixpath.isabs(path)


def resolve_path(storage: Storage, db_path: str, path: str) -> str:
    """A path as a state file holds it, resolved against where the database folder is now.

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database folder (path or URL).
        path (str): the value read ("" stays ""; an absolute path or a URL is returned as it is).

    Returns:
        str: the absolute path (or URL) the value names.
    """
    if not path or _is_absolute(path):
        return path
    full = Storage.join(storage.absolute(db_path), path)
    return full if "://" in full else posixpath.normpath(full)


def relative_path(storage: Storage, db_path: str, path: str, within: str | None = None) -> str:
    """``path`` as a state file stores it: relative to the database folder when inside ``within``,
    else absolute (a URL as it is).

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database folder (path or URL).
        path (str): a path (relative: to the working folder) or URL ("" stays "").
        within (str | None): the folder whose paths are stored relative (None: the database
            folder; a replica's dbfarm holds the master it follows there: ``../master``).
    """
    if not path:
        return path
    folder = storage.absolute(db_path).rstrip("/")
    full = storage.absolute(path).rstrip("/")
    if "://" in full or "://" in folder:
        return full[len(folder) + 1 :] if within is None and full.startswith(folder + "/") else full
    folder, full = posixpath.normpath(folder), posixpath.normpath(full)
    outer = posixpath.normpath(storage.absolute(within)) if within is not None else folder
    if not (full + "/").startswith(outer.rstrip("/") + "/") or full == folder:
        return full
    return posixpath.relpath(full, folder)


def read_master_state(storage: Storage, db_path: str) -> MasterState | None:
    """A database's ``wlc.config``, or None when it is not (and never was) a master.

    Paths relative to the database folder (:data:`MASTER_PATH_KEYS`) are resolved against ``db_path``.

    Args:
        storage: the storage holding the database.
        db_path: the database folder (path or URL).

    Raises:
        ConfigError: the file is malformed (a line without ``=``, a number that is none); the
            message names the file and the key.
    """
    path = Storage.join(db_path, MASTER_CONFIG)
    if not storage.exists(path):
        return None
    cfg = MasterState.from_text(storage.read_text(path), path)
    for key in MASTER_PATH_KEYS:
        if cfg.has(key):
            setattr(cfg, key, resolve_path(storage, db_path, getattr(cfg, key)))
    return cfg


def stale_paths(storage: Storage, db_path: str, cfg: MasterState) -> list[tuple[str, str, str | None]]:
    """The paths of ``cfg`` (:data:`MASTER_PATH_KEYS`) that are not this database folder's own although
    they should be: ``[(key, path, tail)]``.

    ``tail`` is the path relative to the database folder it names when this folder holds it too
    (``/old/farm/db/wlc_logs`` of ``/new/farm/db``: ``wlc_logs``): the folder was moved or copied
    with a file of absolute paths. ``tail`` is None for a log folder that is not there at all.
    A snapshot missing for another reason is not named (readers list ``wlc_snapshot`` anyway).

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database folder.
        cfg (MasterState): its ``wlc.config`` as read (:func:`read_master_state`).
    """
    found: list[tuple[str, str, str | None]] = []
    for key in MASTER_PATH_KEYS:
        value = getattr(cfg, key)
        if not value or "://" in value or relative_path(storage, db_path, value) != storage.absolute(value):
            continue  # none, a URL, or inside the database folder
        tail = _moved_here(storage, db_path, value)
        if tail is not None or (key == "logs" and not storage.exists(value)):
            found.append((key, value, tail))
    return found


def stale_message(storage: Storage, db_path: str, cfg: MasterState) -> str:
    """What :func:`check_paths` says of ``cfg`` ("": every path it names is there and its own).

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database folder.
        cfg (MasterState): its ``wlc.config`` as read (:func:`read_master_state`).
    """
    stale = stale_paths(storage, db_path, cfg)
    if not stale:
        return ""
    config = Storage.join(db_path, MASTER_CONFIG)
    named = " and ".join(f"{key}={path}" for key, path, _t in stale)
    if all(tail is not None for _k, _p, tail in stale):
        old = sorted({path[: -len(tail) - 1] for _k, path, tail in stale if tail is not None})
        fix = ", ".join(f"{key}={tail}" for key, _p, tail in stale)
        gone = all(not storage.exists(path) for _k, path, _t in stale)
        how = (
            "which no longer exists: the database folder was moved here"
            if gone
            else "the folder of another copy of this database: this folder was copied here"
        )
        return (
            f"{config} names {named}, {how} from {' or '.join(old)} while its wlc.config held absolute paths. "
            f"Edit {config} to say {fix} (paths relative to the database folder, which hold wherever it is), "
            "then run the command again"
        )
    return (
        f"{config} names {named}, which does not exist (moved, deleted, or on a folder not mounted "
        f"here); put the folder back, or edit the line in {config} to name where it is now"
    )


def check_paths(storage: Storage, db_path: str, cfg: MasterState) -> None:
    """Refuse a ``wlc.config`` that names a log folder or snapshot that is not there (a database
    folder moved or copied with a file that holds absolute paths, or a folder deleted).

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database folder.
        cfg (MasterState): its ``wlc.config`` as read (:func:`read_master_state`).

    Raises:
        StalePathError: the message names each missing path and the fix: the line to write in
            ``wlc.config`` (a path relative to the database folder, when the folder holds it).
    """
    message = stale_message(storage, db_path, cfg)
    if message:
        raise StalePathError(message)


def _moved_here(storage: Storage, db_path: str, path: str) -> str | None:
    """The part of ``path`` after a folder of the database folder's name when the database folder
    holds it (``/old/farm/db/wlc_logs`` of ``/new/farm/db``: ``wlc_logs``), else None."""
    name = posixpath.basename(storage.absolute(db_path).rstrip("/"))
    parts = path.rstrip("/").split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1] == name:
            tail = "/".join(parts[i:])
            if storage.exists(Storage.join(db_path, tail)):
                return tail
    return None


def write_master_state(storage: Storage, db_path: str, state: MasterState) -> str:
    """Write ``state`` as ``<db_path>/wlc.config`` (atomically: readers see the old file or the new one).

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder (path or URL).
        state (MasterState): the state to write.

    Paths inside the database folder (:data:`MASTER_PATH_KEYS`) are written relative to it.

    Returns:
        str: the text written.
    """
    written = state.copy()
    for key in MASTER_PATH_KEYS:
        if written.has(key):
            setattr(written, key, relative_path(storage, db_path, getattr(written, key)))
    text = written.to_text()
    storage.write_atomic(Storage.join(db_path, MASTER_CONFIG), text)
    return text


STALE_AFTER = 3  # heartbeat intervals without a heartbeat: the process is taken for gone (and capture.stale_after)


def liveness(
    heartbeat: datetime | str | None, interval: float, now: datetime, stale_after: float = 30.0
) -> tuple[str, datetime | None]:
    """``("alive" | "stale" | "unknown", last heartbeat)`` from a state file's ``heartbeat``.

    Args:
        heartbeat: the state file's ``heartbeat`` value (a UTC instant), or None/empty (never written).
        interval: seconds between heartbeats.
        now: the UTC instant to judge at.
        stale_after: seconds (``capture.stale_after`` / ``replica.stale_after``): a heartbeat older
            than this and than :data:`STALE_AFTER` intervals is stale, so a long scan copying
            change rows is not taken for death.
    """
    if not heartbeat:
        return "unknown", None
    last = parse_utc(heartbeat) if isinstance(heartbeat, str) else heartbeat
    alive = (now - last).total_seconds() <= max(STALE_AFTER * interval, stale_after)
    return ("alive" if alive else "stale"), last


def capture_liveness(cfg: MasterState, now: datetime) -> tuple[str, datetime | None]:
    """Capture's liveness from a master's ``wlc.config``.

    Args:
        cfg (MasterState): the master's ``wlc.config``.
        now (datetime): the UTC instant to judge at (the heartbeat's age is counted to it).

    Returns:
        tuple[str, datetime | None]: one of

        - ``("stopped", when)``: capture was stopped cleanly (Ctrl-C, SIGTERM, ``Master.close()``:
          ``capture_stopped`` in wlc.config, later than the last heartbeat) or the master stopped
          logging (state=2);
        - ``("alive", last heartbeat)`` / ``("stale", last heartbeat)``: the heartbeat is younger /
          older than ``capture.stale_after`` seconds (and 3 poll intervals): a stale capture died
          (killed, crashed, hung) at about that instant;
        - ``("not started", None)``: capture never ran on this master.
    """
    stopped, beat = cfg.capture_stopped, cfg.heartbeat
    if cfg.stopped:
        return "stopped", stopped
    if stopped is not None and (beat is None or beat <= stopped):
        return "stopped", stopped
    cap = settings().capture
    state, last = liveness(beat, cap.poll_interval, now, cap.stale_after)
    return ("not started" if state == "unknown" else state), last


REPLICA_CONFIG = "wlr.config"
REPLICA_PATH_KEYS = ("masterfarm", "source", "logs")  # relative to the replica's folder when in its dbfarm (``..``)
VERSION, AT = "version.", "at."  # key prefixes: a table's Delta version, and its version in the view

_INT_LIST = Codec(lambda t: [int(x) for x in t.split(",") if x.strip()], lambda v: ",".join(str(x) for x in v or []))


ReplayStatus = Literal["", "restoring", "new", "idle", "following", "failed"]
"""A replica's recorded ``state``: ``restoring`` (``wlr restore`` is copying it), ``new`` (made,
nothing applied), ``idle`` (caught up, no follower), ``following``, ``failed`` (a transaction
failed: ``error_*``); ``""`` in a file written before states were recorded."""


class ReplicaState(StateFile):
    """A replica's ``wlr.config``, typed; see the module. Keys keep their order; a file read
    and written back is the same text.

    Attributes:
        tick: id of the last *applied* transaction (-1: none); clock: its commit time (UTC).
        batches: the next level-0 batch number to read.
        skipped: transaction ids skipped by ``wlr.skip`` (PostgreSQL's ``pg_replication_origin_advance``).
        error_batch, error_txn: where replay failed (None: not known or no failure).
        retries: a follower's attempts at the failure since it was stored; retry_at: when (UTC)
            it tries again (None: no retry waiting), as PostgreSQL's apply worker restarts.
        view: the transaction consistent reads stand at (None: not set).
        relay: True when this replica relays what it applied.
        versions: ``{table: Delta version}`` (``version.<table>`` keys); views: the
            versions of the consistent view (``at.<table>``).
        select_tables: the table names and patterns a selective replica carries (``[]``: all;
            :mod:`wlr.select`); select_where: ``{table: Spark SQL predicate}`` of the rows it carries.
        until: the target of the last call, as given.
        source_error, source_error_since: why a follower's rounds cannot read its source, or the
            source refuses it (gone, moved, fenced), and since when (UTC); cleared by a round
            that reads it.
        master_beat: the master's beat (seconds) as its source last said (kept by a promotion
            when the old master's folder cannot be read; None: not known).
    """

    master: Annotated[str, TEXT] = ""
    masterfarm: Annotated[str, TEXT] = ""
    dbid: Annotated[str, TEXT] = ""
    source: Annotated[str, TEXT] = ""
    source_kind: Annotated[str, TEXT] = ""
    select_tables: Annotated[list[str], JSON_LIST] = Field(default_factory=list)
    select_where: Annotated[dict[str, str], JSON_DICT] = Field(default_factory=dict)
    logs: Annotated[str, TEXT] = ""
    batches: Annotated[int, INT] = 0
    tick: Annotated[int, INT] = -1
    clock: Annotated[datetime | None, UTC] = None
    skipped: Annotated[list[int], _INT_LIST] = Field(default_factory=list)
    state: Annotated[ReplayStatus, TEXT] = ""
    error_batch: Annotated[int | None, INT] = None
    error_txn: Annotated[int | None, INT] = None
    error_table: Annotated[str, TEXT] = ""
    error_cause: Annotated[str, TEXT] = ""
    retries: Annotated[int, INT] = 0
    retry_at: Annotated[datetime | None, UTC] = None
    epochs: Annotated[str, TEXT] = ""
    epoch: Annotated[str, TEXT] = ""
    view: Annotated[int | None, INT] = None
    until: Annotated[str, TEXT] = ""
    relay: Annotated[bool, FLAG] = False
    heartbeat: Annotated[datetime | None, UTC] = None
    master_beat: Annotated[float | None, SECONDS] = None
    source_error: Annotated[str, TEXT] = ""
    source_error_since: Annotated[datetime | None, UTC] = None
    versions: dict[str, int] = Field(default_factory=dict)
    views: dict[str, int] = Field(default_factory=dict)

    FAMILIES: ClassVar[tuple[str, ...]] = ("versions", "views")

    def _family(self, key: str) -> dict[str, int] | None:
        if key.startswith(VERSION):
            return self.versions
        if key.startswith(AT):
            return self.views
        return None

    def _text_of(self, key: str) -> str | None:
        family = self._family(key)
        if family is None:
            return super()._text_of(key)
        prefix = VERSION if family is self.versions else AT
        value = family.get(name_of_key(prefix, key))
        return None if value is None else str(value)

    def _take(self, key: str, text: str, source: str) -> None:
        family = self._family(key)
        if family is None:
            super()._take(key, text, source)
            return
        prefix = VERSION if family is self.versions else AT
        try:
            family[name_of_key(prefix, key)] = int(text)
        except ValueError:
            raise ConfigError(f"{source}: {key}={text!r} is not a Delta version; fix or remove the line") from None
        self._track(key)

    def set_version(self, table: str, version: int) -> None:
        """Record ``table``'s Delta version (``version.<table>``)."""
        self.versions[table] = int(version)
        self._track(state_key(VERSION, table))

    def drop_version(self, table: str) -> None:
        """Forget ``table``'s version (the table was dropped)."""
        self.versions.pop(table, None)
        self._untrack(state_key(VERSION, table))

    def set_views(self, views: dict[str, int]) -> None:
        """Replace the consistent view's versions (``at.<table>``: the old keys go, the new
        ones are appended in ``views``' order)."""
        for table in list(self.views):
            self._untrack(state_key(AT, table))
        self.views = {}
        for table, version in views.items():
            self.views[table] = int(version)
            self._track(state_key(AT, table))

    def set_error(self, batch: int | None, txn: int | None, table: str, cause: str) -> None:
        """Record a failure (PostgreSQL's apply worker keeps the failed transaction the same way):
        ``error_batch``, ``error_txn``, ``error_table``, ``error_cause``, set in this order (a key
        not in the file yet is appended). All four empty: no failure.

        Args:
            batch (int | None): the level-0 batch number the failure is in (None: empty).
            txn (int | None): the transaction id that failed (None: a failure of the logs, not tied
                to one transaction).
            table (str): the table it failed on ("": none).
            cause (str): the error, one line ("": no failure).
        """
        self.error_batch = batch
        self.error_txn = txn
        self.error_table = table
        self.error_cause = cause

    @property
    def empty(self) -> bool:
        """True when the file holds no key: the folder is not a replica (yet)."""
        return not self.keys()

    @property
    def view_tick(self) -> int:
        """The transaction consistent reads stand at: ``view``, else ``tick`` (-1: none)."""
        return self.view if self.view is not None else self.tick

    def read_versions(self) -> dict[str, int]:
        """``{table: Delta version}`` consistent reads use: the view's (``at.<table>``) when a
        view is recorded, else each table's last version (``version.<table>``)."""
        return dict(self.views if self.has("view") else self.versions)

    def _holds(self, key: str) -> bool:
        return self._family(key) is not None or super()._holds(key)


def read_replica_state(storage: Storage, db_path: str) -> ReplicaState | None:
    """A database's ``wlr.config``, or None when it is not a replica.

    Args:
        storage: the storage holding the database.
        db_path: the replica's folder (path or URL).

    Raises:
        ConfigError: the file is malformed; the message names the file and the key.
    """
    path = Storage.join(db_path, REPLICA_CONFIG)
    if not storage.exists(path):
        return None
    state = ReplicaState.from_text(storage.read_text(path), path)
    if storage.os_path(db_path) is not None:  # local folders: paths relative to the replica's folder
        for key in REPLICA_PATH_KEYS:
            if state.has(key):
                setattr(state, key, resolve_path(storage, db_path, getattr(state, key)))
    return state


def write_replica_state(storage: Storage, db_path: str, state: ReplicaState) -> str:
    """Write ``state`` as ``<db_path>/wlr.config`` (atomically: readers see the old file or the new one).

    Args:
        storage (Storage): the storage holding the replica.
        db_path (str): the replica's folder (path or URL).
        state (ReplicaState): the state to write.

    The master's paths in the replica's dbfarm (:data:`REPLICA_PATH_KEYS`) are written relative to the
    replica's folder (local folders).

    Returns:
        str: the text written.
    """
    written = state
    local = storage.os_path(db_path)
    if local is not None:
        written = state.copy()
        farm = os.path.dirname(local.rstrip("/"))
        for key in REPLICA_PATH_KEYS:
            if written.has(key):
                setattr(written, key, relative_path(storage, db_path, getattr(written, key), within=farm))
    text = written.to_text()
    storage.write_atomic(Storage.join(db_path, REPLICA_CONFIG), text)
    return text
