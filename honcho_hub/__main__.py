"""`python -m honcho_hub`: the operator command line (see cli.py)."""

import sys

from .ops.cli import main

sys.exit(main())
