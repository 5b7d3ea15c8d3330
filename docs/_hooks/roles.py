"""A mkdocs hook: Sphinx roles in docstrings (``:func:`flush```) shown as the code they name.

The packages' docstrings are Google style with a few reStructuredText roles; mkdocstrings renders
the role's name as text before the code span. This drops the role's name from the API pages.
"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|exc|data|obj|const):(?=<code>)")


def on_page_content(html: str, page, config, files) -> str:
    """Remove ``:role:`` before a code span on the API reference pages (mkdocs' page hook)."""
    if not page.file.src_uri.startswith("reference/api/"):
        return html
    return ROLE.sub("", html)
