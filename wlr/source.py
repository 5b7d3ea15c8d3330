"""Where a replica reads its master's transactions: the *source*.

A source is a folder holding a ``wlc.config`` and the logs and snapshots it names:

- the master's own folder (``wlr.replicate(master)``);
- a shipped copy on another filesystem or an object store (``logs=URL``, :mod:`wlc.ship`);
- a relay: another replica that ships what it has applied to ``<replica>/wlr_relay``
  (``source=<replica>``, :mod:`wlr.relay`), with the master's own batch numbers and GTIDs.

Every kind holds the master's batches under their original names, so a replica may move
between sources of one master (same database id) and go on from the same transaction
without a new copy, as a PostgreSQL standby moves between a primary and a cascading standby.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from wlcore.databases import Dbfarm
from wlcore.errors import ConfigError, WlcError
from wlcore.promotion import database_of, read_fence
from wlcore.settings import check_name, dbfarm as resolve_dbfarm
from wlcore.ship import read_config as read_shipped_config
from wlcore.state import (
    MASTER_CONFIG,
    REPLICA_CONFIG,
    MasterState,
    ReplicaState,
    logs_of,
    read_master_state as read_master_config,
)
from wlcore.storage import Storage

from .errors import ReplicaStateError

RELAY_DIR = "wlr_relay"  # a relaying replica's shipped copy, inside its folder


class SourceKind(StrEnum):
    """What a source folder is (recorded as ``source_kind`` in ``wlr.config``, by its value)."""

    MASTER = "master"  # the master's own folder
    SHIPPED = "shipped"  # a shipped copy (wlc ship)
    RELAY = "relay"  # a relaying replica's wlr_relay


class MasterLike(Protocol):
    """A ``wlc.Master`` as replay sees it (``wlr`` does not import ``wlc``): its database name
    and the dbfarm (folder or URL) holding it."""

    @property
    def dbname(self) -> str:
        """The master database's name."""
        ...

    @property
    def dbfarm(self) -> str:
        """The folder or URL of the dbfarm holding the master."""
        ...


@dataclass
class Source:
    """A folder a replica reads from: ``root`` holds the ``wlc.config`` (``kind`` one of
    ``master``, ``shipped``, ``relay``); :attr:`label` names it in messages."""

    storage: Storage
    root: str
    kind: SourceKind

    def __post_init__(self) -> None:
        self.kind = SourceKind(self.kind)  # also from its recorded text; ValueError for another

    @property
    def name(self) -> str:
        """The database the source is: the master's or the relaying replica's name (a
        shipped copy: its folder or URL)."""
        root = self.root.rstrip("/")
        if self.kind is SourceKind.SHIPPED:
            return root
        return posixpath.basename(posixpath.dirname(root) if self.kind is SourceKind.RELAY else root)

    @property
    def label(self) -> str:
        """``master 'm'``, ``relay 'r1'`` or ``shipped copy <url>``, for messages and status."""
        return f"shipped copy {self.root}" if self.kind is SourceKind.SHIPPED else f"{self.kind} {self.name!r}"

    def config(self) -> MasterState | None:
        """The source's wlc.config, or None when it has none (yet). A shipped
        copy's or relay's names its logs and snapshots inside ``root`` (:func:`wlcore.ship.read_config`)."""
        if self.is_master:
            return read_master_config(self.storage, self.root)
        return read_shipped_config(self.storage, self.root)

    def logs(self, mcfg: MasterState | None) -> str:
        """The source's log folder (path or URL).

        Args:
            mcfg (MasterState | None): the source's ``wlc.config`` (None: not known).

        Returns:
            str: its ``logs``, else ``<root>/wlc_logs``.
        """
        return logs_of(mcfg, self.root)

    def capture_name(self, master: str) -> str:
        """The folder ``wlc capture`` captures for this source: the master's own folder's name
        (a promoted master's folder keeps the replica's name), else ``master``.

        Args:
            master (str): the master database's name.
        """
        return self.name if self.is_master else master

    @property
    def is_master(self) -> bool:
        """True when the source is the master's own folder (not a shipped copy or a relay)."""
        return self.kind is SourceKind.MASTER

    def fenced(self) -> ReplicaStateError | None:
        """The refusal of a master's folder fenced by a promotion (:mod:`wlcore.promotion`).

        Returns:
            ReplicaStateError | None: the error naming the promoted master to read from instead;
            None when the source is no fenced master.

        Raises:
            ConfigError: the fence file is malformed.
        """
        fence = read_fence(self.storage, self.root) if self.is_master else None
        if fence is None:
            return None
        new = posixpath.basename(fence.promoted.rstrip("/"))
        cause = f"{self.label} is fenced: {fence.promoted} was promoted to master of {fence.database!r} at transaction {fence.tick}"
        return ReplicaStateError(
            f"{cause}; read from it instead: source={new!r}", cli=f"{cause}; read from it instead: --source {new}"
        )

    def missing(self, master: str) -> WlcError:
        """The error for a source without wlc.config, naming the fix for its kind.

        Args:
            master (str): the master's name, in the command the message gives.

        Returns:
            WlcError: for a master's folder, what ``Dbfarm.require_master`` says it is
            (NotFoundError naming the nearest masters, or ReplicaStateError); for a shipped copy or a
            relay, a ReplicaStateError naming how to fill it.
        """
        if self.kind is SourceKind.MASTER:
            from wlcore.databases import Dbfarm

            farm, name = posixpath.split(self.root.rstrip("/"))
            try:
                held = Dbfarm(farm).require_master(name, ReplicaStateError)  # what it is, the nearest masters
            except WlcError as exc:
                return exc
            if held != name:  # the folder went away; a replica promoted in its place holds the database
                cause = f"master {name!r} is not in {farm} any more; database {master!r} is held by the promoted master {held!r}"
                return ReplicaStateError(
                    f"{cause}; read from it: source={held!r}", cli=f"{cause}; read from it: --source {held}"
                )
            return ReplicaStateError(f"{self.root} is not a master (no {MASTER_CONFIG})")
        if self.kind is SourceKind.SHIPPED:
            return ReplicaStateError(
                f"{self.root} holds no shipped copy (no {MASTER_CONFIG}); ship there first: wlc.ship({self.root!r})",
                cli=f"{self.root} holds no shipped copy (no {MASTER_CONFIG}); ship there first: "
                f"wlc ship <dbfarm> {master} {self.root}",
            )
        promoted = posixpath.dirname(self.root.rstrip("/"))
        if self.kind is SourceKind.RELAY and self.storage.exists(Storage.join(promoted, MASTER_CONFIG)):
            return ReplicaStateError(
                f"{self.label} was promoted to master of {master!r}; read from it as a master: source={self.name!r}",
                cli=f"{self.label} was promoted to master of {master!r}; read from it as a master: --source {self.name}",
            )
        return ReplicaStateError(
            f"{self.label} relays nothing yet; replicate it with relay=True first",
            cli=f"{self.label} relays nothing yet; replicate it with --relay first",
        )


