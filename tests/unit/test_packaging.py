"""The wheel's package list names every package folder of the three packages (a folder left out
of pyproject.toml's list installs without its modules: the installed commands fail to import)."""

from __future__ import annotations

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_package_folder_is_in_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("wlcore", "wlc", "wlr")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set(), f"add to [tool.setuptools] packages in pyproject.toml: {sorted(found - listed)}"
    data = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"])
    assert {"wlcore.defaults"} <= listed and {"wlcore.defaults"} <= data
