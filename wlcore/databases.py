"""The databases of a dbfarm: what each one is, and the error for naming the wrong one.

A database is a folder of the dbfarm. It is a **master** when it holds ``wlc.config``
(MonetDB's master state file, written when it was put in master mode), a **replica** when it
holds ``wlr.config``, and a plain **database** otherwise. The command lines and the Python
API use :class:`Dbfarm` to refuse a name that is not what the call needs with what the name
is, the command that applies to it, and the nearest existing names, and never a hint that
would create something under a mistyped name (MonetDB's ``CALL wlc.master()`` is a
deliberate act, done once).
"""

from __future__ import annotations

import difflib
import logging
import posixpath
from datetime import datetime, timezone

from .errors import MasterStateError, NotFoundError, WlcError
from .promotion import check_not_fenced, database_of, superseded_error, supersedes
from .state import MASTER_CONFIG, REPLICA_CONFIG, MasterState, read_master_state, read_replica_state
from .storage import Storage

log = logging.getLogger("wlcore.databases")

MASTER, REPLICA, PLAIN, MISSING = "master", "replica", "database", "missing"


def nearest(name: str, candidates, n: int = 3) -> list[str]:
    """Up to ``n`` of ``candidates`` closest to ``name`` (difflib's ratio, at least 0.5), best first;
    names that match ignoring case, or whose last dotted part matches, come first.

    Args:
        name (str): the name given.
        candidates (Iterable[str]): the names that exist.
        n (int): how many at most.

    Returns:
        list[str]: the nearest names, best first (empty: none is near).
    """
    candidates = list(candidates)
    low = name.lower()
    exact = [c for c in candidates if c.lower() == low or c.lower().rsplit(".", 1)[-1] == low]
    near = difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)
    out: list[str] = []
    for c in exact + near:
        if c not in out:
            out.append(c)
    return out[:n]


def did_you_mean(name: str, candidates, what: str) -> str:
    """The end of a "not found" message: ``"; did you mean a or b?"`` for the nearest of
    ``candidates``, else ``"; the <what> are: ..."`` (at most 10 named), else ``"; there are no <what>"``.

    Args:
        name (str): the name given.
        candidates (Iterable[str]): the names that exist.
        what (str): what they are, plural (``masters in /data``).

    Returns:
        str: the text, starting with ``"; "``.
    """
    near = nearest(name, candidates)
    if near:
        return "; did you mean " + " or ".join(near) + "?"
    names = sorted(candidates)
    if not names:
        return f"; there are no {what}"
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return f"; the {what} are: " + ", ".join(names[:10]) + more


def _same_form(path: str) -> str:
    """``path`` in one form for comparing: a local path normalised, a URL without a trailing slash."""
    return path.rstrip("/") if "://" in path else posixpath.normpath(path)


def _promoted(cfg: MasterState) -> datetime:
    """When ``cfg``'s master was promoted (a master not promoted: before every promotion)."""
    return cfg.promoted or datetime.min.replace(tzinfo=timezone.utc)


