"""A master's state file, ``<db>/wlc.config``, and what it says about capture.

The file has MonetDB's keys (``snapshot``, ``logs``, ``state`` 1 started / 2 stopped,
``batches`` next batch number, ``beat`` seconds, ``write`` time of the last transaction
recorded) plus ``dbid`` (the database id in every GTID), ``format`` (batch format version),
``tick`` (last transaction id published) and ``watermark`` (every master commit at or before it
is in a published batch), ``epoch`` (this capture session's random id), ``epochs`` (the epoch
history, :mod:`wlcore.epochs`), ``heartbeat`` and ``capture_stopped``. Capture writes it; the
replay side, status and shipping read it. :class:`MasterState` is the file as a typed object;
:func:`read_master_state` and :func:`write_master_state` are the one reader and writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, Final, Literal

from .batch import parse_utc
from .settings import settings
from .state_file import INT, JSON_DICT, SECONDS, TEXT, UTC, Codec, StateFile, utc_or
from .storage import Storage

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
        format: the batch format version (:data:`wlcore.version.FORMAT_VERSION`).
        tick: id of the last *published* transaction (-1: none).
        watermark: every master commit at or before this UTC instant is in a published
            batch; :data:`WATERMARK_STOPPED` once the master stopped; None: not known yet.
        created: UTC instant the database became a master.
        not_replicated, feed_notes, held: per-table notes ``{table or path: text}``
            (:mod:`wlc.table_notes`).
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


def read_master_state(storage: Storage, db_path: str) -> MasterState | None:
    """A database's ``wlc.config``, or None when it is not (and never was) a master.

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
    return MasterState.from_text(storage.read_text(path), path)


def write_master_state(storage: Storage, db_path: str, state: MasterState) -> str:
    """Write ``state`` as ``<db_path>/wlc.config`` (atomically: readers see the old file or the new one).

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder (path or URL).
        state (MasterState): the state to write.

    Returns:
        str: the text written.
    """
    text = state.to_text()
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
