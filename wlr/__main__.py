"""``python -m wlr``: the replay side's command line (:func:`wlr.cli.main`), as the ``wlr``
command; the process exits with the status it returns (see ``wlr --help``)."""

import sys

from .cli import main

sys.exit(main())
