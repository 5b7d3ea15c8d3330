"""The core both sides build on: the log format (batches, manifests, snapshots, levels, epochs),
storage, names, the collapse rules, Delta log reading, settings and the master's state file.

Capture (:mod:`wlc`) and replay (:mod:`wlr`) import from here; nothing here imports either.

The package's version and the version of the batch format it writes and reads are here too:
``__version__`` is the one place the version is written (``pyproject.toml`` reads it from here,
``wlc.__version__`` and ``wlr.__version__`` are this). CHANGELOG.md lists each release with both
numbers (semantic versioning: a batch format change is a major version).
"""

from __future__ import annotations

__version__ = "0.2.0"
FORMAT_VERSION = 1  # the batch format: every manifest's ``format_version``, wlc.config's ``format``


def version_text(prog: str = "wlc") -> str:
    """What ``wlc --version`` and ``wlr --version`` print.

    Args:
        prog (str): the program's name.

    Returns:
        str: ``<prog> <version> (batch format <n>)``; ``n`` is :data:`FORMAT_VERSION`, the
        ``format_version`` of every batch manifest and the ``format`` key of a master's ``wlc.config``.
    """
    return f"{prog} {__version__} (batch format {FORMAT_VERSION})"
