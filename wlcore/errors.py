"""Exceptions raised by wlc (capture) and shared with wlr (replay)."""

import re


class WlcError(Exception):
    """Base class of every error wlc and wlr raise on purpose.

    ``str(error)`` names the problem and its fix as a Python call; ``error.cli`` is the same
    message with the fix as a command (``wlc ...``/``wlr ...``), which the command line
    prints. Errors whose fix is neither (a file to repair, a name to change) have
    ``cli`` equal to ``str(error)``.

    Args:
        *args (object): the exception's arguments, as :class:`Exception` takes them (the message first).
        cli (str | None): the message with the fix as a command (None: ``str(error)``).
    """

    def __init__(self, *args, cli: str | None = None):
        super().__init__(*args)
        self._cli = cli

    @property
    def cli(self) -> str:
        """The message as the command line prints it: the fix given as a command."""
        return self._cli if self._cli is not None else str(self)


class ConfigError(WlcError, ValueError):
    """A configuration value, a name or an argument is malformed; the message says which and how to fix it."""


class TargetError(ConfigError):
    """``until`` is malformed, names a point the replica has already passed, an instant later
    than the wait for it can cover, or (for a new replica, unless asked) a point before the
    master's first transaction."""


class ReplicationTimeout(WlcError):
    """``replicate(until=...)`` waited ``timeout`` seconds and its target was not published,
    or its target cannot be published: capture is not running (its heartbeat is stale) or the
    master stopped logging before it. The message states what the master has published and
    capture's liveness as read."""


class MasterStateError(WlcError):
    """The database is not in the state the call needs (not a master, stopped, already a master elsewhere)."""


class NotWritableError(ConfigError):
    """A folder wlc must write into cannot be written (read-only, not a folder, or under a file);
    the message names the folder and the fix."""


class StalePathError(MasterStateError):
    """``wlc.config`` names a log folder or snapshot that is not there (the database folder was
    moved or copied while the file held absolute paths, or the folder was deleted); the message
    names the path and the line to write instead."""


class NotFoundError(WlcError, LookupError):
    """A dbfarm, database or table that was named does not exist; the message names the nearest
    existing ones (never a command that would create something under the name given)."""


class BucketNotFoundError(NotFoundError):
    """An S3 URL names a bucket that does not exist (or that the credentials cannot see); wlc
    never creates a bucket (its region, access and costs are the owner's choice)."""


class BatchError(WlcError):
    """A published batch is unreadable: missing or truncated file, checksum mismatch, unknown format version."""


class NotReplicatedWarning(UserWarning):
    """A Delta table of the master cannot be replicated; the message names it and says why."""


class LockHeldError(WlcError):
    """Another process holds the lock (a file lock on local and mounted folders, a lease on an
    object store) and the caller would not wait, or waited ``timeout`` seconds in vain.
    ``path`` names the lock; ``holder`` says who holds it when the store says so (else "").

    Args:
        path (str): the lock's file or object.
        what (str): what the lock guards (``capture of db``), at the head of the message.
        holder (str): who holds it (what, host, process, lease end), when the store says so.
    """

    def __init__(self, path: str, what: str, holder: str = ""):
        by = f" (held by {holder})" if holder else ""
        super().__init__(
            f"{what}: the lock {path} is held by another process{by}; stop that process or wait for it to finish"
        )
        self.path, self.what, self.holder = path, what, holder


class LockUnsupportedError(WlcError):
    """The storage cannot hold a lock at all (an object store without conditional writes, a
    remote filesystem without locks): the work that needs it is refused rather than done
    unlocked. The message names the store and the fix."""


_TOLD = re.compile(r"\[[A-Z][A-Z0-9_.]+\]|\w(Exception|Error)\b:")


def first_line(exc: BaseException) -> str:
    """What ``exc`` says, in one line of at most 400 characters: the line naming Spark's or Java's
    error (a Py4J error's first line only says which call failed), else its first line.

    Args:
        exc (BaseException): the error.

    Returns:
        str: the line; the exception's class name when the message is empty.
    """
    lines = [
        ln.strip() for ln in str(exc).splitlines() if ln.strip() and not ln.startswith(("JVM stacktrace", "\tat "))
    ]
    told = next((ln for ln in lines if _TOLD.search(ln)), lines[0] if lines else type(exc).__name__)
    return told.lstrip(": ")[:400]
