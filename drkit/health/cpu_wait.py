"""Was this process starved of CPU?  Linux's run-queue wait, per thread.

A probe that overruns its budget says "the cluster did not answer in time" only if the monitor
itself could run: a monitor held at its container's CPU limit, or on an overloaded host, waits
for a CPU while the cluster answers at once.  The kernel counts, per thread, the time it was
ready to run and waited for a CPU (``/proc/<pid>/task/<tid>/schedstat``, second field, in
nanoseconds; CFS bandwidth throttling - a CPU limit - counts there too).  A thread blocked on
the network, the GIL or a lock is not ready to run and adds nothing, so a cluster that hangs
does not look like starvation.

Where the kernel does not say (not Linux, no schedstat), :func:`run_queue_waits` returns None
and every overrun counts as the cluster's.

Cost: one small file read per thread, ~1.2 ms for 51 threads here; the monitor takes one at the
start of each cluster probe (and one more when it overruns), not for its other jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

_TASKS = Path("/proc/self/task")

# An overrun is the monitor's own when one of its threads waited for a CPU for at least this
# share of the time the job ran: a healthy loaded host gives waits of a few percent; a process
# at its CPU limit waits most of the time.
STARVED_SHARE = 0.25


def run_queue_waits() -> dict[int, int] | None:
    """Nanoseconds each thread of this process has waited for a CPU so far; None: unknown."""
    try:
        tasks = list(_TASKS.iterdir())
    except OSError:
        return None
    waits: dict[int, int] = {}
    for task in tasks:
        try:
            waits[int(task.name)] = int((task / "schedstat").read_bytes().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile (or the field is missing)
    return waits or None


def longest_wait_s(before: Mapping[int, int], after: Mapping[int, int]) -> float:
    """The longest any one thread waited for a CPU between two :func:`run_queue_waits`.

    A thread started in between counts from zero; one that ended is not seen.  The longest
    single wait, not the sum: threads wait side by side, and one job's critical path runs
    through one thread at a time."""
    return max((waited - before.get(tid, 0) for tid, waited in after.items()), default=0) / 1e9


def starved(waited_s: float | None, elapsed_s: float) -> bool:
    """Did the process wait for a CPU for a decisive share of ``elapsed_s``?"""
    return waited_s is not None and elapsed_s > 0 and waited_s >= STARVED_SHARE * elapsed_s
