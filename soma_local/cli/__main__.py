"""``python -m soma_local.cli``: the same entry point as the ``soma`` command."""

import sys

from soma_local.cli.main import main

sys.exit(main())
