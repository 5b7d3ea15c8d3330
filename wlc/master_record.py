"""The master's record of itself: ``<db>/wlc.config`` as this process holds it, and ``<db>/wlc.log``.

The file's keys (MonetDB's, plus the database id, the batch format, ``tick``, the watermark and
the epochs) and its one reader and writer are in :mod:`wlcore.state`.

One object per :class:`wlc.Master`, shared by its collaborators (the publisher, the table
notes, the life cycle): each reads and changes :attr:`MasterRecord.config` and calls
:meth:`MasterRecord.save`, which rewrites the file only when its text changed, as MonetDB's
``wlc.config`` is rewritten by the master that owns it.

:class:`TableNotes` is what the record tells people about single tables, where they look:
``wlc status`` (from ``wlc.config``), ``<db>/wlc.log``, Python warnings and the ``wlc.master`` log.

* ``not_replicated``: Delta tables capture cannot carry (a name it cannot replicate, a
  table directly in the database folder), ``{path: reason}``;
* ``feed_notes``: the last limit of Delta's change feed met on a table (change files
  vacuumed, commits removed by log clean-up, the feed switched off), ``{table: text}``,
  each also a line in ``wlc.log`` and a :class:`ChangeFeedWarning`;
* ``held``: tables whose log or rows capture could not read, retried with backoff,
  ``{table: cause}`` (see :class:`wlc.capture.Holds`).
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
import warnings

from wlcore import snapshots as snap
from wlcore.databases import Dbfarm
from wlcore.errors import NotReplicatedWarning
from wlcore.logstore import LogStore
from wlcore.promotion import check_not_fenced, log_name
from wlcore.state import LOG_FILE, MasterState, logs_of
from wlcore.storage import Storage
from wlcore.utc import utc_iso, utcnow

log = logging.getLogger("wlc.master")


class MasterRecord:
    """``wlc.config`` (:class:`wlcore.state.MasterState`) and ``wlc.log`` of the master at ``path``.

    Args:
        storage: the storage of the dbfarm.
        path: the database folder.
        dbname: the database folder's name; the database's name (in log lines, and its batches'
            prefix) is ``database`` of ``wlc.config`` for a promoted master (:func:`wlcore.promotion.log_name`).
        default_beat: seconds, the beat used while ``wlc.config`` has none (``master.beat`` of config).
    """

    def __init__(self, storage: Storage, path: str, dbname: str, default_beat: float):
        self.storage = storage
        self.path = path
        self.dbname = log_name(storage, path, dbname)
        self.default_beat = default_beat
        self.config = MasterState()
        self._saved = ""  # the text of wlc.config (its paths absolute) as this object last wrote it
        self._current_checked = float("-inf")  # time.monotonic() of the last check_current
        self._store: LogStore | None = None

    # seconds between two looks for a master promoted in this one's place while capture publishes
    # (a look: one listing of the dbfarm and each master's wlc.config, each shipped copy's)
    CURRENT_EVERY = 60.0

    @property
    def logs(self) -> str:
        """The log folder ``wlc.config`` names (``<db>/wlc_logs`` by default)."""
        return logs_of(self.config, self.path)

    def skip_schemas(self) -> set[str]:
        """The folders of the database that are not schemas: the log folder when it sits inside the database."""
        logs = os.path.abspath(self.logs)
        parent = os.path.dirname(logs)
        return {os.path.basename(logs)} if os.path.abspath(self.path) == parent else set()

    @property
    def store(self) -> LogStore:
        """The log store of :attr:`logs`, its batches named by the database (made once, and again
        only when ``wlc.config`` names another log folder: a master set up or restored)."""
        logs = self.logs
        if self._store is None or self._store.logs != logs:
            self._store = LogStore(self.storage, self.path, logs, self.dbname)
        return self._store

    @property
    def beat_seconds(self) -> float:
        """The beat in seconds: ``wlc.config``'s ``beat``, else ``master.beat`` of config."""
        return self.config.beat if self.config.beat is not None else self.default_beat

    def save(self) -> None:
        """Write ``wlc.config`` when its text changed (an unchanged file is not rewritten).

        ``snapshot`` is brought to the newest snapshot first (``wlc snapshot`` of another
        process, or the background, may have taken one); ``wlc.log`` names it then."""
        newest = snap.newest_folder(self.storage, self.path)
        if newest and newest != self.config.snapshot:
            self.adopt_snapshot(newest, snap.txn_of(newest))
        text = self.config.to_text()
        if text != self._saved:
            self.store.write_state(self.config)
            self._saved = text

    def adopt_snapshot(self, path: str, txn: int) -> None:
        """Make ``path`` the newest snapshot in ``wlc.config`` and name it in ``wlc.log``
        (once: whichever of the background and a publication sees it first); the caller saves.

        Args:
            path (str): the snapshot's folder.
            txn (int): its last transaction (-1: the initial snapshot).
        """
        self.config.snapshot = path
        self.note(f"snapshot at transaction {txn}: {path}")

    def check_current(self, cfg: MasterState | None) -> None:
        """Refuse capture of a master whose database another master holds now: fenced by a promotion
        (``wlc.fenced``), or superseded by a master promoted while this folder was out of reach
        (:meth:`wlcore.databases.Dbfarm.check_current`: in the dbfarm or a shipped copy it ships to).

        Args:
            cfg (MasterState | None): this master's ``wlc.config`` (None: none yet; only the fence is checked).

        Raises:
            MasterStateError: the folder is fenced or superseded (the message names the promoted master).
            ConfigError: ``wlc.fenced`` is malformed.
        """
        dbfarm, folder = posixpath.split(self.path.rstrip("/"))
        Dbfarm(dbfarm).check_current(folder, cfg)
        self._current_checked = time.monotonic()

    def check_publishing(self) -> None:
        """Before a batch is published: refuse a fenced master every time (one small read), and one
        superseded by a master promoted elsewhere once per :attr:`CURRENT_EVERY` seconds
        (:meth:`check_current`): a capture that kept running while its folder was out of reach
        stops publishing under ids the promoted master hands out.

        Raises:
            MasterStateError: the master is fenced or superseded.
        """
        if time.monotonic() - self._current_checked >= self.CURRENT_EVERY:
            self.check_current(self.config)
        else:
            check_not_fenced(self.storage, self.path)

    def note(self, message: str) -> None:
        """A line in ``<db>/wlc.log`` (UTC instant first; local folders only) and in the ``wlc.master`` log.

        Args:
            message (str): the line, without the instant.
        """
        log.info("%s: %s", self.dbname, message)
        self.storage.append_text(Storage.join(self.path, LOG_FILE), f"{utc_iso(utcnow())} {message}\n")


