"""What capture tells people about single tables, where they look: ``wlc status`` (from
``wlc.config``), ``<db>/wlc.log``, Python warnings and the ``wlc.master`` log.

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
import warnings
from typing import Callable

from wlcore.errors import NotReplicatedWarning
from wlcore.master_state import MasterState

log = logging.getLogger("wlc.master")


class ChangeFeedWarning(UserWarning):
    """A master table's version could not be described by Delta's change feed (its change
    files were vacuumed, its commit removed by log clean-up, the feed switched off); the
    message says how capture carried it (the table's image) and what it costs."""


class TableNotes:
    """The per-table notes of one master, kept in its ``wlc.config``: tables not replicated,
    change-feed limits met, tables held back.

    Args:
        config (Callable[[], MasterState]): returns the master's ``wlc.config`` as its master holds it.
        save (Callable[[], None]): writes it.
        note (Callable[[str], None]): writes a ``wlc.log`` line.
    """

    def __init__(self, config: Callable[[], MasterState], save: Callable[[], None], note: Callable[[str], None]):
        self._config, self.save, self.note = config, save, note
        self._unwarned: list[str] = []  # change-feed notes not yet warned about by flush()

    @property
    def config(self) -> MasterState:
        """The master's ``wlc.config`` as its master holds it now."""
        return self._config()

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
            self.save()
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
            self.note(f"CHANGE FEED {table}: {text}")
            self._unwarned.append(f"{table}: {text}")
        if current != self.config.feed_notes:
            self.config.feed_notes = current
            self.save()

    def held(self, held: dict[str, str]) -> None:
        """Record the tables capture holds back now (:class:`wlc.capture.Holds`), logged when they change.

        Args:
            held (dict[str, str]): ``{table: cause}`` (empty: none held).
        """
        before = dict(self.config.held)
        if dict(held) != before:
            self.config.held = dict(held)
            self.save()
            for table, cause in sorted(held.items()):
                if before.get(table) != cause:
                    log.error("HELD %s: %s", table, cause)
                    self.note(f"HELD {table}: {cause}")
            for table in sorted(set(before) - set(held)):
                self.note(f"RELEASED {table}: it is read again")

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
