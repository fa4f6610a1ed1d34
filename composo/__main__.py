"""``python -m composo`` is the ``composo`` command."""

import sys

from composo.cli import main

if __name__ == "__main__":
    sys.exit(main())
