"""Honcho Memory Hub core: host-free, so it runs and is tested without Agent Zero.

Its packages stand as floors: each imports only from its own floor or below (docs/architecture.md).
"""

__version__ = "2.0.0"
