"""`python -m honcho_hub`: the operator command line (see cli/main.py)."""

import sys

from .cli.main import main

sys.exit(main())
