"""Seconds and intervals as settings and arguments give them: ``2.5`` seconds, ``"6h"``,
``"500 transactions"``, ``off``.

:func:`seconds` and :func:`interval` say what is wrong with a value (``ValueError`` without a
name); :func:`number` and :func:`every` name the setting or argument in a
:class:`~wlcore.errors.ConfigError`. The units are the ones of the Unix ``sleep`` command's
suffixes (s, m, h, d) plus w for weeks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

_UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_COUNTS = {
    "transactions": "transactions",
    "transaction": "transactions",
    "txns": "transactions",
    "txn": "transactions",
    "batches": "batches",
    "batch": "batches",
}
_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class Every:
    """An interval or a retention: ``amount`` of ``unit`` (``seconds``, ``transactions`` or ``batches``)."""

    amount: float
    unit: str = "seconds"

    def __str__(self) -> str:
        amount = int(self.amount) if float(self.amount).is_integer() else self.amount
        return f"{amount} s" if self.unit == "seconds" else f"{amount} {self.unit}"


def seconds(value: Any, minimum: float = 0.0) -> float:
    """Return ``value`` as float seconds of at least ``minimum``.

    Args:
        value (Any): a number, or text holding one.
        minimum (float): the least accepted, seconds.

    Returns:
        float: the seconds.

    Raises:
        ValueError: not a number (booleans included), NaN, or below ``minimum``; the message
            starts with ``must be`` and names the value, the caller prefixes what it was.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a number of seconds, not {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number of seconds, not {value!r}") from None
    if out != out or out < minimum:
        raise ValueError(f"must be >= {minimum:g} seconds, not {value!r}")
    return out


def number(value: Any, what: str, minimum: float = 0.0) -> float:
    """Return ``value`` as float seconds of at least ``minimum`` (see :func:`seconds`).

    Args:
        value (Any): a number, or text holding one.
        what (str): the setting or argument it is, for the message.
        minimum (float): the least accepted, seconds.

    Returns:
        float: the seconds.

    Raises:
        ConfigError: ``value`` is not such a number; the message names ``what``.
    """
    try:
        return seconds(value, minimum)
    except ValueError as exc:
        raise ConfigError(f"{what} {exc}") from None


def interval(value: Any, counts: tuple[str, ...] = ()) -> Every | None:
    """Parse an interval (``master.compact.level1``, ``master.snapshot_interval``, retention).

    Args:
        value (Any): None, ``false``, ``off`` or 0 mean off; a number is seconds; text is
            ``<n><unit>`` with unit s, m, h, d or w (``"90s"``, ``"6h"``, ``"1d"``), or
            ``"<n> transactions"`` / ``"<n> batches"`` where ``counts`` allows them.
        counts (tuple[str, ...]): the count units allowed (``"transactions"``, ``"batches"``).

    Returns:
        Every | None: the interval (seconds, or a count); None when off.

    Raises:
        ValueError: anything else; the message starts with ``must be`` and lists the accepted forms.
    """
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("off", "none", "")):
        return None
    forms = (
        "a number of seconds, '<n>s', '<n>m', '<n>h', '<n>d', '<n>w'"
        + "".join(f", '<n> {c}'" for c in counts)
        + " or off"
    )
    if isinstance(value, bool):
        raise ValueError(f"must be {forms}, not {value!r}")
    if isinstance(value, (int, float)):
        amount, unit = float(value), "seconds"
    else:
        m = _EVERY.match(str(value))
        word = m.group(2).lower() if m else ""
        if not m or not (word == "" or word in _UNITS or _COUNTS.get(word) in counts):
            raise ValueError(f"must be {forms}, not {value!r}")
        amount = float(m.group(1))
        if word in _COUNTS:
            unit = _COUNTS[word]
        else:
            amount, unit = amount * _UNITS.get(word, 1), "seconds"
    if amount != amount or amount < 0:
        raise ValueError(f"must be {forms}, not {value!r}")
    return Every(amount, unit) if amount > 0 else None


def every(value: Any, what: str, counts: tuple[str, ...] = ()) -> Every | None:
    """Parse an interval setting or argument (see :func:`interval`).

    Args:
        value (Any): the setting's or argument's value.
        what (str): its name for the message (``master.compact.level1``, ``--level1``).
        counts (tuple[str, ...]): the count units allowed (``"transactions"``, ``"batches"``).

    Returns:
        Every | None: the interval; None when off.

    Raises:
        ConfigError: a malformed value; the message names ``what`` and the accepted forms.
    """
    try:
        return interval(value, counts)
    except ValueError as exc:
        raise ConfigError(f"{what} {exc}") from None
