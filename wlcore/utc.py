"""Instants as the logs and state files hold them: aware UTC datetimes, written as ISO-8601 with ``Z``.

Every instant wlc and wlr record is UTC (:func:`utcnow`); manifests, state files and log lines
write it with :func:`utc_iso` and read it back with :func:`parse_utc`; :func:`as_utc` takes a
naive or aware datetime a caller gives as UTC.
"""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    """The current instant in UTC (every instant capture and replay record is one)."""
    return datetime.now(timezone.utc)


def as_utc(ts: datetime) -> datetime:
    """``ts`` as an aware UTC instant (a naive datetime is taken as UTC).

    Args:
        ts (datetime): an instant, naive or aware.

    Returns:
        datetime: the same instant with ``tzinfo=UTC``.
    """
    return ts.replace(tzinfo=timezone.utc) if ts.tzinfo is None else ts.astimezone(timezone.utc)


def utc_iso(ts: datetime) -> str:
    """An instant as ISO-8601 UTC with microseconds and ``Z`` (``2026-11-25T05:12:16.394000Z``).

    Args:
        ts (datetime): an aware instant (any offset; converted to UTC).

    Returns:
        str: the text manifests and state files hold.
    """
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_utc(text: str) -> datetime:
    """The ISO-8601 instant ``text`` as an aware UTC datetime (the inverse of :func:`utc_iso`).

    Args:
        text (str): an ISO-8601 instant with ``Z`` or an offset.

    Returns:
        datetime: the instant in UTC.

    Raises:
        ValueError: ``text`` is not an ISO-8601 instant.
    """
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
