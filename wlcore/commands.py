"""What the command lines (``wlc``, ``wlr``) share: one function per subcommand, the one place
where the errors a subcommand raises become the line printed on stderr and the exit status, and
what they show on a terminal.

Each subcommand is a function ``cmd_<name>(args) -> int`` (``args``: the parsed
``argparse.Namespace``; returns the exit status) registered on its subparser by
:func:`subcommand`. A command line's ``main`` parses, applies ``--config``, sets up the terminal
and calls :func:`run`, which calls the subcommand and turns a :class:`~wlcore.errors.WlcError`
into ``error: <message>`` (the message with its fix as a command, ``error.cli``) and the exit
status its class maps to (the codes of :mod:`wlcore.health`, one per condition as the
monitoring-plugin habit has it). Any other exception is a bug and keeps its traceback.

Errors that stop a command before :func:`run` keep argparse's own handling: a malformed command
line prints argparse's usage and ``<prog>: error: ...`` and exits 2 (:data:`EXIT_USAGE`), and
a bad ``--config`` exits 2 from :func:`wlcore.settings.use_config`.

The terminal shows the product's own lines. :func:`setup_terminal` is called once by each
command line's ``main``; Python programs and notebooks that import wlc/wlr are not touched (their logging and warnings stay as they set them).

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

import argparse
import logging
import logging.handlers
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import NotFoundError, WlcError
from .health import EXIT_NOT_FOUND, EXIT_USAGE
from .session import LOG_BYTES, show_everything

Command = Callable[[argparse.Namespace], int]
"""A subcommand: takes the parsed command line, prints what it did, returns the exit status."""

ExitCodes = Sequence[tuple[type[BaseException], int]]
"""``(error class, exit status)`` pairs, the first class an error is an instance of wins;
an error of none of them exits with :data:`EXIT_USAGE` (bad input or a refused call)."""

NOT_FOUND: ExitCodes = ((NotFoundError, EXIT_NOT_FOUND),)
"""The mapping both command lines start from: a dbfarm, database or table named that does not
exist exits 3; every other refusal 2."""


def subcommand(sub, name: str, func: Command, codes: ExitCodes = (), **kwargs) -> argparse.ArgumentParser:
    """Add subcommand ``name`` run by ``func`` to a command line.

    Args:
        sub: the command line's subparsers (``ArgumentParser.add_subparsers()``).
        name (str): the subcommand's name, e.g. ``"status"``.
        func (Command): the function :func:`run` calls with the parsed arguments.
        codes (ExitCodes): this subcommand's own exit statuses, looked up before the command
            line's (e.g. ``wlr log`` of a database that is no master: 3, not found).
        **kwargs: ``help``, ``description``, ``epilog``, ... as ``add_parser`` takes them.

    Returns:
        the subcommand's parser, for its arguments.
    """
    parser = sub.add_parser(name, **kwargs)
    parser.set_defaults(func=func, exit_codes=tuple(codes))
    return parser


def exit_code(exc: BaseException, codes: ExitCodes = NOT_FOUND) -> int:
    """The exit status of a command stopped by ``exc``.

    Args:
        exc (BaseException): the error that stopped it.
        codes (ExitCodes): ``(exception class, status)`` pairs, most specific first.

    Returns:
        int: the status of the first class of ``codes`` that ``exc`` is an instance of, else
        :data:`EXIT_USAGE` (2).
    """
    for cls, code in codes:
        if isinstance(exc, cls):
            return code
    return EXIT_USAGE


def say(exc: WlcError, args: argparse.Namespace) -> str:
    """The message a command line prints for ``exc``: ``exc.cli``, its fix given as a command.

    Args:
        exc (WlcError): the error a subcommand raised.
        args (argparse.Namespace): the parsed command line (unused here; a command line's own
            wording function may fill the message in with its names).
    """
    return exc.cli


def run(
    args: argparse.Namespace, codes: ExitCodes = NOT_FOUND, wording: Callable[[WlcError, argparse.Namespace], str] = say
) -> int:
    """Run the subcommand ``args`` was parsed for (``args.func``, set by :func:`subcommand`).

    Args:
        args (argparse.Namespace): the parsed command line.
        codes (ExitCodes): the exit status of each error class (see :func:`exit_code`), after
            the subcommand's own (:func:`subcommand`).
        wording: the message printed for an error (default :func:`say`, ``error.cli``).

    Returns:
        the subcommand's exit status; for a :class:`~wlcore.errors.WlcError` it raised, after
        printing ``error: <message>`` on stderr, the status ``codes`` gives its class.
        Other exceptions propagate (a bug: its traceback is the report).
    """
    try:
        return args.func(args)
    except WlcError as exc:
        print(f"error: {wording(exc, args)}", file=sys.stderr)
        return exit_code(exc, (*getattr(args, "exit_codes", ()), *codes))


EXIT_PIPE = 128 + 13  # 128 + SIGPIPE: what a shell reports for a command whose reader went away
EXIT_INTERRUPTED = 128 + 2  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C


def guarded(body: Callable[[], int]) -> int:
    """Run a command line's ``body`` (parse, run, print) so that two ways the terminal ends it
    show no traceback.

    - Its output goes into a closed pipe (``wlr status ... | head -1``): Python's recipe
      (its ``signal`` module's notes on SIGPIPE): stdout is pointed at ``os.devnull`` (so the
      interpreter's last flush is quiet) and the exit status is :data:`EXIT_PIPE` (141).
    - Ctrl-C where the command has no stop of its own (a subcommand that stops at a safe point
      catches SIGINT itself and says where it stopped): ``interrupted`` on stderr, exit status
      :data:`EXIT_INTERRUPTED` (130).

    Args:
        body: the command line's work; returns its exit status.

    Returns:
        int: ``body``'s exit status, or 141, or 130.
    """
    try:
        code = body()
        sys.stdout.flush()  # here, not at the interpreter's exit, where a closed pipe prints a warning
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except KeyboardInterrupt:
        try:
            print("interrupted", file=sys.stderr, flush=True)
        except OSError:
            pass
        return EXIT_INTERRUPTED


def metrics_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--metrics-port PORT`` (Prometheus' ``/metrics``, :mod:`wlcore.metrics`) to a
    long-running subcommand.

    Args:
        parser (argparse.ArgumentParser): the subcommand's parser.
    """
    parser.add_argument(
        "--metrics-port",
        metavar="PORT",
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0: any free port, printed; "
        "off: none; default the metrics.port setting, off)",
    )


def say_metrics(port: int | None) -> None:
    """Print where metrics are served (nothing when they are off).

    Args:
        port (int | None): the port served (None: off).
    """
    if port is not None:
        from .settings import settings

        print(f"metrics at http://{settings().metrics.host}:{port}/metrics", flush=True)


def retention_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--retention LEVEL=DURATION`` (a shipped copy's or relay's own retention, stored with
    it; read by :func:`wlcore.retention.retention_args`) to a subcommand.

    Args:
        parser (argparse.ArgumentParser): the subcommand's parser.
        what (str): what the option does there, the start of its help ("store the relay's own
            retention first").
    """
    parser.add_argument(
        "--retention",
        action="append",
        metavar="LEVEL=DURATION",
        help=f"{what} (level0, level1, level2, snapshots; e.g. level0=1d; off: forever; master: as "
        "master.retention, the default); repeat or separate with commas",
    )


PRODUCT_LOGGERS = ("wlc", "wlr", "wlcore")
LOG_NAME = "commands.log"


def log_file() -> Path:
    """The command lines' log file: ``commands.log`` in :func:`wlcore.settings.cache_folder`
    (``~/.cache/wlc/commands.log`` on Linux; rolled over to ``commands.log.1`` beyond 2 MB)."""
    from .settings import cache_folder

    return cache_folder() / LOG_NAME


def setup_terminal(args, level: int = logging.WARNING, fmt: str | None = None) -> None:
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
