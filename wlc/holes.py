"""Holes in a table's log: versions whose commit files Delta's log clean-up
(``delta.logRetentionDuration``) removed before capture read them. The change feed cannot
describe them: the first version Delta can still rebuild (from a checkpoint) is carried by
the table's image, the versions before it by gap notes (:mod:`wlc.capture`).
"""

from __future__ import annotations

from wlcore.capture_state import Cursor
from wlcore.deltalog import readable_from
from wlcore.storage import Storage


class NoCheckpointYet(Exception):
    """No version after a hole can be read yet: a checkpoint must come first. The message is
    the note capture keeps for the table."""


def start_after(
    storage: Storage, name: str, path: str, cur: Cursor | None, versions: list[int]
) -> tuple[int, str | None, int | None]:
    """Where planning of table ``name`` starts after its cursor, across a hole if there is one.

    Args:
        storage (Storage): the storage holding the master.
        name (str): the table's qualified name, for the texts.
        path (str): the table's folder.
        cur (Cursor | None): capture's cursor of the table (None: a table new to capture).
        versions (list[int]): the versions with a commit file, ascending (not empty).

    Returns:
        tuple[int, str | None, int | None]: the first version to plan, the hole's text and the
        first version Delta can rebuild after it (both None: no hole).

    Raises:
        NoCheckpointYet: no version after the hole can be read yet (no checkpoint covers it).
    """
    start = cur.version + 1 if cur else versions[0]
    have = set(versions)
    hole = None
    rebuild = None  # the first version after a hole that Delta can rebuild
    if (cur is None and versions[0] > 0) or (cur is not None and start <= versions[-1] and start not in have):
        rebuild = readable_from(storage, path, versions)
        if rebuild is None:
            raise NoCheckpointYet(
                f"no version of {name} after {start - 1} can be read: its commits were removed "
                "(log clean-up) and no checkpoint covers them yet; capture waits for one"
            )
        first_listed = min(v for v in versions if v >= start)
        if cur is not None:
            hole = (
                f"versions {start}..{first_listed - 1} of {name} were removed by log clean-up "
                f"(delta.logRetentionDuration) before capture read them"
            )
        else:
            hole = (
                f"capture first saw {name} at version {versions[0]}: its earlier commits were removed by "
                "log clean-up, and its state comes from a checkpoint"
            )
        rebuild = min(v for v in versions if v >= rebuild)  # its commit file may be gone too: the next one
        start = max(start, rebuild) if cur is None else start
    return start, hole, rebuild
