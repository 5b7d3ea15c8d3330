"""A master's state file, ``<db>/wlc.config``, and what it says about capture.

The file has MonetDB's keys (``snapshot``, ``logs``, ``state`` 1 started / 2 stopped,
``batches`` next batch number, ``beat`` seconds, ``write`` time of the last transaction
recorded) plus ``dbid`` (the database id in every GTID), ``format`` (batch format version),
``tick`` (last transaction id published) and ``watermark`` (every master commit at or before it
is in a published batch), ``epoch`` (this capture session's random id), ``epochs`` (the epoch
history, :mod:`wlcore.epochs`), ``heartbeat`` and ``capture_stopped``. Capture writes it; the
replay side, status and shipping read it. :class:`MasterState` is the file as a typed object;
:func:`read_master_state` and :func:`write_master_state` are the one reader and writer.

The paths it names inside the database folder (``logs``, ``snapshot``: :data:`PATH_KEYS`) are
written relative to that folder and read back resolved against where the folder is now, so a
master folder moved, copied or restored from a backup still finds its logs and snapshots. A file
written before keeps absolute paths and is still read; :func:`check_paths` names such a path
when it is stale (the folder was moved) and how to fix it.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, Final, Literal

from .errors import StalePathError
from .settings import settings
from .state_file import INT, JSON_DICT, SECONDS, TEXT, UTC, Codec, StateFile, utc_or
from .storage import Storage
from .utc import parse_utc

CONFIG_FILE = "wlc.config"
LOCK_FILE = "wlc.lock"  # held (Storage.lock) by the process that captures the database
LOG_FILE = "wlc.log"  # a line per published batch
STARTED, STOPPED = 1, 2
WATERMARK_STOPPED: Final = "stopped"  # ``watermark`` once the master stopped logging


@dataclass(eq=False)
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

    snapshot: str = ""
    logs: str = ""
    state: int = STARTED
    batches: int = 0
    beat: float | None = None
    write: datetime | None = None
    dbid: str = ""
    format: int | None = None
    tick: int = -1
    watermark: datetime | Literal["stopped"] | None = None
    created: datetime | None = None
    not_replicated: dict[str, str] = field(default_factory=dict)
    epoch: str = ""
    epochs: str = ""
    heartbeat: datetime | None = None
    capture_stopped: datetime | None = None
    feed_notes: dict[str, str] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)
    database: str = ""
    shipped: datetime | None = None
    shipped_from: str = ""
    relay_of: str = ""
    promoted: datetime | None = None
    promoted_from: str = ""
    promoted_tick: int | None = None
    capture_error: str = ""
    capture_error_since: datetime | None = None

    CODECS: ClassVar[dict[str, Codec]] = {
        "snapshot": TEXT,
        "logs": TEXT,
        "state": INT,
        "batches": INT,
        "beat": SECONDS,
        "write": UTC,
        "dbid": TEXT,
        "format": INT,
        "tick": INT,
        "watermark": utc_or(WATERMARK_STOPPED),
        "created": UTC,
        "not_replicated": JSON_DICT,
        "epoch": TEXT,
        "epochs": TEXT,
        "heartbeat": UTC,
        "capture_stopped": UTC,
        "feed_notes": JSON_DICT,
        "held": JSON_DICT,
        "database": TEXT,
        "shipped": UTC,
        "shipped_from": TEXT,
        "relay_of": TEXT,
        "promoted": UTC,
        "promoted_from": TEXT,
        "promoted_tick": INT,
        "capture_error": TEXT,
        "capture_error_since": UTC,
    }

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

    def copy(self) -> "MasterState":
        """An independent copy (same keys, same order)."""
        return MasterState.from_text(self.to_text())


def logs_of(cfg: MasterState | None, db_path: str) -> str:
    """The log folder of the master at ``db_path``.

    Args:
        cfg (MasterState | None): its ``wlc.config`` (None: not known).
        db_path (str): the master's folder.

    Returns:
        str: ``logs`` of ``cfg`` when set, else ``<db>/wlc_logs``.
    """
    return (cfg.logs if cfg is not None else "") or Storage.join(db_path, "wlc_logs")


PATH_KEYS: Final = ("logs", "snapshot")  # kept relative to the database folder when inside it


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

    Paths relative to the database folder (:data:`PATH_KEYS`) are resolved against ``db_path``.

    Args:
        storage: the storage holding the database.
        db_path: the database folder (path or URL).

    Raises:
        ConfigError: the file is malformed (a line without ``=``, a number that is none); the
            message names the file and the key.
    """
    path = Storage.join(db_path, CONFIG_FILE)
    if not storage.exists(path):
        return None
    cfg = MasterState.from_text(storage.read_text(path), path)
    for key in PATH_KEYS:
        if cfg.has(key):
            setattr(cfg, key, resolve_path(storage, db_path, getattr(cfg, key)))
    return cfg


def stale_paths(storage: Storage, db_path: str, cfg: MasterState) -> list[tuple[str, str, str | None]]:
    """The paths of ``cfg`` (:data:`PATH_KEYS`) that are not this database folder's own although
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
    for key in PATH_KEYS:
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
    config = Storage.join(db_path, CONFIG_FILE)
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

    Paths inside the database folder (:data:`PATH_KEYS`) are written relative to it.

    Returns:
        str: the text written.
    """
    written = state.copy()
    for key in PATH_KEYS:
        if written.has(key):
            setattr(written, key, relative_path(storage, db_path, getattr(written, key)))
    text = written.to_text()
    storage.write_atomic(Storage.join(db_path, CONFIG_FILE), text)
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
