"""Promotion: a replica made the master of its database (failover), as PostgreSQL's ``pg_promote``.

The replica's folder becomes the database's master folder; the database keeps its name, its
database id, its transaction ids and GTIDs, and a new epoch begins at the replica's tick + 1
(:mod:`wlcore.epochs`), so replicas whose history is a prefix of the new one follow it without
a new copy and a replica that applied transactions the promoted one never got is refused
(:class:`wlr.DivergedError`). On disk (:mod:`wlcore.promotion`):

1. the checks, nothing written: a complete replica (not selective, not being made), replay not
   failed, and caught up with everything its source and its master's folder published
   (:func:`left_out`), unless ``force``;
2. the old master's folder is fenced (``wlc.fenced``) where it can be reached, then what it
   published is read again (a capture still alive may have published meanwhile);
3. the batches and snapshots the replica applied are copied into ``<replica>/wlc_logs`` and
   ``<replica>/wlc_snapshot`` (from its relay folder, its source or the master's folder:
   :func:`wlcore.ship.ship`), so that replicas behind it read them there;
4. ``wlc.promotion`` (where capture starts in the promoted tables), then ``wlc.config``, then
   ``wlr.config`` moved to ``wlr.config.promoted``.

Capture is not started here: replay never imports capture. ``wlc capture <dbfarm> <replica>``
(or :func:`wlc.master` with the replica's name) starts it, and ``wlr promote --capture`` runs
that command in place of itself.

A replica may be promoted when it is caught up: no place it can read (its source, the master's
own folder) publishes a transaction after its tick, as PostgreSQL's ``pg_promote`` is safe
once a standby has replayed all the WAL it received. :func:`left_out` reads the places'
``wlc.config`` and the level-0 batches from the replica's next batch on (a batch published
just before capture was killed may not be in ``wlc.config`` yet); :func:`missing` is the rule,
pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from wlcore import epochs, snapshots as snap
from wlcore.batch import CaptureState, Cursor
from wlcore.databases import Dbfarm
from wlcore.deltalog import discover_tables
from wlcore.errors import BatchError, WlcError
from wlcore.logstore import LogStore
from wlcore.promotion import (
    FENCE_FILE,
    PROMOTED_REPLICA_FILE,
    Fence,
    PromotionStart,
    promoted_config,
    write_fence,
    write_start,
)
from wlcore.settings import check_name, dbfarm as resolve_dbfarm, settings
from wlcore.ship import ShipError, ship
from wlcore.state import (
    LOG_FILE as MASTER_LOG,
    REPLICA_CONFIG,
    MasterState,
    ReplicaState,
    read_master_state,
    read_replica_state,
    write_master_state,
)
from wlcore.storage import Storage
from wlcore.utc import utc_iso

from .book import LOCK_FILE, LOG_FILE as REPLICA_LOG, ReplicaLock
from .errors import PromotionError, ReplicaStateError
from .source import RELAY_DIR, Source, SourceKind, master_source, recorded_source

STAGING = ".wlc-promote"  # the history is assembled here, then moved into place


@dataclass
class Promotion:
    """What :func:`promote` did.

    Attributes:
        database: the database's name (unchanged; its batches keep this prefix).
        path: the promoted folder, the database's master folder from now on.
        promoted_from: the folder of the master the replica followed.
        tick: the last transaction of the old history the new one keeps.
        epoch: the new epoch; its first transaction is ``tick + 1``.
        first_batch: the number of the new history's first batch.
        left_out: the published transaction ids the new history leaves out (``force``).
        left_out_gtids: their GTIDs.
        fenced: the old master's folder, fenced; None when it could not be reached.
        copied: the batches copied into the promoted folder's log folder.
        notes: what a person should know (places not reached, history not copied).
        kept: the old master's settings the promoted one keeps, and from where, for people.
    """

    database: str
    path: str
    promoted_from: str
    tick: int
    epoch: str
    first_batch: int
    left_out: list[int] = field(default_factory=list)
    left_out_gtids: list[str] = field(default_factory=list)
    fenced: str | None = None
    copied: int = 0
    notes: list[str] = field(default_factory=list)
    kept: str = ""

    def lines(self, dbfarm: str, name: str) -> list[str]:
        """The report as lines for a person, ending with the commands that follow.

        Args:
            dbfarm (str): the dbfarm, in the commands.
            name (str): the promoted folder's name, in the commands.
        """
        out = [
            f"{name} is the master of database {self.database!r} now: transactions up to {self.tick} kept, "
            f"epoch {self.epoch} begins at transaction {self.tick + 1} (batch {self.first_batch}); "
            f"{self.copied} batches of the old history copied for the replicas behind it",
            f"old master {self.promoted_from}: "
            + (f"fenced ({FENCE_FILE}); its capture may not publish" if self.fenced else "not reached, not fenced"),
        ]
        if self.left_out:
            out.append(
                f"left out (forced): published transactions {ranges(self.left_out)} "
                f"({', '.join(self.left_out_gtids)}) are not in the new history"
            )
        out.append(f"kept: {self.kept}")
        out += [f"note: {n}" for n in self.notes]
        out.append(f"start capture: wlc capture {dbfarm} {name}")
        out.append(f"switch the other replicas: wlr replicate {dbfarm} {self.database} <replica> --source {name}")
        return out


def promote(replica: str, dbfarm: str | None = None, *, force: bool = False) -> Promotion:
    """Make replica ``replica`` the master of its database (failover; PostgreSQL's ``pg_promote``).

    Args:
        replica (str): the replica's name in the dbfarm.
        dbfarm (str | None): the dbfarm (None: ``$WLC_DBFARM`` or config).
        force (bool): promote even when the replica is not caught up with everything published
            or its replay failed; the report names the published transactions left out.

    Returns:
        Promotion: the database, the tick kept, the new epoch, what was left out and fenced.

    Raises:
        PromotionError: the replica is selective or being made; its replay failed, or it is not
            caught up (``left_out`` names the transactions), and ``force`` was not given.
            Nothing was changed.
        ReplicaStateError: the database is not a replica; a follower replays into it (stop it).
        NotFoundError: no such database or dbfarm.
        ConfigError: a malformed name.
    """
    farm = resolve_dbfarm(dbfarm)
    name = check_name(replica, "replica database")
    storage = Storage.of(farm)
    path = Storage.join(farm, name)
    _interrupted(storage, path)
    Dbfarm(farm).require_replica(name, ReplicaStateError)
    lock = ReplicaLock(storage, path)
    with lock.holding():
        state = read_replica_state(storage, path)
        if state is None:  # went away since
            raise ReplicaStateError(f"{path} lost its {REPLICA_CONFIG}; check the folder")
        result = _promote(storage, path, name, farm, state, force)
    storage.rm(Storage.join(path, LOCK_FILE))
    return result


def _promote(storage: Storage, path: str, name: str, farm: str, state: ReplicaState, force: bool) -> Promotion:
    """:func:`promote` under the replica's lock."""
    database, tick = state.master, state.tick
    _check_complete(state, name, farm, force)
    old_path = Storage.join(state.masterfarm or farm, database)
    places = _places(state, old_path, path)
    gone = left_out(state, places, database)
    _check_caught_up(gone, name, farm, database, force)
    now = datetime.now(timezone.utc)
    epoch = epochs.new_epoch()
    fenced = _fence(old_path, Fence.of(fenced=now, promoted=path, database=database, tick=tick, epoch=epoch))
    again = left_out(state, places, database)  # a capture still alive may have published meanwhile
    if set(again.txns) - set(gone.txns) and not force:
        if fenced:
            Storage.of(old_path).rm(Storage.join(old_path, FENCE_FILE))
        _check_caught_up(again, name, farm, database, force)
    result = Promotion(database, path, old_path, tick, epoch, state.batches, again.txns, again.gtids, fenced)
    result.notes += [f"not read: {u}" for u in again.unreachable]
    old_cfg = next((c for c in (_config(p) for p in places) if c is not None), None)
    snapshot, watermark = _copy_history(storage, path, database, state, places, result)
    start = PromotionStart(state.batches, tick + 1, CaptureState(_cursors(storage, path), tick + 1, state.batches))
    write_start(storage, path, start)
    history = epochs.format(epochs.begin(epochs.upto(epochs.parse(state.epochs), tick), tick + 1, epoch))
    beat, result.kept = _kept_settings(old_cfg, state)
    cfg = promoted_config(
        old_cfg,
        beat=beat,
        database=database,
        dbid=state.dbid,
        logs=Storage.join(path, "wlc_logs"),
        snapshot=snapshot,
        tick=tick,
        first_batch=state.batches,
        write=state.clock,
        watermark=watermark,
        history=history,
        epoch=epoch,
        now=now,
        promoted_from=old_path,
    )
    # wlr.config aside, then wlc.config: a crash in between leaves neither, and promote() again
    # puts wlr.config back first (_interrupted)
    storage.rm(Storage.join(path, PROMOTED_REPLICA_FILE))
    storage.rename(Storage.join(path, REPLICA_CONFIG), Storage.join(path, PROMOTED_REPLICA_FILE))
    write_master_state(storage, path, cfg)
    storage.rm(Storage.join(path, RELAY_DIR))  # replicas of the relay switch to this master (source=)
    line = (
        f"promoted to master of {database!r} from {old_path}: transactions up to {tick} kept, epoch {epoch} "
        f"from transaction {tick + 1}" + (f"; left out (forced): {ranges(again.txns)}" if again.txns else "")
    )
    for log in (REPLICA_LOG, MASTER_LOG):
        storage.append_text(Storage.join(path, log), f"{utc_iso(now)} {line}\n")
    return result


def _kept_settings(old: MasterState | None, state: ReplicaState) -> tuple[float | None, str]:
    """The beat the promoted master keeps (seconds; None: ``master.beat`` of config) and the line
    saying what it keeps: the old master's beat from its ``wlc.config`` where it could be read,
    else as the replica last read it from its source; snapshots, compaction and retention are
    config's ``master.*`` settings, the same for every master of the dbfarm."""
    if old is not None and old.beat is not None:
        beat, where = old.beat, "from its wlc.config"
    elif state.master_beat is not None:
        beat, where = state.master_beat, "as this replica last read it"
    else:
        beat, where = None, ""
    said = (
        f"the old master's beat {beat:g} s ({where})"
        if beat is not None
        else f"no beat known of the old master: master.beat of config ({settings().master.beat:g} s) applies"
    )
    return beat, (
        f"{said}; snapshots, compaction and retention follow config's master.snapshot_interval, master.compact "
        "and master.retention, as for every master"
    )


def _interrupted(storage: Storage, path: str) -> None:
    """Put back the ``wlr.config`` of a promotion that stopped before it wrote ``wlc.config``."""
    aside, config = Storage.join(path, PROMOTED_REPLICA_FILE), Storage.join(path, REPLICA_CONFIG)
    if storage.exists(aside) and not storage.exists(config) and read_master_state(storage, path) is None:
        storage.rename(aside, config)


def _check_complete(state: ReplicaState, name: str, farm: str, force: bool) -> None:
    """Refuse a replica that cannot hold the whole database, or whose replay failed (unless ``force``)."""
    if state.state in ("restoring", "") or not state.dbid:
        raise PromotionError(f"replica {name!r} is still being made; let replicate() finish it first")
    if state.select_tables or state.select_where:
        raise PromotionError(
            f"replica {name!r} carries only some tables or rows ({state.select_tables or state.select_where}); "
            "a selective replica cannot be the master of the whole database: promote a complete replica"
        )
    if state.error_cause and not force:
        cause = f"replay of replica {name!r} failed at transaction {state.error_txn} ({state.error_cause})"
        raise PromotionError(
            f"{cause}; fix it and replicate again (or wlr.accept() to skip it), or promote with force=True",
            cli=f"{cause}; fix it and run wlr replicate again (or wlr accept {farm} {name}), or promote with --force",
        )


def _check_caught_up(gone: LeftOut, name: str, farm: str, database: str, force: bool) -> None:
    """Refuse a replica that has not applied everything published, or when nothing tells what
    was published (the master's folder and the source unreadable), unless ``force``."""
    if force:
        return
    if not gone.seen:
        cause = f"what the master of replica {name!r} published cannot be read ({'; '.join(gone.unreachable)})"
        raise PromotionError(
            f"{cause}; if the master is lost, promote it with force=True (transactions it had not applied are lost)",
            cli=f"{cause}; if the master is lost, promote it with --force (transactions it had not applied are lost)",
        )
    if not gone.txns:
        return
    many = len(gone.txns) > 1
    cause = (
        f"replica {name!r} is not caught up: transaction{'s' if many else ''} {ranges(gone.txns)} "
        f"{'are' if many else 'is'} published ({', '.join(gone.seen)}) and not applied on it; promoting it "
        f"would leave {'them' if many else 'it'} out"
    )
    raise PromotionError(
        f"{cause}; catch it up with wlr.replicate({database!r}, replica={name!r}, follow=False) and promote "
        "it, or promote it with force=True",
        gone.txns,
        cli=f"{cause}; catch it up with wlr replicate {farm} {database} {name} and promote it, or promote it "
        "with --force",
    )


def missing(tick: int, claimed: Iterable[int], published: Iterable[int]) -> list[int]:
    """The transactions after ``tick`` that are published somewhere.

    Args:
        tick (int): the replica's last applied transaction (-1: none).
        claimed (Iterable[int]): the ticks places claim in their ``wlc.config`` (every
            transaction up to each is published there).
        published (Iterable[int]): transaction ids found in published batches.

    Returns:
        list[int]: the ids after ``tick``, ascending, without repeats.
    """
    ids = {t for t in published if t > tick}
    for top in claimed:
        ids.update(range(tick + 1, top + 1))
    return sorted(ids)


def ranges(ids: Sequence[int]) -> str:
    """``[3, 4, 5, 9]`` as ``"3..5, 9"`` (for messages).

    Args:
        ids (Sequence[int]): transaction ids, ascending.

    Returns:
        str: runs of consecutive ids as ``first..last``, joined by commas.
    """
    out: list[str] = []
    start = prev = None
    for i in [*ids, None]:
        if i is not None and prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}..{prev}")
        start = prev = i
    return ", ".join(out)


