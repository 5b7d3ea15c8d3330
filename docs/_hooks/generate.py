"""Regenerate the reference pages' generated blocks: ``make reference`` (``python -m docs._hooks.generate``).

Every page under ``docs/`` holding a block ``<!-- generated: SOURCE -->`` ... ``<!-- end
generated -->`` (see ``generated.py``) gets the block's Markdown made again from SOURCE:

- ``defaults``: a table per section of ``wlcore/defaults/wlc.yaml`` (``config_reference.py``);
- ``commands``: every subcommand's ``--help`` (``cli_reference.py``);
- ``::: path`` with mkdocstrings options: the object's signature and docstring (``api_reference.py``).

The output depends on the checkout only (sorted pages, no times, no paths of this machine), so
``tests/unit/test_reference_docs.py`` regenerates it in memory and fails when a committed page
differs. ``--check`` does the same here: it lists the stale pages and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import api_reference, cli_reference, config_reference
from .generated import BLOCK, COMMAND

ROOT = Path(__file__).resolve().parents[2]
HEAD = 5  # the lines of a page's top that must name COMMAND


def block(root: Path, source: str) -> str:
    """The Markdown of one block, made from its SOURCE."""
    if source == "defaults":
        return config_reference.reference(root)
    if source == "commands":
        return cli_reference.reference(root)
    if source.startswith(":::"):
        return api_reference.reference(root, source)
    raise ValueError(f"<!-- generated: {source} -->: no such source (defaults, commands or a ::: directive)")


def page(root: Path, text: str, name: str = "page") -> str:
    """``text`` with each generated block made again."""
    if BLOCK.search(text) and COMMAND not in "\n".join(text.splitlines()[:HEAD]):
        raise ValueError(f"{name}: a page with generated blocks says at its top that `{COMMAND}` makes them")
    return BLOCK.sub(lambda m: _filled(root, m["source"]), text)


def _filled(root: Path, source: str) -> str:
    """A generated block, markers included, holding what SOURCE makes now."""
    return f"<!-- generated: {source} -->\n\n{block(root, source).strip()}\n\n<!-- end generated -->\n"


def pages(root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """``{page: (committed text, regenerated text)}`` of every page under docs/ with a generated block."""
    out = {}
    for path in sorted((root / "docs").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if BLOCK.search(text):
            name = path.relative_to(root).as_posix()
            out[name] = (text, page(root, text, name))
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the stale pages (``--check``: only list them, exit 1 when any is stale)."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list the stale pages, write nothing")
    args = parser.parse_args(argv)
    stale = {name: new for name, (old, new) in pages().items() if old != new}
    for name, new in stale.items():
        if not args.check:
            (ROOT / name).write_text(new, encoding="utf-8")
        print(f"{'stale' if args.check else 'wrote'} {name}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
