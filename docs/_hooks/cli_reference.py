"""A mkdocs hook: the command-line reference, made at build time from the parsers themselves.

``docs/reference/command-line.md`` holds the marker ``<!-- commands -->``; this hook replaces it
with every subcommand of ``wlc`` and ``wlr`` and its ``--help`` as argparse prints it (from
``wlc.cli.build_parser`` and ``wlr.cli.build_parser``), so the reference can never drift from
what the commands take.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

PAGE = "reference/command-line.md"
MARKER = "<!-- commands -->"
WIDTH = 100  # columns of the help text


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, its one-line help, its parser)`` of each of a command line's subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    raise PluginError(f"{parser.prog}: no subcommands")


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


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the command-line page's marker with the reference (mkdocs' page hook)."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"{PAGE} lost its marker {MARKER}: the command-line reference has nowhere to go")
    return markdown.replace(MARKER, reference(Path(config.config_file_path).parent))