@dataclass
class LeftOut:
    """The published transactions a replica has not applied, and where they were seen.

    Attributes:
        txns: their ids, ascending.
        gtids: ``<database id>:<txn>`` of each (as :mod:`wlcore.batch` records them).
        seen: the places read (``master 'shop'``, ``relay 'r1'``).
        unreachable: the places that could not be read, with why.
    """

    txns: list[int] = field(default_factory=list)
    gtids: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)


def left_out(state: ReplicaState, places: Sequence[Source], master: str) -> LeftOut:
    """What promoting the replica in ``state`` would leave out of the new history.

    Args:
        state (ReplicaState): the replica's state (``tick``, ``batches``, ``dbid``).
        places (Sequence[Source]): where its master's transactions are published (its source,
            the master's folder); one that cannot be read is noted in ``unreachable``.
        master (str): the database's name (its batches' prefix).

    Returns:
        LeftOut: the transactions after the replica's tick published at any place.
    """
    out = LeftOut()
    claimed: list[int] = []
    found: dict[int, str] = {}
    for place in places:
        try:
            cfg = place.config()
            if cfg is None:
                out.unreachable.append(f"{place.label}: no wlc.config")
                continue
            claimed.append(cfg.tick)
            store = LogStore(place.storage, place.root, place.logs(cfg), master)
            for batch in store.batches(max(0, state.batches - 1)):
                for rec in store.manifest(batch).txns:
                    found[rec.txn] = rec.gtid
            out.seen.append(place.label)
        except (OSError, BatchError, WlcError) as exc:
            out.unreachable.append(f"{place.label}: {type(exc).__name__}: {exc}")
    out.txns = missing(state.tick, claimed, found)
    out.gtids = [found.get(t) or f"{state.dbid}:{t}" for t in out.txns]
    return out


