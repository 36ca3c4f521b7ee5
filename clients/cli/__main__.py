"""``python -m clients.cli``: the ``rmq-query`` command line without the installed script."""

import sys

from clients.cli import main

sys.exit(main())
