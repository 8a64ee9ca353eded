"""Python's cyclic garbage collector held off while a burst of acyclic objects is built.

A failover plan at 10,000 groups x 50 partitions builds millions of small objects (moves,
translations, checkpoint rows) that form no reference cycles; with the collector on, each
generation-2 pass walks the whole grown heap again - 30 % of the plan's time here
(bench/RESULTS.md, Failover).  Reference counting still frees everything as usual; only cycles
wait until the last pause ends, when the collector is switched back on.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """Hold off cyclic collection for the block.  Nests and may be entered by several threads
    at once: the collector is switched back on when the last block ends, and only if it was on
    when the first began."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
