"""The command-line reference, made from the parsers themselves.

``docs/reference/command-line.md`` holds the generated block ``commands``; ``make reference``
fills it with every subcommand of ``wlc`` and ``wlr`` and its ``--help`` as argparse prints it
(from ``wlc.cli.build_parser`` and ``wlr.cli.build_parser``), and a unit test fails when the page
drifts from what the commands take.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

WIDTH = 100  # columns of the help text


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, its one-line help, its parser)`` of each of a command line's subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    raise ValueError(f"{parser.prog}: no subcommands")


def _help(parser: argparse.ArgumentParser) -> str:
    """``parser``'s ``--help`` at :data:`WIDTH` columns."""
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    return parser.format_help().rstrip()


def reference(root: Path) -> str:
    """The generated Markdown: a section a command line, a subsection a subcommand."""
    sys.path.insert(0, str(root))
    try:
        from wlc.cli import build_parser as wlc_parser
        from wlr.cli import build_parser as wlr_parser
    finally:
        sys.path.remove(str(root))
    out = []
    for name, build in (("wlc", wlc_parser), ("wlr", wlr_parser)):
        parser = build()
        parser.prog = name
        out += [f"### `{name}`", "", "```text", _help(parser), "```", ""]
        for sub, line, subparser in _subcommands(parser):
            subparser.prog = f"{name} {sub}"
            out += [
                f"#### `{name} {sub}`",
                "",
                line[:1].upper() + line[1:] + ".",
                "",
                "```text",
                _help(subparser),
                "```",
                "",
            ]
    return "\n".join(out)
