"""Making a replica: the checks before anything is written, the start from a snapshot, the locks.

A mixin of :class:`wlr.replica.Replica` (it uses the replica's ``storage``, ``path``,
``master``, ``state`` and state file).
"""
from __future__ import annotations

import fcntl
import os

from wlc import snapshot_store as snap
from wlc.batch import parse_utc, utc_iso
from wlc.errors import ConfigError
from wlc.master import CONFIG_FILE as MASTER_CONFIG, read_config as read_master_config
from wlc.names import split_name, state_key
from wlc.storage import Storage

from . import failure
from .errors import ReplicaStateError
from .plan import Target, check_not_passed, parse_until
from .route import Route

CONFIG_FILE = "wlr.config"
LOG_FILE = "wlr.log"


class ReplicaSetup:
    """Set-up of :class:`wlr.replica.Replica`: validate, the first copy, the master's config, locks."""

    # ------------------------------------------------------------------ set-up
    def validate(self, until=None) -> dict[str, str]:
        """Check, without writing anything, that ``replicate(until)`` may start; returns the master's wlc.config.

        Raises:
            TargetError: ``until`` is malformed or already passed.
            ReplicaStateError: the master is not a master; the replica folder is a master, a
                replica of another master or of an earlier incarnation, or a non-empty folder.
            ConfigError: the replica folder is a file.
        """
        target = parse_until(until)
        mcfg = self._master_config()
        if self.storage.exists(self.path) and not self.storage.isdir(self.path):
            raise ConfigError(f"{self.path} is a file, not a database folder; name another replica")
        self._probe_lock()
        if self.storage.exists(Storage.join(self.path, MASTER_CONFIG)):
            raise ReplicaStateError(f"{self.path} is a master; a master cannot become a replica")
        state = self._load()
        if state:
            self._check_follows(state, mcfg)
            clock = parse_utc(state["clock"]) if state.get("clock") else None
            check_not_passed(target, int(state.get("tick", -1)), clock)
        elif any(n for n in self.storage.listdir(self.path) if not n.startswith(".") and n not in ("wlr.lock", LOG_FILE)):
            raise ReplicaStateError(f"{self.path} exists and is not empty; replicate into a new database name")
        if not state or state.get("state") == "restoring":
            logs = mcfg.get("logs", "")
            start = self.route(mcfg).start_for(mcfg, logs, target, self.start_snapshot)
            self.route(mcfg).check_path(logs, mcfg, start, target, self.compacted and self.collapse)
        return mcfg

    def route(self, mcfg: dict[str, str]) -> Route:
        """The master's snapshots and compacted batches as this replica reads them."""
        if self._route is None or self._route.dbid != mcfg.get("dbid"):
            self._route = Route(self.storage, self.master_path, self.master, mcfg.get("dbid", ""))
        return self._route

    def _check_follows(self, state: dict[str, str], mcfg: dict[str, str]) -> None:
        """Raise ReplicaStateError unless replica ``state`` follows this master, same database id."""
        if state.get("master") != self.master:
            raise ReplicaStateError(f"{self.path} is a replica of {state.get('master')!r}, not {self.master!r}")
        if state.get("dbid") != mcfg.get("dbid"):
            raise ReplicaStateError(
                f"master {self.master!r} has database id {mcfg.get('dbid')} but this replica follows "
                f"{state.get('dbid')}: the master was made anew; make a new replica")

    def _ensure(self, mcfg: dict[str, str], target: Target) -> None:
        """Make the replica on first use from the newest snapshot at or before ``target``
        (:mod:`wlr.route`): wlr.config first (state ``restoring``), then the snapshot's
        tables, then state ``new`` at the snapshot's transaction. A crash in between
        restarts the copy. A replica that exists is never reset by a newer snapshot."""
        if self.state and self.state.get("state") != "restoring":
            self._check_follows(self.state, mcfg)
            return
        start = self.route(mcfg).start_for(mcfg, mcfg.get("logs", ""), target, self.start_snapshot)
        self.storage.makedirs(self.path)
        state = {"master": self.master, "masterfarm": self.master_dbfarm, "dbid": mcfg["dbid"],
                 "logs": mcfg.get("logs", ""), "batches": start.batch + 1, "tick": start.txn,
                 "clock": utc_iso(start.time) if start.time else "", "skipped": "",
                 "state": "restoring", **{k: "" for k in failure.ERROR_KEYS}}
        self.state = {k: str(v) for k, v in state.items()}
        self._save()
        if start.path:
            body = snap.read(self.storage, start.path)
            applier = self._applier()
            for name in sorted(body["tables"]):
                schema, table = split_name(name)
                dst = Storage.join(self.path, schema, table)
                self.storage.rm(dst)
                self.storage.copy_tree(Storage.join(start.path, schema, table), dst)
                self.state[state_key("version.", name)] = str(applier.current_version(name))
            self._log(f"started from the snapshot of {self.master} at transaction {start.txn} "
                      f"({len(body['tables'])} tables, {start.path})")
        else:
            self._log(f"started empty from master {self.master}")
        self._set_view(-1, {})
        self.state["state"] = "new"
        self._save()

    def _master_config(self) -> dict[str, str]:
        mcfg = read_master_config(self.storage, self.master_path)
        if mcfg is None:
            raise ReplicaStateError(f"{self.master_path} is not a master (no {MASTER_CONFIG}); call wlc.master() there first",
                                    cli=f"{self.master_path} is not a master (no {MASTER_CONFIG}); start capture there "
                                        f"first: wlc capture {self.master_dbfarm} {self.master}")
        return mcfg

    def _probe_lock(self) -> None:
        """Raise ReplicaStateError when another process holds ``wlr.lock`` (creates nothing)."""
        path = os.path.join(self.path, "wlr.lock")
        if self._lockfile is not None or not self.storage.local or not os.path.exists(path):
            return
        with open(path) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ReplicaStateError(f"another process is replaying into {self.path}; stop it first") from None
            fcntl.flock(fh, fcntl.LOCK_UN)

    def _acquire(self) -> None:
        if self._lockfile is not None or not self.storage.local:
            return
        self.storage.makedirs(self.path)
        fh = open(os.path.join(self.path, "wlr.lock"), "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise ReplicaStateError(f"another process is replaying into {self.path}; stop it first") from None
        self._lockfile = fh

