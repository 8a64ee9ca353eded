"""Starve a process of CPU on purpose: a Linux cgroup with a CPU quota (CFS bandwidth).

This is how a monitor is starved in production - a container at its CPU limit - and the
kernel counts the throttled time as the threads' run-queue wait, which is what drkit's monitor
measures.  Needs root and a writable cgroup CPU controller (v1 ``cpu`` or v2 ``cpu.max``);
otherwise the test skips (or fails with ``DRKIT_TEST_REQUIRE_CGROUP=1``, as in CI).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from tests.optional_tools import unavailable

_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")
_PERIOD_US = 100_000


def _unavailable(why: str) -> NoReturn:
    unavailable("CGROUP", why, "a process's CPU cannot be limited here")


def _new_group() -> tuple[Path, Path, str]:
    """(the new group, the group to move processes back to, the quota file format)."""
    if (_V1 / "cpu.cfs_quota_us").exists():
        return _V1 / f"drkit-test-{uuid.uuid4().hex[:8]}", _V1, "v1"
    controllers = _V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return _V2 / f"drkit-test-{uuid.uuid4().hex[:8]}", _V2, "v2"
    _unavailable("no cgroup CPU controller (cgroup v1 cpu or v2 cpu.max)")
    raise AssertionError("unreachable")


@contextmanager
def cpu_limited(pid: int, share: float) -> Iterator[None]:
    """Run ``pid`` (all its threads) with at most ``share`` of one CPU inside the block."""
    group, home, version = _new_group()
    quota = max(1000, int(_PERIOD_US * share))
    try:
        group.mkdir()
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (group / "cpu.max").write_text(f"{quota} {_PERIOD_US}")
        (group / "cgroup.procs").write_text(str(pid))
    except OSError as err:
        if group.exists():
            group.rmdir()
        _unavailable(f"{group}: {err}")
    try:
        yield
    finally:
        # Every process in the group goes back (children started inside the block too).
        for member in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # it exited meanwhile
                (home / "cgroup.procs").write_text(member)
        group.rmdir()
