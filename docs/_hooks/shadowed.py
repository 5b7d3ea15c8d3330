"""A griffe extension: a package function that a submodule of the same name shadows.

``wlc/__init__.py`` defines the function ``wlc.master`` and holds the submodule ``wlc/master.py``.
Python's import system leaves the function as ``wlc.master``; griffe's static loader lets the
submodule replace it. This extension puts the function back, after binding the package's
imports from that submodule (``from .master import Master``) to their objects, so both
``wlc.master`` and ``wlc.Master`` render.
"""

from __future__ import annotations

import griffe

logger = griffe.get_logger(__name__)


class ShadowedFunctions(griffe.Extension):
    """Restores package functions shadowed by a submodule of the same name."""

    def __init__(self) -> None:
        self._functions: dict[str, griffe.Function] = {}

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        parent = func.parent
        if isinstance(parent, griffe.Module) and parent.is_init_module:
            self._functions[func.path] = func

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        for name, member in list(pkg.members.items()):
            func = self._functions.get(f"{pkg.path}.{name}")
            if func is None or member.is_alias or not member.is_module:
                continue
            prefix = f"{member.path}."
            for other, alias in list(pkg.members.items()):
                if alias.is_alias and alias.target_path.startswith(prefix):
                    target = member.get_member(alias.target_path[len(prefix) :])
                    pkg.members[other] = griffe.Alias(other, target, parent=pkg)
            pkg.members[name] = func
