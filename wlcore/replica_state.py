"""A replica's state file, ``<replica>/wlr.config``, as a typed object.

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
The master's paths it names (:data:`PATH_KEYS`) are written relative to the replica's folder when
they are in the replica's dbfarm (``masterfarm=..``, ``logs=../m/wlc_logs``) and read back against
where the folder is now, so a dbfarm moved or restored elsewhere keeps its replicas' masters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from .errors import ConfigError
from .master_state import relative_path, resolve_path
from .names import name_of_key, state_key
from .state_file import FLAG, INT, JSON_DICT, JSON_LIST, SECONDS, TEXT, UTC, Codec, StateFile
from .storage import Storage

CONFIG_FILE = "wlr.config"
PATH_KEYS = ("masterfarm", "source", "logs")  # relative to the replica's folder when in its dbfarm (``..``)
VERSION, AT = "version.", "at."  # key prefixes: a table's Delta version, and its version in the view

_INT_LIST = Codec(lambda t: [int(x) for x in t.split(",") if x.strip()], lambda v: ",".join(str(x) for x in v or []))


@dataclass(eq=False)
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

    master: str = ""
    masterfarm: str = ""
    dbid: str = ""
    source: str = ""
    source_kind: str = ""
    select_tables: list[str] = field(default_factory=list)
    select_where: dict[str, str] = field(default_factory=dict)
    logs: str = ""
    batches: int = 0
    tick: int = -1
    clock: datetime | None = None
    skipped: list[int] = field(default_factory=list)
    state: str = ""
    error_batch: int | None = None
    error_txn: int | None = None
    error_table: str = ""
    error_cause: str = ""
    retries: int = 0
    retry_at: datetime | None = None
    epochs: str = ""
    epoch: str = ""
    view: int | None = None
    until: str = ""
    relay: bool = False
    heartbeat: datetime | None = None
    master_beat: float | None = None
    source_error: str = ""
    source_error_since: datetime | None = None
    versions: dict[str, int] = field(default_factory=dict)
    views: dict[str, int] = field(default_factory=dict)

    CODECS: ClassVar[dict[str, Codec]] = {
        "master": TEXT,
        "masterfarm": TEXT,
        "dbid": TEXT,
        "source": TEXT,
        "source_kind": TEXT,
        "select_tables": JSON_LIST,
        "select_where": JSON_DICT,
        "logs": TEXT,
        "batches": INT,
        "tick": INT,
        "clock": UTC,
        "skipped": _INT_LIST,
        "state": TEXT,
        "error_batch": INT,
        "error_txn": INT,
        "error_table": TEXT,
        "error_cause": TEXT,
        "retries": INT,
        "retry_at": UTC,
        "epochs": TEXT,
        "epoch": TEXT,
        "view": INT,
        "until": TEXT,
        "relay": FLAG,
        "heartbeat": UTC,
        "master_beat": SECONDS,
        "source_error": TEXT,
        "source_error_since": UTC,
    }

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

    def copy(self) -> "ReplicaState":
        """An independent copy (same keys, same order)."""
        return ReplicaState.from_text(self.to_text())


def read_replica_state(storage: Storage, db_path: str) -> ReplicaState | None:
    """A database's ``wlr.config``, or None when it is not a replica.

    Args:
        storage: the storage holding the database.
        db_path: the replica's folder (path or URL).

    Raises:
        ConfigError: the file is malformed; the message names the file and the key.
    """
    path = Storage.join(db_path, CONFIG_FILE)
    if not storage.exists(path):
        return None
    state = ReplicaState.from_text(storage.read_text(path), path)
    if storage.os_path(db_path) is not None:  # local folders: paths relative to the replica's folder
        for key in PATH_KEYS:
            if state.has(key):
                setattr(state, key, resolve_path(storage, db_path, getattr(state, key)))
    return state


def write_replica_state(storage: Storage, db_path: str, state: ReplicaState) -> str:
    """Write ``state`` as ``<db_path>/wlr.config`` (atomically: readers see the old file or the new one).

    Args:
        storage (Storage): the storage holding the replica.
        db_path (str): the replica's folder (path or URL).
        state (ReplicaState): the state to write.

    The master's paths in the replica's dbfarm (:data:`PATH_KEYS`) are written relative to the
    replica's folder (local folders).

    Returns:
        str: the text written.
    """
    written = state
    local = storage.os_path(db_path)
    if local is not None:
        written = state.copy()
        farm = os.path.dirname(local.rstrip("/"))
        for key in PATH_KEYS:
            if written.has(key):
                setattr(written, key, relative_path(storage, db_path, getattr(written, key), within=farm))
    text = written.to_text()
    storage.write_atomic(Storage.join(db_path, CONFIG_FILE), text)
    return text
