"""An attribute that stands for a field of an object its host owns (composition without copies)."""

from __future__ import annotations

from typing import Any


class FieldOf:
    """A class attribute that reads and writes the field of the same name of the object in the
    host's attribute ``holder``: ``settle = FieldOf("timing")`` on :class:`wlc.Master` makes
    ``master.settle = 5`` set ``master.timing.settle``; ``collapse = FieldOf("_options")`` on
    :class:`wlr.Replica` stands for ``replica._options.collapse``.

    Args:
        holder: the name of the host's attribute holding the object.
        doc: the attribute's docstring.
    """

    def __init__(self, holder: str, doc: str = "") -> None:
        self.holder = holder
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, host: Any, owner: type | None = None) -> Any:
        return self if host is None else getattr(getattr(host, self.holder), self.name)

    def __set__(self, host: Any, value: Any) -> None:
        setattr(getattr(host, self.holder), self.name, value)
