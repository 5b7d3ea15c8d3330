"""``dir(wlc)`` and ``dir(wlr)`` show the public API (``__all__``), not the packages' submodules."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    ("package", "inner"),
    [
        ("wlr", ("replay", "planner", "replica", "follow", "apply")),
        ("wlc", ("capture", "publisher", "lifecycle", "cli")),
    ],
)
def test_dir_shows_the_public_api_and_star_import_still_works(package, inner):
    module = importlib.import_module(package)
    for name in inner:  # imported, so they are attributes of the package
        importlib.import_module(f"{package}.{name}")
    assert dir(module) == sorted(module.__all__)
    assert not set(inner) & set(dir(module))
    names: dict = {}
    exec(f"from {package} import *", names)  # noqa: S102 - the star import a user writes
    assert set(module.__all__) <= set(names)
    assert "replicate" in names if package == "wlr" else "master" in names
