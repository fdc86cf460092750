"""The process's heap: give memory the allocator holds free back to the system.

glibc's malloc keeps the pages of freed memory for reuse. In a long-lived Agent Zero process the
plugin's threads (each with an arena of its own) free a steady stream of small objects — requests,
answers, rows — and an hour's soak showed the free part growing while Python's own heap stayed
flat (issue 27). `malloc_trim(0)` hands every arena's free pages back; it costs a few milliseconds
and is safe at any time, so the delivery worker calls it after its ten-minute prune. Other C
libraries (musl, macOS) have no such call: nothing is tried there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def give_back_freed_memory() -> bool:
    """Give the allocator's free pages back to the system; False where the C library has no way
    to (then nothing was done). Never raises."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
