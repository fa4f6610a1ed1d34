"""``python -m composo`` is the ``composo`` command."""

import sys

from composo.cli import main

sys.exit(main())
