"""How many processes the integration tests get: what the cores left idle allow.

``python -m tests.workers`` samples the machine for a second before the integration tests
start (the unit tests' processes ended, the integration's not yet running) and prints the
count ``scripts/test`` passes to pytest-xdist, with the reason on stderr.  The integration
tests mostly wait on brokers and timeouts, so a process per idle core and a half keeps the
cores busy without crowding them: three on an idle two-core machine (70% busy on
2026-11-29), two with one core taken by something else, one with none left.
``DRKIT_TEST_INTEGRATION_WORKERS`` overrides it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

MOST = 3  # the suite's shared dc1/dc2 serve at most this many test processes well


def workers_for(idle_cores: float) -> int:
    """Processes for ``idle_cores`` cores left idle by the rest of the machine (pure)."""
    # The 0.25: an idle core as measured beside a busy one is a little less than a core (the
    # machine's own noise) - 0.97 of one rounded to a single process.
    return max(1, min(MOST, round(1.5 * idle_cores + 0.25)))


def idle_cores(sample_s: float = 1.0) -> float | None:
    """Cores idle over ``sample_s``, counting work at the lowest priorities (``nice``) as idle:
    it yields to the tests (None off Linux)."""
    before = _ticks()
    time.sleep(sample_s)
    after = _ticks()
    if before is None or after is None or after[1] <= before[1]:
        return None
    busy = (after[0] - before[0]) / (after[1] - before[1])
    return (os.cpu_count() or 1) * (1.0 - busy)


def _ticks() -> tuple[int, int] | None:
    """(busy at normal priority, total) jiffies since boot, from /proc/stat."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except OSError:
        return None
    user, _nice, system, _idle, _iowait, irq, softirq, steal = fields
    return user + system + irq + softirq + steal, sum(fields)


def main() -> None:
    idle = idle_cores()
    count = MOST if idle is None else workers_for(idle)
    seen = "unknown" if idle is None else f"{idle:.1f} of {os.cpu_count()} cores idle"
    print(f"integration tests: {count} processes ({seen})", file=sys.stderr)
    print(count)


if __name__ == "__main__":
    main()