class ChangeFeedWarning(UserWarning):
    """A master table's version could not be described by Delta's change feed (its change
    files were vacuumed, its commit removed by log clean-up, the feed switched off); the
    message says how capture carried it (the table's image) and what it costs."""


class TableNotes:
    """The per-table notes of one master, kept in its ``wlc.config``: tables not replicated,
    change-feed limits met, tables held back.

    Args:
        record (MasterRecord): the master's ``wlc.config`` (read and saved here) and ``wlc.log``.
    """

    def __init__(self, record: MasterRecord):
        self.record = record
        self._unwarned: list[str] = []  # change-feed notes not yet warned about by flush()

    @property
    def config(self) -> MasterState:
        """The master's ``wlc.config`` as its master holds it now."""
        return self.record.config

    def not_replicated(self) -> dict[str, str]:
        """A copy of the Delta tables capture cannot carry.

        Returns:
            dict[str, str]: ``{table folder: reason}``; ``{}`` when none.
        """
        return dict(self.config.not_replicated)

    def refused(self, refused: dict[str, str]) -> None:
        """Record the Delta tables capture cannot carry now, each logged as an error when the set changes.

        Args:
            refused (dict[str, str]): ``{table folder: reason}`` (empty: none).
        """
        if dict(refused) != self.config.not_replicated:
            self.config.not_replicated = dict(refused)
            self.record.save()
            for path, reason in sorted(refused.items()):
                log.error("NOT REPLICATED: %s: %s", path, reason)

    def feed(self, notes: list[tuple[str, str]]) -> None:
        """Record change-feed limits met: a ``wlc.log`` line, a log warning and a
        :class:`ChangeFeedWarning` (at the next :meth:`warn`) each.

        Args:
            notes (list[tuple[str, str]]): ``(table, text)`` pairs (empty: nothing to record).
        """
        if not notes:
            return
        current = dict(self.config.feed_notes)
        for table, text in notes:
            current[table] = text
            log.warning("%s: %s", table, text)
            self.record.note(f"CHANGE FEED {table}: {text}")
            self._unwarned.append(f"{table}: {text}")
        if current != self.config.feed_notes:
            self.config.feed_notes = current
            self.record.save()

    def held(self, held: dict[str, str]) -> None:
        """Record the tables capture holds back now (:class:`wlc.capture.Holds`), logged when they change.

        Args:
            held (dict[str, str]): ``{table: cause}`` (empty: none held).
        """
        before = dict(self.config.held)
        if dict(held) != before:
            self.config.held = dict(held)
            self.record.save()
            for table, cause in sorted(held.items()):
                if before.get(table) != cause:
                    log.error("HELD %s: %s", table, cause)
                    self.record.note(f"HELD {table}: {cause}")
            for table in sorted(set(before) - set(held)):
                self.record.note(f"RELEASED {table}: it is read again")

    def warn(self, stacklevel: int = 3) -> None:
        """Warn about what :meth:`wlc.Master.flush` callers should know: a
        :class:`NotReplicatedWarning` for tables not replicated, a :class:`ChangeFeedWarning` for
        the change-feed limits met since the last warning.

        Args:
            stacklevel (int): the frame the warnings point at, counted from the caller of this method.
        """
        refused = self.config.not_replicated
        if refused:
            warnings.warn(
                NotReplicatedWarning("not replicated: " + "; ".join(f"{p}: {r}" for p, r in sorted(refused.items()))),
                stacklevel=stacklevel + 1,
            )
        if self._unwarned:
            text, self._unwarned = "; ".join(self._unwarned), []
            warnings.warn(ChangeFeedWarning(text), stacklevel=stacklevel + 1)
