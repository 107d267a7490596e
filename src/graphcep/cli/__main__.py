"""``python -m graphcep.cli``: the ``graphcep`` command, as ``python -m graphcep``."""

import sys

from graphcep.cli import main

if __name__ == "__main__":
    sys.exit(main())
