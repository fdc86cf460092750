"""Honcho Memory Hub core: host-free, so it runs and is tested without Agent Zero."""

__version__ = "2.0.0-beta.2"
