"""Security review 6, L1: a hook's timeout holds even when something it started keeps its
output open - a child in its process group, or one that left it (``setsid``, ``daemon(3)``,
``ssh -f``): the engine waited for that descendant under the failover lease.

The contract (drkit.failover.hooks): a hook is its process. It has finished when that process
exits (its exit code counts); what it left behind gets a short grace to close the output, then
drkit stops reading and kills the hook's process group. A hook whose process is still running
at ``timeout_s`` has timed out: its group is killed and drkit stops reading soon after, whoever
still holds the output."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drkit.config import load_config_text
from drkit.failover.hooks import HookOutcome, run_hook

BASE = "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\nfailover:\n  hooks:\n"
# What a descendant holding the output lives: waited for, it would hold a hook this long.  The
# hooks below take their 1 s timeout and 1 s grace at most; HANG_GUARD_S only stops a hang
# early - a tenth of the slow path, 30 times the fast one (issue 51: no speed claimed here).
DESCENDANT_S = 600
HANG_GUARD_S = DESCENDANT_S / 10


@pytest.fixture
def escaped(tmp_path: Path) -> Iterator[Path]:
    """A file a hook writes the pid of a descendant that left its group into; killed after."""
    marker = tmp_path / "escaped.pid"
    yield marker
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(marker.read_text()), signal.SIGKILL)


def _run(script: str, timeout_s: float = 1) -> tuple[HookOutcome, float]:
    text = BASE + (
        f"    - {{when: before, command: [sh, -c, {json.dumps(script)}], timeout_s: {timeout_s}}}\n"
    )
    [hook] = load_config_text(text).failover.hooks
    started = time.monotonic()
    outcome = run_hook(hook, {"run": 1})
    return outcome, time.monotonic() - started


def _dead(pid: int) -> bool:
    for _ in range(50):
        try:  # gone, or a zombie waiting for whoever reaps orphans: dead either way
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def _running(pid: int) -> bool:
    """Whether ``pid`` runs now (not gone, not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_hook_that_leaves_a_child_holding_its_output_finishes_when_its_process_exits(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "child.pid"
    outcome, took = _run(f"sleep {DESCENDANT_S} & echo $! > {marker}; echo started")
    assert took < HANG_GUARD_S, took  # a hang guard: waited for, the child holds it 600 s
    assert outcome.ok and outcome.exit_code == 0 and not outcome.timed_out, outcome
    assert "started" in outcome.output
    assert _dead(int(marker.read_text())), "the child left holding the output survived"


def test_a_descendant_that_left_the_hooks_group_does_not_hold_the_engine(escaped: Path) -> None:
    outcome, took = _run(f"setsid sleep {DESCENDANT_S} & echo $! > {escaped}; echo started")
    # Not waited for: the descendant still runs now that the hook has returned (waiting for
    # its output to close would have meant waiting for it to end) - no clock needed.
    assert _running(int(escaped.read_text())), "the hook returned only once its descendant ended"
    assert took < HANG_GUARD_S, took  # a hang guard only
    assert outcome.exit_code == 0 and not outcome.timed_out, outcome
    assert "started" in outcome.output


def test_a_timed_out_hook_returns_at_its_timeout_though_a_descendant_holds_its_output(
    escaped: Path,
) -> None:
    outcome, took = _run(
        f"setsid sleep {DESCENDANT_S} & echo $! > {escaped}; echo started; sleep {DESCENDANT_S}"
    )
    assert _running(int(escaped.read_text())), "the hook returned only once its descendant ended"
    assert took < HANG_GUARD_S, took  # a hang guard only
    assert outcome.timed_out and not outcome.ok, outcome
    assert "started" in outcome.output


def test_a_hook_that_finishes_in_time_keeps_its_whole_output_and_exit_code() -> None:
    outcome, _took = _run("cat >/dev/null; i=0; while [ $i -lt 3000 ]; do echo line$i; "
                         "i=$((i+1)); done; exit 3", timeout_s=20)  # fmt: skip
    assert outcome.exit_code == 3 and not outcome.timed_out, outcome
    assert outcome.output.endswith("line2999\n")