class CurrentSource:
    """Where one replica reads now, shared by its parts (set-up, rounds, relay, follower, applier):
    a later ``wlr.replicate(source=...)`` of the same replica switches it (:meth:`switch`).

    Args:
        source (Source): the source the replica reads first.
    """

    def __init__(self, source: Source) -> None:
        self.source = source

    def switch(self, source: Source) -> None:
        """Read from ``source`` from the next round on.

        Args:
            source (Source): the new source (a master, a shipped copy or a relay of the same master).
        """
        self.source = source


def master_source(master_dbfarm: str, master: str) -> Source:
    """The master's own folder as a source.

    Args:
        master_dbfarm (str): the master's dbfarm.
        master (str): the master's name.

    Returns:
        Source: ``<master_dbfarm>/<master>``, of kind ``master``.
    """
    path = Storage.join(master_dbfarm, master)
    return Source(Storage.of(master_dbfarm), path, SourceKind.MASTER)


def shipped_source(url: str) -> Source:
    """The shipped copy (``wlc ship``) at a folder or URL as a source.

    Args:
        url (str): the folder or URL shipped to.

    Returns:
        Source: of kind ``shipped``.

    Raises:
        ConfigError: ``url`` is empty.
    """
    url = str(url).strip().rstrip("/")
    if not url:
        raise ConfigError("logs= names no folder or URL; give the URL that wlc ship shipped to")
    return Source(Storage.of(url), url, SourceKind.SHIPPED)


def named_source(name, dbfarm: str | None) -> Source:
    """The source called ``name`` in ``dbfarm``: a master or a relaying replica.

    Args:
        name (str | Master | Replica): a ``wlc.Master``, a ``wlr.Replica``, or the name of a
            database with ``wlc.config`` (a master) or ``wlr.config`` (a replica: its relay).
        dbfarm (str | None): the dbfarm of a name (None: ``$WLC_DBFARM`` or config).

    Returns:
        Source: of kind ``master`` or ``relay``.

    Raises:
        ReplicaStateError: the database is neither a master nor a replica.
        ConfigError: a malformed name.
    """
    if hasattr(name, "dbname"):  # wlc.Master
        return master_source(name.dbfarm, name.dbname)
    if hasattr(name, "master") and hasattr(name, "name") and hasattr(name, "dbfarm"):  # wlr.Replica
        farm, name = name.dbfarm, name.name
    else:
        farm = resolve_dbfarm(dbfarm)
        name = check_name(name, "source database")
    storage = Storage.of(farm)
    path = Storage.join(farm, name)
    if storage.exists(Storage.join(path, MASTER_CONFIG)):
        return master_source(farm, name)
    if storage.exists(Storage.join(path, REPLICA_CONFIG)):
        return Source(storage, Storage.join(path, RELAY_DIR), SourceKind.RELAY)
    raise ReplicaStateError(
        f"source {name!r} in {farm} is neither a master nor a replica; name the master or a replica that relays"
    )


