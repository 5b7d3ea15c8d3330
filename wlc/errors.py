"""Exceptions raised by wlc (capture) and shared with wlr (replay)."""


class WlcError(Exception):
    """Base class of every error wlc and wlr raise on purpose."""


class ConfigError(WlcError, ValueError):
    """A configuration value, a name or an argument is malformed; the message says which and how to fix it."""


class MasterStateError(WlcError):
    """The database is not in the state the call needs (not a master, stopped, already a master elsewhere)."""


class BatchError(WlcError):
    """A published batch is unreadable: missing or truncated file, checksum mismatch, unknown format version."""


class NotReplicatedWarning(UserWarning):
    """A Delta table of the master cannot be replicated; the message names it and says why."""
