"""Relays: a replica that is the source of further replicas (cascading replication).

A replica made or continued with ``relay=True`` ships, after every round of replay, the
batches it has wholly applied and the snapshots at or before its tick from its own source
to ``<replica>/wlr_relay`` (:func:`wlc.ship.ship`, the same copy as ``wlc ship``). That
folder is a shipped copy of the master's logs limited to what the relay has applied, with
the master's batch numbers, database id, epoch history and GTIDs untouched, so a replica
reading it (``source=<relay>``) can move to the master or another relay and continue from
the same transaction, as a PostgreSQL standby moves between a primary and a cascading
standby. Its ``wlc.config`` claims only the relay's tick, watermark and next batch.

Cost: a listing of both log folders and the copy of each new batch, once per round.

The relay folder is pruned as a shipped copy is (:func:`prune`, ``wlr prune``, and by
a relay round when ``storage.ship_prune`` has passed since its last prune), by its own
retention, defaulting to ``master.retention``.
"""

from __future__ import annotations

import logging
from datetime import datetime

from wlcore.logstore import LogStore
from wlcore.retention import PruneReport, keep_of
from wlcore.ship import LOGS_DIR, read_config, ship
from wlcore.state import MASTER_CONFIG as CONFIG_FILE, STARTED, MasterState
from wlcore.storage import Storage

from .book import StateBook
from .planner import manifest_of
from .source import RELAY_DIR, CurrentSource

log = logging.getLogger("wlr.relay")


class Relay:
    """Relaying of :class:`wlr.replica.Replica`.

    Args:
        book: the replica's state (``relay``, ``source``, ``batches``, ``tick``) and log.
        source: where the replica reads now (:mod:`wlr.source`).
        master: the master's name.
    """

    def __init__(self, book: StateBook, source: CurrentSource, master: str) -> None:
        self.book = book
        self._source = source
        self.master = master
        self.name = book.name
        path = Storage.join(book.path, RELAY_DIR)
        self.store = LogStore(Storage.of(path), path, Storage.join(path, LOGS_DIR), master)  # the relay folder's

    @property
    def relay_path(self) -> str:
        """The relay folder, ``<replica>/wlr_relay``."""
        return Storage.join(self.book.path, RELAY_DIR)

    def _held(self, number: int):
        """The manifest in the relay folder of the batch that ends at level-0 batch ``number``
        (itself, or a compacted batch ending there), None when the relay holds none."""
        found = manifest_of(self.store, number)
        if found is None:
            ends = [b for b in self.store.compacted() if b.last == number]
            found = self.store.manifest(ends[-1]) if ends else None
        return found

    @property
    def relaying(self) -> bool:
        """True when this replica relays what it applied (``relay=1`` in wlr.config)."""
        return self.book.state.relay

    def ship(self, read: MasterState | None) -> None:
        """Ship what this replica has wholly applied to its relay folder. A failure to ship
        is logged, never a failure of replay (the next round ships again).

        Args:
            read: the source's wlc.config as the round read it (None: not read; read now).
        """
        state = self.book.state
        if not self.relaying or not state.source:
            return
        next_batch, tick = state.batches, state.tick
        src = self._source.source
        try:
            mcfg = read if read is not None else src.config()
            # mid-batch (replicate(until=N)): the relay holds the batches before, not N
            nxt = manifest_of(LogStore(src.storage, src.root, src.logs(mcfg), self.master), next_batch)
            claim_tick = tick if nxt is None or not nxt.txns else min(tick, nxt.first_txn - 1)

            def claim(cfg: MasterState) -> MasterState:
                """The tick, watermark and next batch of what the relay folder holds."""
                held = self._held(next_batch - 1)
                if held is not None:
                    watermark = held.watermark
                else:  # the relay holds nothing new: it claims the watermark it claimed before
                    before = read_config(Storage.of(self.relay_path), self.relay_path)
                    watermark = before.watermark if before is not None else None
                cfg.batches, cfg.tick = next_batch, min(claim_tick, cfg.tick)
                cfg.relay_of, cfg.watermark = self.name, watermark
                if cfg.tick < (mcfg.tick if mcfg is not None else -1):
                    cfg.state = STARTED  # the master may have stopped; this relay has not shipped it all yet
                return cfg

            report = ship(
                src.storage,
                src.root,
                self.master,
                self.relay_path,
                up_to_batch=next_batch,
                up_to_txn=tick,
                edit_config=claim,
                progress=False,
            )
        except Exception as exc:  # noqa: BLE001 (a relay's copy never stops replay)
            self.book.log(
                f"relay: shipping to {self.relay_path} failed ({type(exc).__name__}: {exc}); the next round ships again"
            )
            return
        if report.batches or report.snapshots:
            self.book.log(
                f"relay: shipped {len(report.batches)} batches and {len(report.snapshots)} snapshots "
                f"to {self.relay_path} (up to batch {next_batch - 1}, transaction {tick})"
            )


def prune(
    replica: str,
    dbfarm: str | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    keep: dict | None = None,
    retention: dict[str, str | None] | None = None,
) -> PruneReport:
    """Delete what the relay folder of relaying replica ``replica`` (``<replica>/wlr_relay``) no
    longer promises by its own retention (stored with it; each level not set there:
    ``master.retention``'s), by the rules of ``wlc.prune()``: never a batch or snapshot a replica
    reading the relay needs to reach a promised point. A relay round also prunes it when
    ``storage.ship_prune`` has passed since its last prune.

    Args:
        replica (str): the relaying replica's name.
        dbfarm (str | None): the folder holding it; None: ``$WLC_DBFARM`` or ``dbfarm`` in config.
        dry_run (bool): only report what would be deleted (nothing is written).
        now (datetime | None): the instant (UTC) retention counts back from; None: now.
        keep (dict | None): ``{"level0": "1d", ...}`` for this call only (durations as in config;
            left out or ``"off"``: forever).
        retention (dict | None): the relay's own retention to store first, e.g. ``{"level0": "1d"}``
            (``"off"``: forever; None or ``"master"``: as ``master.retention``); a dry run only uses it.

    Returns:
        PruneReport: ``deleted``, ``bytes_freed``, ``promise`` and ``lines()``, which say what was
        deleted and what the relay still promises.

    Raises:
        NotFoundError: no such dbfarm or database.
        ReplicaStateError: not a replica, or it relays nothing.
        ConfigError: a malformed ``keep`` or ``retention`` (nothing is deleted).
        ShipError: the relay folder holds no shipped copy of the replica's master.
    """
    from wlcore.settings import dbfarm as resolve_dbfarm
    from wlcore.ship import prune_copy

    from .errors import ReplicaStateError
    from .monitor import read_replica_state

    farm = resolve_dbfarm(dbfarm)
    storage = Storage.of(farm)
    path = Storage.join(farm, replica)
    st = read_replica_state(storage, path)
    folder = Storage.join(path, RELAY_DIR)
    if not storage.exists(Storage.join(folder, CONFIG_FILE)):
        raise ReplicaStateError(
            f"replica {replica!r} relays nothing (no {RELAY_DIR} folder with a wlc.config): nothing to prune; "
            f"make it a relay with wlr.replicate({st.master!r}, replica={replica!r}, relay=True)",
            cli=f"replica {replica!r} relays nothing (no {RELAY_DIR} folder with a wlc.config): nothing to prune; "
            f"make it a relay with: wlr replicate <dbfarm> {st.master} {replica} --relay",
        )
    keep = keep_of(keep)  # checked before anything is deleted
    return prune_copy(folder, st.master, keep=keep, dry_run=dry_run, now=now, retention=retention)
