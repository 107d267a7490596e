"""``python -m graphcep``: the ``graphcep`` command."""

import sys

from graphcep.cli import main

if __name__ == "__main__":
    sys.exit(main())
