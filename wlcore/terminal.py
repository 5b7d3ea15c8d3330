"""What the command lines (``wlc``, ``wlr``) show on a terminal: the product's own lines.

:func:`setup` is called once by each command line's ``main``; Python programs and notebooks
that import wlc/wlr are not touched (their logging and warnings stay as they set them).

- Logging: warnings and errors on the terminal as one line each, ``warning: <message>`` or
  ``error: <message>`` (a traceback is not shown: the line names the log file holding it). The
  product's loggers (``wlc.*``, ``wlr.*``, ``wlcore.*``) at INFO and every logger's warnings go,
  with their tracebacks, to :func:`log_file` (``commands.log`` in the user's cache folder, made
  when the first line is written); other loggers' INFO (py4j's "Closing down clientserver
  connection", ...) go nowhere.
- Python warnings print as one line, ``warning: <message>`` (not ``file:line: UserWarning``
  plus the source line ``sys.exit(main())``).
- Spark's start-up output (Ivy's dependency resolution, the JDK's notes) goes to a log file
  (:func:`wlcore.session.quiet_start`).

``--verbose`` shows it all: every logger at INFO with tracebacks, Spark's start-up output on the terminal
(:func:`wlcore.session.show_everything`), warnings in Python's form.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import warnings
from pathlib import Path

from .session import LOG_BYTES, show_everything

PRODUCT_LOGGERS = ("wlc", "wlr", "wlcore")
LOG_NAME = "commands.log"


def log_file() -> Path:
    """The command lines' log file: ``commands.log`` in :func:`wlcore.settings.cache_folder`
    (``~/.cache/wlc/commands.log`` on Linux; rolled over to ``commands.log.1`` beyond 2 MB)."""
    from .settings import cache_folder

    return cache_folder() / LOG_NAME


def setup(args, level: int = logging.WARNING, fmt: str | None = None) -> None:
    """Set up logging, warnings and Spark's start-up output for a command line run.

    Args:
        args (argparse.Namespace): the parsed command line; ``args.verbose`` (bool, from
            :func:`wlc.config.add_common`) shows everything.
        level (int): the lowest logging level shown on the terminal (default WARNING; every
            logger shows INFO with ``--verbose``).
        fmt (str | None): ``logging.Formatter`` format of the log lines on stderr (None:
            ``<level>: <message>``, e.g. ``warning: ...``; with ``--verbose`` the instant and
            the logger's name come first).

    Logging is set up as ``logging.basicConfig`` does: not at all when the root logger
    already has handlers (a program that calls ``main`` keeps its own).
    """
    verbose = bool(getattr(args, "verbose", False))
    handler = logging.StreamHandler()
    if verbose:
        handler.setFormatter(logging.Formatter(fmt or "%(asctime)s %(name)s %(levelname)s %(message)s"))
    else:
        handler.setFormatter(OneLine(fmt))
        handler.setLevel(level)
        handler.addFilter(_product_or_warning)
    handlers: list[logging.Handler] = [handler]
    written = _file_handler()
    if written is not None:
        handlers.append(written)
    logging.basicConfig(level=logging.INFO, handlers=handlers)
    if verbose:
        show_everything()
    else:
        warnings.showwarning = show_warning


def _file_handler() -> logging.Handler | None:
    """The handler writing to :func:`log_file` (made when the first line is written); None when
    its folder cannot be made (a read-only home: the terminal's lines are all there is)."""
    path = log_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    written = logging.handlers.RotatingFileHandler(
        path, maxBytes=LOG_BYTES, backupCount=1, encoding="utf-8", delay=True
    )
    written.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    written.addFilter(_product_or_warning)
    return written


class OneLine(logging.Formatter):
    """A log record as one line on the terminal: ``<level>: <message>`` (``warning: ...``,
    ``error: ...``), its traceback left to the log file (the line ends naming it).

    Args:
        fmt (str | None): the format (None: ``%(levelname)s: %(message)s``, the level in
            lower case).
    """

    def __init__(self, fmt: str | None = None):
        super().__init__(fmt or "%(levelname)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (see the class).

        Args:
            record (logging.LogRecord): the record.

        Returns:
            str: the line, without a line break.
        """
        plain = logging.makeLogRecord(record.__dict__)
        plain.levelname = record.levelname.lower()
        plain.exc_info, plain.exc_text, plain.stack_info = None, None, None
        text = " ".join(super().format(plain).split("\n"))
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            cause = " ".join(str(exc).split()) or type(exc).__name__
            text += f": {cause} (traceback in {log_file()}; --verbose shows it)"
        return text


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
