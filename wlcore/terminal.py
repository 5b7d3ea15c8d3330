"""What the command lines (``wlc``, ``wlr``) show on a terminal: the product's own lines.

:func:`setup` is called once by each command line's ``main``; Python programs and notebooks
that import wlc/wlr are not touched (their logging and warnings stay as they set them).

- Logging: the product's loggers (``wlc.*``, ``wlr.*``) at the command's level; every other
  logger (py4j's "Closing down clientserver connection" at INFO, ...) at WARNING.
- Python warnings print as one line, ``warning: <message>`` (not ``file:line: UserWarning``
  plus the source line ``sys.exit(main())``).
- Spark's start-up output (Ivy's dependency resolution, the JDK's notes) goes to a log file
  (:mod:`wlcore.jvm_output`).

``--verbose`` shows it all: every logger at INFO, Spark's start-up output on the terminal
(:func:`wlcore.jvm_output.show_everything`), warnings in Python's form.
"""

from __future__ import annotations

import logging
import sys
import warnings

from .jvm_output import show_everything

PRODUCT_LOGGERS = ("wlc", "wlr")


def setup(args, level: int = logging.WARNING, fmt: str = logging.BASIC_FORMAT) -> None:
    """Set up logging, warnings and Spark's start-up output for a command line run.

    Args:
        args (argparse.Namespace): the parsed command line; ``args.verbose`` (bool, from
            :func:`wlc.config.add_common`) shows everything.
        level (int): the lowest logging level shown of the product's loggers (``wlc.*``,
            ``wlr.*``), e.g. ``logging.INFO``; other loggers show WARNING and above.
        fmt (str): ``logging.Formatter`` format of the log lines on stderr.

    Logging is set up as ``logging.basicConfig`` does: not at all when the root logger
    already has handlers (a program that calls ``main`` keeps its own).
    """
    verbose = bool(getattr(args, "verbose", False))
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(fmt))
    if not verbose:
        handler.addFilter(_product_or_warning)
    logging.basicConfig(level=min(level, logging.INFO) if verbose else level, handlers=[handler])
    if verbose:
        show_everything()
    else:
        warnings.showwarning = show_warning


def _product_or_warning(record: logging.LogRecord) -> bool:
    """Records of the product's loggers, and WARNING and above of every other logger."""
    return record.levelno >= logging.WARNING or record.name.split(".", 1)[0] in PRODUCT_LOGGERS


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` of the command lines: ``warning: <message>`` on one line of
    stderr (or ``file``), without the source location and line.

    Args:
        message (Warning | str): the warning.
        category (type[Warning]): its class (not shown).
        filename (str): where it was raised (not shown).
        lineno (int): the line it was raised at (not shown).
        file (TextIO | None): where to write (None: stderr); a closed stream is ignored.
        line (str | None): the source line (not shown).
    """
    text = " ".join(str(message).split())
    try:
        print(f"warning: {text}", file=file or sys.stderr, flush=True)
    except OSError:  # stderr closed: as Python's own showwarning, say nothing
        pass