def _places(state: ReplicaState, old_path: str, path: str) -> list[Source]:
    """Where the replica's master published: its relay folder, its recorded source, the master's folder."""
    out: list[Source] = []
    relay = Storage.join(path, RELAY_DIR)
    if Storage.of(relay).exists(Storage.join(relay, "wlc.config")):
        out.append(Source(Storage.of(relay), relay, SourceKind.RELAY))
    recorded = recorded_source(state)
    if recorded is not None:
        out.append(recorded)
    farm, _sep, database = old_path.rstrip("/").rpartition("/")
    if all(p.root.rstrip("/") != old_path.rstrip("/") for p in out):
        out.append(master_source(farm, database))
    return out


def _config(place: Source) -> MasterState | None:
    """The place's wlc.config, None when it cannot be read."""
    try:
        return place.config()
    except (OSError, WlcError):
        return None


def _fence(old_path: str, fence: Fence) -> str | None:
    """Fence the old master when its folder is reached; its path, or None."""
    storage = Storage.of(old_path)
    try:
        if read_master_state(storage, old_path) is None:
            return None
        write_fence(storage, old_path, fence)
    except (OSError, WlcError):
        return None
    return old_path


def _copy_history(
    storage: Storage, path: str, database: str, state: ReplicaState, places: list[Source], result: Promotion
) -> tuple[str, datetime | None]:
    """Copy the batches (before the replica's next batch) and snapshots (at or before its tick)
    of the old history into the promoted folder; returns its newest snapshot ("": none) and the
    watermark of the last batch kept (None: none copied)."""
    staging = Storage.join(path, STAGING)
    storage.rm(staging)
    tried = []
    for place in places:  # the first place that holds the whole old history (the relay folder first)
        try:
            storage.rm(staging)
            ship(place.storage, place.root, database, staging, up_to_batch=state.batches, up_to_txn=state.tick,
                 progress=False)  # fmt: skip
        except (OSError, ShipError, WlcError) as exc:
            tried.append(f"{place.label} ({type(exc).__name__}: {exc})")
            continue
        have = LogStore(storage, staging, Storage.join(staging, "wlc_logs"), database).batches()
        if state.batches == 0 or (have and have[-1].number == state.batches - 1):
            break
        tried.append(f"{place.label} (holds batches up to {have[-1].number if have else 'none'} only)")
    for folder in ("wlc_logs", snap.SNAPSHOT_DIR):
        storage.rm(Storage.join(path, folder))
        if storage.exists(Storage.join(staging, folder)):
            storage.rename(Storage.join(staging, folder), Storage.join(path, folder))
    storage.rm(staging)
    logs = Storage.join(path, "wlc_logs")
    storage.makedirs(logs)
    store = LogStore(storage, path, logs, database)
    kept = store.batches()
    result.copied = len(kept)
    if state.batches > 0 and (not kept or kept[-1].number != state.batches - 1):
        result.notes.append(
            f"the old history's batches up to {state.batches - 1} are not all in {logs} (tried {'; '.join(tried)}): "
            f"replicas behind transaction {state.tick} may need a new copy"
        )
    watermark = store.manifest(kept[-1]).watermark if kept else None
    return snap.newest_folder(storage, path) or "", watermark


def _cursors(storage: Storage, path: str) -> dict[str, Cursor]:
    """Capture's cursors in the promoted tables: each at its Delta version now (replay's commits
    are the old history's transactions, not new ones)."""
    out: dict[str, Cursor] = {}
    for table, table_path in discover_tables(storage, path, {RELAY_DIR, STAGING}).items():
        cursor = Cursor.newest(storage, table_path)
        if cursor is not None:
            out[table] = cursor
    return out