class Dbfarm:
    """The databases of the dbfarm folder (or URL) ``path``: their kinds, and refusals naming them.

    Listed alike on every store (:meth:`Storage.subdirs`). On an object store a folder is the
    common prefix of its objects: a dbfarm there exists as soon as anything is written below
    it, so a missing one is not refused (it cannot be told from a new empty one; see
    :attr:`Storage.empty_folders`), and a database folder holding nothing is not listed.

    Args:
        path (str): the dbfarm folder (or URL).

    Raises:
        NotFoundError: ``path`` is a folder that does not exist on a store where folders
            exist by themselves (a dbfarm is never made by accident).
    """

    def __init__(self, path: str):
        self.path = path
        self.storage = Storage.of(path)
        if self.storage.empty_folders and not self.storage.isdir(path):
            raise NotFoundError(
                f"no dbfarm {path}: the folder does not exist; check the path (a new dbfarm is an "
                f"empty folder you make first: os.makedirs({path!r}))",
                cli=f"no dbfarm {path}: the folder does not exist; check the path (a new dbfarm "
                f"is an empty folder you make first: mkdir -p {path})",
            )

    def kind(self, name: str) -> str:
        """What database ``name`` of the dbfarm is.

        Args:
            name (str): the database's folder name.

        Returns:
            str: ``master``, ``replica``, ``database`` (a folder that is neither) or ``missing``.
        """
        folder = Storage.join(self.path, name)
        if self.storage.exists(Storage.join(folder, MASTER_CONFIG)):
            return MASTER
        if self.storage.exists(Storage.join(folder, REPLICA_CONFIG)):
            return REPLICA
        if self.storage.isdir(folder):
            return PLAIN
        return MISSING

    def names(self, kind: str | None = None) -> list[str]:
        """The databases of the dbfarm, sorted; hidden folders are not databases.

        Args:
            kind (str | None): only databases of this :meth:`kind` (None: all).

        Returns:
            list[str]: the folder names.
        """
        out = [d for d in self.storage.subdirs(self.path) if not d.startswith(".")]
        return sorted(d for d in out if kind is None or self.kind(d) == kind)

    def masters(self) -> dict[str, MasterState]:
        """Each master of the dbfarm with its ``wlc.config``; shipped copies and relays kept in the
        dbfarm's folder, and a ``wlc.config`` that cannot be read, are left out.

        Returns:
            dict[str, MasterState]: ``{folder name: its wlc.config}``.
        """
        out = {}
        for name in self.names(MASTER):
            try:
                cfg = read_master_state(self.storage, Storage.join(self.path, name))
            except (OSError, WlcError):
                continue
            if cfg is not None and cfg.shipped is None and not cfg.relay_of:
                out[name] = cfg
        return out

    def successor(self, name: str, cfg: MasterState) -> tuple[str, MasterState] | None:
        """The master that holds the database of master ``name`` in its place: one promoted after
        it (:func:`wlcore.promotion.supersedes`), the latest promoted when more, seen among this
        dbfarm's masters or else in a shipped copy ``name`` ships to (``wlc.copies``,
        :mod:`wlcore.ship`: a promoted master that ships there too; a copy that cannot be
        read is not seen, with a warning in the log).

        Args:
            name (str): the master's folder name.
            cfg (MasterState): its ``wlc.config``.

        Returns:
            tuple[str, MasterState] | None: where the promoted master was seen (its folder, or
            the shipped copy's URL) and that ``wlc.config``; None when ``name`` is the database's master.
        """
        from .ship import dest_root, known_copies, read_config

        later = [(n, c) for n, c in self.masters().items() if n != name and supersedes(c, cfg)]
        if later:
            folder, newer = max(later, key=lambda nc: _promoted(nc[1]))
            return Storage.join(self.path, folder), newer
        for url in known_copies(self.storage, Storage.join(self.path, name)):
            try:
                copy = read_config(Storage.of(url), dest_root(url))
            except Exception as exc:  # noqa: BLE001 (a store down, credentials: not seen, said in the log)
                log.warning("shipped copy %s not read for a newer master of database %s: %s", url, name, exc)
                continue
            if copy is not None and supersedes(copy, cfg):
                return url, copy
        return None

    def check_current(self, name: str, cfg: MasterState | None) -> None:
        """Refuse a master's folder whose database another master holds now: fenced by a promotion
        (``wlc.fenced``), or superseded by one it missed (:meth:`successor`). Writes there would
        never be captured, and its capture would hand out the promoted master's transaction ids.

        Args:
            name (str): the master's folder name.
            cfg (MasterState | None): its ``wlc.config`` (None: none yet; only the fence is checked).

        Raises:
            MasterStateError: the folder is fenced or superseded (the message names the promoted master).
            ConfigError: ``wlc.fenced`` is malformed.
        """
        path = Storage.join(self.path, name)
        check_not_fenced(self.storage, path)
        newer = self.successor(name, cfg) if cfg is not None else None
        if newer is not None:
            raise superseded_error(path, self.path, name, newer[0], newer[1])

    def current_master(self, database: str) -> str | None:
        """The folder of the master of database ``database`` now: the folder of that name when it
        is a master no other supersedes, else the promoted master holding that database (a
        promoted replica's folder keeps the replica's name, :mod:`wlcore.promotion`).

        Args:
            database (str): a database's name (or a master's folder name).

        Returns:
            str | None: the master's folder name; None when no master holds ``database``.
        """
        masters = self.masters()
        held = [n for n, c in masters.items() if database_of(c, n) == database]
        current = [n for n in held if not any(supersedes(c, masters[n]) for m, c in masters.items() if m != n)]
        if database in current:
            return database
        # the others hold it in a folder of another name: promoted masters, the latest promoted first
        return max(current, key=lambda n: _promoted(masters[n])) if current else None

    def folder_of(self, name: str) -> str:
        """The folder a master called ``name`` is in: ``name`` itself when a folder of that name
        exists (a master's, or a plain one about to become a master) or no master holds a database
        of that name, else the promoted master's folder holding database ``name`` (:meth:`current_master`).

        Args:
            name (str): a master's folder name or a database's name.

        Returns:
            str: the folder name.
        """
        if self.kind(name) != MISSING:
            return name
        return self.current_master(name) or name

    def master_of(self, replica: str) -> str | None:
        """The master a replica's ``wlr.config`` names.

        Args:
            replica (str): the replica's folder name.

        Returns:
            str | None: the master's name; None when it names none (or cannot be read).
        """
        try:
            state = read_replica_state(self.storage, Storage.join(self.path, replica))
        except (OSError, ValueError):
            return None
        return (state.master or None) if state is not None else None

    def replicas_of(self, master: str) -> list[str]:
        """The replicas in this dbfarm whose ``wlr.config`` names ``master`` as their master, or
        the master's folder ``master`` as their source (a promoted master's replicas name its
        database as their master).

        Args:
            master (str): the master's folder name.

        Returns:
            list[str]: their names, sorted.
        """
        folder = _same_form(self.storage.absolute(Storage.join(self.path, master)))
        out = []
        for r in self.names(REPLICA):
            try:
                state = read_replica_state(self.storage, Storage.join(self.path, r))
            except (OSError, ValueError):
                continue
            if state is None:
                continue
            source = _same_form(state.source) if state.source_kind == "master" and state.source else ""
            if source == folder or (state.master == master and not source):
                out.append(r)
        return out

    def _missing(self, name: str, kind: str) -> NotFoundError:
        hint = did_you_mean(name, self.names(kind), f"{kind}s in {self.path}")
        return NotFoundError(f"no database {name!r} in {self.path}{hint}")

    def require_master(self, name: str, error=None) -> str:
        """Check that ``name`` names a master: a master's folder, or a database a promoted master
        holds in a folder of another name (:meth:`current_master`).

        Args:
            name: the database name, or a promoted master's folder name.
            error: the exception class for a database that is not a master (default
                :class:`wlcore.errors.MasterStateError`); wlr passes its ReplicaStateError.

        Returns:
            str: the master's folder name (``name``, or the promoted master's folder holding
            database ``name`` when no folder ``name`` is a master).

        Raises:
            NotFoundError: there is no such database (the nearest masters are named).
            MasterStateError: it is a replica (the folder of its master is named, with ``wlr`` commands
                for it) or a plain database (``wlc master`` / :func:`wlc.master` puts it in master mode).
        """
        folder = self.folder_of(name)
        if folder != name:
            return folder
        kind = self.kind(name)
        if kind == MASTER:
            return name
        if kind == MISSING:
            raise self._missing(name, MASTER)
        error = error or MasterStateError
        if kind == REPLICA:
            database = self.master_of(name)
            master = (self.current_master(database) or database) if database else None
            of = f" of master {master!r}" if master else ""
            if master and database and master != database:
                of = f" of database {database!r}, whose master is {master!r}"
            instead = f"name its master {master!r} instead" if master else "name its master instead"
            raise error(
                f"{name!r} in {self.path} is a replica{of}, not a master: {instead} (see the replica with "
                f"wlr.Replica({database!r}, replica={name!r}, dbfarm={self.path!r}).status())",
                cli=f"{name!r} in {self.path} is a replica{of}, not a master: {instead} (see the replica "
                f"with: wlr status {self.path} {name})",
            )
        raise error(
            f"database {name!r} in {self.path} is not a master (no {MASTER_CONFIG}); putting it in master mode is "
            f"a deliberate step: wlc.master({name!r}, dbfarm={self.path!r})",
            cli=f"database {name!r} in {self.path} is not a master (no {MASTER_CONFIG}); putting it in master mode "
            f"is a deliberate step: wlc master {self.path} {name}",
        )

    def require_replica(self, name: str, error=None) -> None:
        """Check that ``name`` is a replica database.

        Args:
            name: the database name.
            error: the exception class to raise for a database that is not a replica
                (default :class:`wlcore.errors.MasterStateError`); wlr passes its ReplicaStateError.

        Raises:
            NotFoundError: there is no such database (the nearest replicas are named).
            MasterStateError (or ``error``): it is a master (``wlc status`` and its replicas are named)
                or a plain database.
        """
        kind = self.kind(name)
        if kind == REPLICA:
            return
        if kind == MISSING:
            raise self._missing(name, REPLICA)
        error = error or MasterStateError
        if kind == MASTER:
            reps = self.replicas_of(name)
            theirs = f"; its replicas here: {', '.join(reps)}" if reps else "; it has no replica in this dbfarm"
            raise error(
                f"{name!r} in {self.path} is a master, not a replica: see it with wlc.status({name!r}, "
                f"dbfarm={self.path!r}){theirs}",
                cli=f"{name!r} in {self.path} is a master, not a replica: see it with: wlc status "
                f"{self.path} {name}{theirs}",
            )
        raise error(
            f"database {name!r} in {self.path} is neither a master nor a replica (no {REPLICA_CONFIG})"
            + did_you_mean(name, self.names(REPLICA), f"replicas in {self.path}")
        )