def recorded_source(state: ReplicaState) -> Source | None:
    """The source a replica's ``wlr.config`` records.

    Args:
        state (ReplicaState): the replica's state (``source``, ``source_kind``).

    Returns:
        Source | None: None for a replica made before sources were recorded.
    """
    root, kind = state.source, state.source_kind
    if not root or kind not in {k.value for k in SourceKind}:
        return None
    return Source(Storage.of(root), root, SourceKind(kind))


def master_name(source: Source) -> str:
    """The master's database name as ``source`` knows it (its folder's name, or the copy's
    ``database`` in wlc.config).

    Args:
        source (Source): the source.

    Returns:
        str: the master's name.

    Raises:
        ReplicaStateError: the shipped copy or relay has no wlc.config yet, or names no master.
    """
    cfg = source.config()
    if source.is_master:  # a promoted master's folder may have another name than its database
        return database_of(cfg, source.name)
    if cfg is None:
        raise source.missing("<master>")
    if not cfg.database:
        raise ReplicaStateError(f"{source.label} does not name its master database; ship it again with this version")
    return cfg.database


def promoted_folder(farm: str, name: str) -> tuple[Source | None, str | None]:
    """A master named by the folder of a promoted replica (:mod:`wlr.promote`): the folder is the
    source, and the master is the database it holds.

    Args:
        farm (str): the master's dbfarm.
        name (str): the name given as the master.

    Returns:
        tuple[Source | None, str | None]: ``(the folder as a source, None)`` when ``name`` is a
        promoted master's folder holding a database of another name (:func:`master_name` reads
        it); ``(None, name)`` otherwise.

    Raises:
        ConfigError: a malformed name, or the folder's ``wlc.config`` is malformed.
    """
    src = master_source(farm, check_name(name, "master database"))
    if database_of(src.config(), name) != name:
        return src, None
    return None, name


def held_by(farm: str, database: str) -> Source | None:
    """The promoted master's folder holding ``database`` when no folder of that name is in ``farm``
    (gone, moved away; :meth:`wlcore.databases.Dbfarm.folder_of`): a replica named by the database reads it.

    Args:
        farm (str): the master's dbfarm.
        database (str): the database's name.

    Returns:
        Source | None: the promoted master's folder as a source; None when a folder ``database``
        exists, or no promoted master holds the database.
    """
    from wlcore.databases import Dbfarm

    if not Storage.of(farm).isdir(farm):  # a master's dbfarm not made yet: nothing holds it
        return None
    folder = Dbfarm(farm).folder_of(database)
    return master_source(farm, folder) if folder != database else None


@dataclass(frozen=True)
class Names:
    """What a :class:`wlr.Replica`'s arguments name: its dbfarm, its master's dbfarm, the master,
    the replica and the source chosen by ``source=``/``logs=`` (None: none chosen)."""

    dbfarm: str
    master_dbfarm: str
    master: str
    replica: str
    source: Source | None


def resolve(
    master, replica: str | None, dbfarm: str | None, master_dbfarm: str | None, logs: str | None, source
) -> Names:
    """Resolve and check a replica's names (see :class:`wlr.Replica` for the arguments).

    Args:
        master (str | Master | None): the master's name, or a ``wlc.Master`` (its dbfarm becomes
            the master dbfarm); None: the one ``source`` or ``logs`` names.
        replica (str | None): the replica's name (None: ``<master>_replica``).
        dbfarm (str | None): the replica's dbfarm (None: ``$WLC_DBFARM`` or config).
        master_dbfarm (str | None): the master's dbfarm (None: ``dbfarm``).
        logs (str | None): a shipped copy to read (folder or URL).
        source (str | Source | None): a master or a relaying replica to read from, by name.

    Returns:
        Names: the dbfarms, the master, the replica and the chosen source.

    Raises:
        ConfigError: a malformed name; both ``logs`` and ``source``; no master named.
        NotFoundError: the dbfarm does not exist (never made by accident).
        ReplicaStateError: the replica would replicate itself.
    """
    if logs is not None and source is not None:
        raise ConfigError("give logs= (a shipped copy) or source= (a master or relaying replica), not both")
    if hasattr(master, "dbname"):
        master_dbfarm = master_dbfarm or master.dbfarm
        master = master.dbname
    farm = resolve_dbfarm(dbfarm)
    Dbfarm(farm)  # a dbfarm that does not exist is refused (NotFoundError): never made by accident
    mfarm = resolve_dbfarm(master_dbfarm) if master_dbfarm else farm
    chosen = named_source(source, mfarm) if source is not None else shipped_source(logs) if logs is not None else None
    if chosen is None and isinstance(master, str):
        chosen, master = promoted_folder(mfarm, master)
    if master is None:
        if chosen is None:
            raise ConfigError("name the master to replicate (or a source= or logs= that names it)")
        master = master_name(chosen)
    master = check_name(master, "master database")
    name = check_name(replica or f"{master}_replica", "replica database")
    if name == master and farm == mfarm:
        raise ReplicaStateError(f"a database cannot replicate itself ({name!r}); name another replica")
    return Names(farm, mfarm, master, name, chosen)
