"""`python -m honcho_hub`: the operator command line (see cli/main.py).

An adapter on the top floor, like the Agent Zero bridge: nothing in the core imports it.
"""

import sys

from .cli.main import main

sys.exit(main())
