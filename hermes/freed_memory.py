"""Giving memory that was freed back to the system (glibc's ``malloc_trim``).

glibc's malloc keeps what the process frees (Python's large objects, onnxruntime's and the
tokenizers' buffers, SQLite's) in its arenas for reuse, much of it fragmented so that it is never
returned by itself: after one 64,000-character turn the daemon's resident memory stayed 15-55 MiB
above its idle, and the next long message's work came on top of that (issue 30: at most 64 MiB
above idle). ``malloc_trim(0)`` a moment after the turn brought it back to within 2 MiB of idle
(in-process measurement). Elsewhere (macOS, musl) there is no such call and nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Return the free pages of malloc's arenas to the system; True if any were. It walks
    every arena, each locked in turn (about a millisecond): call it off the event loop, after
    a large piece of work, not on every request."""
    trim = _malloc_trim()
    if trim is None:
        return False
    return bool(trim(0))
