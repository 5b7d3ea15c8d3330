"""A mkdocs hook: the site's view of the generated blocks the reference pages carry.

A generated block is ``<!-- generated: SOURCE -->``, the Markdown ``make reference`` made from
SOURCE, then ``<!-- end generated -->`` (``docs/_hooks/generate.py`` writes them; a unit test
fails when one is stale). The site shows a block's Markdown as committed, except where SOURCE is
a mkdocstrings directive (``::: wlc.Master`` and its options): there the directive replaces the
block, so the API pages render with mkdocstrings on the site and as plain Markdown on a forge.
"""

from __future__ import annotations

import re

BLOCK = re.compile(r"<!-- generated: (?P<source>.+?)\s*-->\n(?P<body>.*?)<!-- end generated -->\n?", re.S)
COMMAND = "make reference"  # what regenerates the blocks; each page with one names it near its top


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Each generated block as the site shows it (mkdocs' page hook)."""
    return BLOCK.sub(lambda m: m["source"] + "\n" if m["source"].startswith(":::") else m["body"], markdown)
