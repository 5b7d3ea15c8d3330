"""Promotion on disk: a replica's folder made the master of its database, and the old master fenced.

Shared by replay (``wlr.promote`` writes these files) and capture (``wlc capture`` reads them),
so that ``wlr`` never imports ``wlc``. As PostgreSQL's ``pg_promote`` ends recovery and starts a
new timeline, a promoted replica keeps the database it held (its name, its database id, its
transaction ids and GTIDs) and begins a new epoch at its tick + 1 (:mod:`wlcore.epochs`).

- The promoted folder gets a ``wlc.config`` whose ``database`` is the database's name (the
  prefix of its batches, :func:`log_name`), and ``promoted``, ``promoted_from``,
  ``promoted_tick`` saying what it was promoted from; its ``wlr.config`` is kept as
  ``wlr.config.promoted``.
- ``wlc.promotion`` (:class:`PromotionStart`) tells capture where it starts in the promoted
  tables: their Delta versions at promotion (replay's commits are not transactions of the new
  history), the first transaction id and the first batch number.
- The old master's folder, where promotion reaches it, gets ``wlc.fenced`` (:class:`Fence`):
  capture refuses to start or to publish there again (:func:`check_not_fenced`), as a fenced
  node in a cluster may not write, and replicas refuse it as a source.
- A master's folder that promotion could not reach (moved away, its disk gone) and that comes
  back later is **superseded** (:func:`supersedes`): a master of the same database id that was
  promoted after it holds the database now, as PostgreSQL's newer timeline wins over the old
  primary's. Capture refuses to start there (:func:`superseded_error`), naming the promoted master.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from .batch import FORMAT_VERSION, CaptureState
from .errors import ConfigError, MasterStateError
from .state import INT, STARTED, TEXT, UTC, MasterState, StateFile, read_master_state
from .storage import Storage

FENCE_FILE = "wlc.fenced"  # in the old master's folder: its capture may not publish
START_FILE = "wlc.promotion"  # in the promoted folder: where capture starts
PROMOTED_REPLICA_FILE = "wlr.config.promoted"  # the promoted replica's wlr.config, kept for people


class Fence(StateFile):
    """The old master's ``wlc.fenced``, ``key=value`` lines as ``wlc.config``.

    Attributes:
        fenced: UTC instant of the promotion that fenced it.
        promoted: the folder of the replica promoted to master of the database.
        database: the database's name.
        tick: the last transaction of this master's history the promoted one kept.
        epoch: the promoted master's epoch (its history starts at ``tick + 1``).
    """

    fenced: Annotated[datetime | None, UTC] = None
    promoted: Annotated[str, TEXT] = ""
    database: Annotated[str, TEXT] = ""
    tick: Annotated[int | None, INT] = None
    epoch: Annotated[str, TEXT] = ""


def read_fence(storage: Storage, db_path: str) -> Fence | None:
    """The fence of the master at ``db_path``.

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder (path or URL).

    Returns:
        Fence | None: None when it is not fenced.

    Raises:
        ConfigError: ``wlc.fenced`` is malformed (the message names it).
    """
    path = Storage.join(db_path, FENCE_FILE)
    if not storage.exists(path):
        return None
    return Fence.from_text(storage.read_text(path), path)


def write_fence(storage: Storage, db_path: str, fence: Fence) -> None:
    """Fence the master at ``db_path`` (atomically; a fence written earlier is replaced).

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.
        fence (Fence): what fenced it.

    Raises:
        OSError: the folder cannot be written.
    """
    storage.write_atomic(Storage.join(db_path, FENCE_FILE), fence.to_text())


def fenced_error(db_path: str, fence: Fence) -> MasterStateError:
    """The refusal of capture on a fenced master.

    Args:
        db_path (str): the fenced master's folder.
        fence (Fence): its fence.

    Returns:
        MasterStateError: the error, naming the promoted master and the fixes.
    """
    cause = (
        f"{db_path} is fenced: {fence.promoted} was promoted to master of database {fence.database!r} at "
        f"{fence.fenced.isoformat() if fence.fenced else 'an unknown instant'} (it kept transactions up to "
        f"{fence.tick}, then epoch {fence.epoch}); capture may not publish here any more, or two masters would "
        "hand out the same transaction ids"
    )
    fix = (
        f"write to the promoted master instead; to start this folder again as a master, move {FENCE_FILE}, "
        "wlc.config and wlc_logs aside and make it a new master"
    )
    return MasterStateError(f"{cause}; {fix}")


def check_not_fenced(storage: Storage, db_path: str) -> None:
    """Refuse capture (starting, or publishing a batch) on a fenced master.

    Args:
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.

    Raises:
        MasterStateError: the master is fenced (:func:`fenced_error`).
        ConfigError: ``wlc.fenced`` is malformed.
    """
    fence = read_fence(storage, db_path)
    if fence is not None:
        raise fenced_error(db_path, fence)


def supersedes(new: MasterState, old: MasterState) -> bool:
    """True when master ``new`` holds the database of master ``old`` in its place: the same
    database id, ``new`` made by a promotion, ``old`` not promoted after it (PostgreSQL's newer
    timeline wins). Shipped copies and relays are copies, never a master in anyone's place.

    Args:
        new (MasterState): another master's ``wlc.config`` (or a shipped copy's: the copy of one).
        old (MasterState): this master's ``wlc.config``.

    Returns:
        bool: True when ``old`` is superseded by ``new``.
    """
    if not old.dbid or new.dbid != old.dbid or new.promoted is None or new.relay_of:
        return False
    return old.promoted is None or old.promoted < new.promoted


def promoted_at(by: str, new: MasterState) -> tuple[str, str]:
    """Where a promoted master that supersedes another is, and how it was seen.

    Args:
        by (str): where it was seen: its folder, or a shipped copy of it.
        new (MasterState): that folder's or copy's ``wlc.config``.

    Returns:
        tuple[str, str]: its folder (a copy's: the folder it was shipped from), and
        ``" (seen in its shipped copy <by>)"`` for a copy, else ``""``.
    """
    if new.shipped_from:
        return new.shipped_from.rstrip("/"), f" (seen in its shipped copy {by})"
    return by.rstrip("/"), ""


def superseded_error(db_path: str, farm: str, name: str, by: str, new: MasterState) -> MasterStateError:
    """The refusal of capture on a master another master holds the database in place of
    (:func:`supersedes`): two masters would hand out the same transaction ids (GTIDs).

    Args:
        db_path (str): the superseded master's folder.
        farm (str): its dbfarm (in the commands).
        name (str): its folder's name (in the commands).
        by (str): where the promoted master was seen: its folder, or a shipped copy of it.
        new (MasterState): the promoted master's ``wlc.config`` (or its copy's).

    Returns:
        MasterStateError: the error, naming the promoted master and the fixes.
    """
    where, seen = promoted_at(by, new)
    new_farm, _sep, folder = where.rpartition("/")  # a copy's master may be in another dbfarm
    cause = (
        f"{db_path} is no longer the master of database {database_of(new, name)!r}: {where}{seen} was promoted to "
        f"master of it at {new.promoted.isoformat() if new.promoted else 'an unknown instant'} (kept transactions "
        f"up to {new.promoted_tick}, then epoch {new.epoch}) while this folder was out of reach; capturing here "
        "would publish other changes under the same transaction ids (GTIDs)"
    )
    fix_py = (
        f"write to the promoted master instead: wlc.attach({folder!r}, dbfarm={new_farm!r}); to start this "
        "folder again as a new "
        f"database, move wlc.config and wlc_logs aside, then wlc.master({name!r}, dbfarm={farm!r})"
    )
    fix_cli = (
        f"write to the promoted master instead (capture: wlc capture {new_farm} {folder}); to start this folder "
        f"again as a new database, move wlc.config and wlc_logs aside, then: wlc master {farm} {name}"
    )
    return MasterStateError(f"{cause}; {fix_py}", cli=f"{cause}; {fix_cli}")


def log_name(storage: Storage, db_path: str, folder: str) -> str:
    """The name a master's batches carry: ``database`` of its ``wlc.config`` for a promoted
    master whose folder has another name, else its folder's name.

    Args:
        storage (Storage): the storage holding the database.
        db_path (str): the database's folder.
        folder (str): the folder's name.

    Returns:
        str: the database's name.

    Raises:
        ConfigError: ``wlc.config`` is malformed.
    """
    return database_of(read_master_state(storage, db_path), folder)


def database_of(cfg: MasterState | None, folder: str) -> str:
    """The database a master's folder holds: ``database`` of its ``wlc.config`` when it is a
    promoted replica's folder (a promoted master keeps its database's name), else the folder's name.

    Args:
        cfg (MasterState | None): the folder's ``wlc.config`` (None: none).
        folder (str): the folder's name.

    Returns:
        str: the database's name.
    """
    if cfg is not None and cfg.promoted is not None and cfg.database:
        return cfg.database
    return folder


@dataclass
class PromotionStart:
    """Where capture of a promoted master starts (``wlc.promotion``, JSON).

    Attributes:
        first_batch: the number of the new history's first batch.
        first_txn: the id of the new history's first transaction (the promoted tick + 1).
        cursors: capture's state in the promoted tables (their Delta versions at promotion).
    """

    first_batch: int
    first_txn: int
    cursors: CaptureState

    def to_text(self) -> str:
        """The file's text (JSON)."""
        body = {"first_batch": self.first_batch, "first_txn": self.first_txn, "cursors": self.cursors.to_json()}
        return json.dumps(body, indent=1, sort_keys=True)

    @classmethod
    def from_text(cls, text: str, source: str) -> "PromotionStart":
        """The start in ``text``.

        Args:
            text (str): the file's text.
            source (str): the file, named in errors.

        Returns:
            PromotionStart: the start.

        Raises:
            ConfigError: the file is not JSON or lacks a field.
        """
        try:
            body = json.loads(text)
            return cls(int(body["first_batch"]), int(body["first_txn"]), CaptureState.from_json(body["cursors"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{source} is damaged ({exc}); promote the replica again from its wlr.config") from None


def read_start(storage: Storage, db_path: str) -> PromotionStart | None:
    """The promoted master's ``wlc.promotion`` (None: not a promoted master).

    Raises:
        ConfigError: the file is damaged.
    """
    path = Storage.join(db_path, START_FILE)
    if not storage.exists(path):
        return None
    return PromotionStart.from_text(storage.read_text(path), path)


def write_start(storage: Storage, db_path: str, start: PromotionStart) -> None:
    """Write ``wlc.promotion`` (atomically).

    Args:
        storage (Storage): the storage holding the promoted folder.
        db_path (str): its folder.
        start (PromotionStart): where capture starts.
    """
    storage.write_atomic(Storage.join(db_path, START_FILE), start.to_text())


def resume_point(start: PromotionStart | None, newest_batch: int | None) -> CaptureState | None:
    """Capture's state of a promoted master that has published nothing of its own yet.

    Args:
        start (PromotionStart | None): its ``wlc.promotion`` (None: not promoted).
        newest_batch (int | None): the number of the newest batch in its log folder (None: none).

    Returns:
        CaptureState | None: the promoted tables' cursors with the first transaction and batch
        of the new history, while no batch of it is published (the newest batch is the old
        history's, whose cursors are the old master's tables'); None otherwise (capture resumes
        from its newest batch as any master).
    """
    if start is None or (newest_batch is not None and newest_batch >= start.first_batch):
        return None
    state = start.cursors.copy()
    state.next_txn, state.next_batch = start.first_txn, start.first_batch
    return state


def promoted_config(
    old: MasterState | None,
    *,
    beat: float | None,
    database: str,
    dbid: str,
    logs: str,
    snapshot: str,
    tick: int,
    first_batch: int,
    write: datetime | None,
    watermark: datetime | None,
    history: str,
    epoch: str,
    now: datetime,
    promoted_from: str,
) -> MasterState:
    """The ``wlc.config`` of a promoted master.

    Args:
        old (MasterState | None): the old master's (or the replica's source's) ``wlc.config``,
            for its creation time (None: unreachable).
        beat (float | None): the old master's beat, seconds (None: not known; ``master.beat`` of config).
        database (str): the database's name (its batches' prefix).
        dbid (str): its database id (GTIDs stay ``<dbid>:<txn>``).
        logs (str): the promoted folder's log folder.
        snapshot (str): the newest snapshot copied into it ("": none).
        tick (int): the last transaction kept.
        first_batch (int): the next batch number.
        write (datetime | None): UTC commit time of transaction ``tick``.
        watermark (datetime | None): the watermark of the last batch kept (UTC; None: unknown).
        history (str): the epoch history with the new epoch at ``tick + 1``.
        epoch (str): the new epoch.
        now (datetime): the UTC instant of the promotion.
        promoted_from (str): the folder of the old master.

    Returns:
        MasterState: the state, started (``state=1``).
    """
    return MasterState.of(
        snapshot=snapshot,
        logs=logs,
        state=STARTED,
        batches=first_batch,
        beat=beat,
        write=write,
        dbid=dbid,
        format=FORMAT_VERSION,
        tick=tick,
        watermark=watermark,
        created=(old.created if old is not None else None) or now,
        not_replicated={},
        epoch=epoch,
        epochs=history,
        database=database,
        promoted=now,
        promoted_from=promoted_from,
        promoted_tick=tick,
    )
