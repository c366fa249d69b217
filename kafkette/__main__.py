"""``python -m kafkette``: the same as the ``kafkette`` command."""

import sys

from kafkette.cli import main

sys.exit(main())
