"""The package layout's own rules: no function whose code (its body without the docstring) is
over 60 lines, and a docstring on every public module, class and function. Checked on the
source with ``ast``, no import. A module has no size cap: a long module that is one concept is
fine, and one that exists only to keep another short is not."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("wlcore", "wlc", "wlr")
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _code_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return 0 if not body else body[-1].end_lineno - body[0].lineno + 1


def test_no_function_over_60_lines_of_code():
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _code_lines(node) > MAX_FUNCTION_LINES:
                long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = _code_lines(node)
    assert long == {}


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
