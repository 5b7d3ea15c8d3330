"""Which function :meth:`Storage.of <wlcore.storage.base.Storage.of>` picks an implementation
with. The interface does not import its implementations: :mod:`wlcore.storage.factory`
registers its ``storage_of`` here when the package loads."""

from __future__ import annotations

from typing import Any, Callable

_FACTORY: list[Callable[[str], Any]] = []  # the registered function (register_factory sets it)


def register_factory(factory: Callable[[str], Any]) -> None:
    """Make ``factory`` the function :meth:`Storage.of` picks an implementation with; a later
    registration replaces it (a test may register a function of its own).

    Args:
        factory (Callable[[str], Storage]): takes a local path or an fsspec URL and returns
            the storage for it, raising as :meth:`Storage.of` does.
    """
    _FACTORY[:] = [factory]


def storage_of(path: str) -> Any:
    """The storage the registered factory gives for ``path``; see :meth:`Storage.of`.

    Raises:
        LookupError: no factory is registered (``wlcore.storage`` was not imported whole).
    """
    if not _FACTORY:
        raise LookupError("no storage factory registered: import wlcore.storage")
    return _FACTORY[0](path)
