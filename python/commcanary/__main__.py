"""``python -m commcanary``: the same entry point as the console script."""

import sys

from commcanary.cli import main

sys.exit(main())
