"""The package layout's own rule: a docstring on every public module, class and function,
checked on the source with ``ast``, no import. Neither a module nor a function has a line cap
(a long module that is one concept is fine, one that exists only to keep another short is
not); a function's size is measured by ruff's complexity rules (C901, PLR0912, PLR0915 in
pyproject.toml)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("wlcore", "wlc", "wlr")


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_public_modules_classes_and_functions_have_docstrings():
    missing = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        if ast.get_docstring(tree) is None:
            missing.append(str(path.relative_to(ROOT)))
        for parent in [tree, *[n for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]]:
            for node in parent.body:
                public = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                if public and not node.name.startswith("_") and ast.get_docstring(node) is None:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert missing == []
