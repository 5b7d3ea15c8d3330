"""Typed ``key=value`` state files (MonetDB's ``wlc.config`` form) that write back what they read.

A state file is a dataclass whose fields are its keys, each with a :class:`Codec` turning
the file's text into a typed value (an int, a UTC datetime, a dict) and back. The keys keep
the order they have in the file, as a Python dict keeps insertion order: assigning a field
that is not in the file yet appends its key, :meth:`StateFile.drop` removes one, and keys
no field knows are kept as text in ``extra`` and written back where they stood. So a file
read and written again is the same text, byte for byte, and a new one lists its keys in
the order they were first set (the order the dict-based writers used).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, TypeVar

from .errors import ConfigError
from .settings import format_kv, parse_kv
from .utc import parse_utc, utc_iso

S = TypeVar("S", bound="StateFile")


@dataclass(frozen=True)
class Codec:
    """How one key's text becomes a typed value (``parse``) and back (``render``); ``render``
    of ``parse(text)`` is ``text`` for every text today's writers produce."""

    parse: Callable[[str], Any]
    render: Callable[[Any], str]


def _int_or_none(text: str) -> int | None:
    return int(text) if text.strip() else None


def _seconds(value: float | None) -> str:
    """Seconds as the master writes them: ``"3"`` for whole seconds, else ``repr`` (``"0.5"``)."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


TEXT = Codec(str, lambda v: "" if v is None else str(v))
INT = Codec(_int_or_none, lambda v: "" if v is None else str(int(v)))
SECONDS = Codec(lambda t: float(t) if t.strip() else None, _seconds)
UTC = Codec(lambda t: parse_utc(t) if t.strip() else None, lambda v: "" if v is None else utc_iso(v))


def _json_of(kind: type, text: str) -> Any:
    value = json.loads(text) if text.strip() else kind()
    if not isinstance(value, kind):
        raise ValueError(f"not a JSON {'object' if kind is dict else 'list'}")
    return value


JSON_DICT = Codec(lambda t: _json_of(dict, t), lambda v: json.dumps(v, sort_keys=True) if v else "")
JSON_LIST = Codec(lambda t: _json_of(list, t), lambda v: json.dumps(list(v)) if v else "")
FLAG = Codec(lambda t: t == "1", lambda v: "1" if v else "")


def utc_or(word: str) -> Codec:
    """A UTC instant, or the literal ``word`` (``watermark=stopped``)."""
    return Codec(lambda t: word if t == word else UTC.parse(t), lambda v: word if v == word else UTC.render(v))


@dataclass(eq=False)
class StateFile:
    """Base of the typed state files: subclasses are dataclasses whose fields (other than
    ``extra``) are keys of the file, each with its codec in ``CODECS``.

    ``extra`` holds keys no field knows (a newer version's), as text, written back as read.
    """

    CODECS: ClassVar[dict[str, Codec]] = {}
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_keys", [])

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        keys = self.__dict__.get("_keys")
        if keys is not None and name in self.CODECS and name not in keys:
            keys.append(name)

    # -------------------------------------------------------------- keys
    @classmethod
    def of(cls: type[S], **values: Any) -> S:
        """A new state holding exactly ``values``, its keys in the order given (None: an empty value)."""
        out = cls()
        for key, value in values.items():
            setattr(out, key, value)
        return out

    def has(self, key: str) -> bool:
        """True when ``key`` is in the file (possibly empty)."""
        return key in self.__dict__["_keys"] or key in self.extra

    def _holds(self, key: str) -> bool:
        """True when ``key`` is one this state can hold (subclasses add their key families)."""
        return key in self.CODECS or key in self.extra

    def keys(self) -> list[str]:
        """The file's keys, in the order they are written."""
        keys = [k for k in self.__dict__["_keys"] if self._holds(k)]
        return keys + [k for k in self.extra if k not in keys]

    def drop(self, key: str) -> None:
        """Remove ``key`` from the file (its field returns to its default)."""
        keys = self.__dict__["_keys"]
        if key in keys:
            keys.remove(key)
        self.extra.pop(key, None)
        for f in fields(self):
            if f.name == key and key in self.CODECS:
                default = f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
                object.__setattr__(self, key, default)

    def _track(self, key: str) -> None:
        """Record ``key`` as set (for keys kept outside the typed fields, e.g. ``version.<table>``)."""
        keys = self.__dict__["_keys"]
        if key not in keys:
            keys.append(key)

    def _untrack(self, key: str) -> None:
        keys = self.__dict__["_keys"]
        if key in keys:
            keys.remove(key)

    # -------------------------------------------------------------- text
    def _text_of(self, key: str) -> str | None:
        """The text of ``key`` (None: not held). Subclasses add their key families here."""
        if key in self.CODECS:
            return self.CODECS[key].render(getattr(self, key))
        return self.extra.get(key)

    def _take(self, key: str, text: str, source: str) -> None:
        """Set ``key`` from its ``text`` read from ``source``. Subclasses add their key families here."""
        codec = self.CODECS.get(key)
        if codec is None:
            self.extra[key] = text
            self._track(key)
            return
        try:
            setattr(self, key, codec.parse(text))
        except ValueError as exc:
            raise ConfigError(f"{source}: {key}={text!r} is malformed ({exc}); fix or remove the line") from None

    def to_text(self) -> str:
        """The file's text: ``key=value`` lines (:func:`wlcore.settings.format_kv`), its keys in order."""
        pairs = {}
        for key in self.keys():
            text = self._text_of(key)
            if text is not None:
                pairs[key] = text
        return format_kv(pairs)

    @classmethod
    def from_text(cls: type[S], text: str, source: str = "<text>") -> S:
        """Parse a state file's ``text`` (``source`` names it in errors).

        Raises:
            ConfigError: a line is not ``key=value``, or a typed key's value is malformed;
                the message names the file and the key.
        """
        out = cls()
        for key, value in parse_kv(text, source).items():
            out._take(key, value, source)
        return out
