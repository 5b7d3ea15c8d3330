"""``python -m wlc``: the capture side's command line (:func:`wlc.cli.main`), as the ``wlc``
command; the process exits with the status it returns (see ``wlc --help``)."""

import sys

from .cli import main

sys.exit(main())
