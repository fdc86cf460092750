"""Honcho Memory Hub core: host-free, so it runs and is tested without Agent Zero.

Its packages stand as floors: each imports only from its own floor or below (docs/architecture.md).
"""

import time

__version__ = "2.0.0"
# When this module generation was imported (any module of the package imports this one first): code
# on disk changed after it is not what runs (ops/running_code.py).
LOADED_AT = time.time()
