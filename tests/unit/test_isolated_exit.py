"""A process exits at once even while a group request waits in its admin helper.

Real helper process (drkit.kafka.isolated), real librdkafka client against a port nothing
listens on: the request would wait for its whole deadline; exit must not.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from drkit.errors import KafkaError
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.isolated import AdminHelper, _close_all, helper_for
from tests.replication_support import wait_until


def test_exit_kills_a_helper_in_the_middle_of_a_request_without_waiting_for_it() -> None:
    # The request's deadline: an exit that waited for the request would take this long.
    request_s = 600.0
    helper = helper_for(KafkaAdmin, ClusterEndpoint.plain("nowhere", "127.0.0.1:1"), request_s)
    helper.start()
    outcome: list[object] = []

    def request() -> None:
        try:
            outcome.append(helper.call("_direct_group_offsets", "g", timeout_s=request_s))
        except KafkaError as err:
            outcome.append(err)

    caller = threading.Thread(target=request, daemon=True)
    caller.start()
    wait_until(  # the request is in flight: the helper holds its lock (for its 600 s)
        lambda: helper._lock.locked(), 30, 0.05, what="the request in the helper"
    )
    assert caller.is_alive()
    started = time.monotonic()
    _close_all()
    # Not waited for: a hang guard at a tenth of the request's 600 s (issue 51: not a speed).
    assert time.monotonic() - started < request_s / 10

    # The request in flight ended with the helper (it may retry once in a fresh one: that one
    # is killed too, whenever it starts).
    def ended() -> bool:
        helper.kill()
        return not caller.is_alive()

    wait_until(ended, 60, 0.2, what="the request ended")
    assert outcome and isinstance(outcome[0], KafkaError)


# An owner that, like a stopping replicator, finishes its request after SIGTERM/SIGINT.
OWNER = textwrap.dedent(
    """
    import signal, sys, time
    from drkit.errors import KafkaError
    from drkit.kafka.admin import KafkaAdmin
    from drkit.kafka.clients import ClusterEndpoint
    from drkit.kafka.isolated import helper_for

    if __name__ == "__main__":
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: None)
        timeout_s = float(sys.argv[1])
        helper = helper_for(KafkaAdmin, ClusterEndpoint.plain("nowhere", "127.0.0.1:1"), timeout_s)
        helper.start()
        print("pid", helper._process.pid, flush=True)
        try:
            helper.call("_direct_group_offsets", "g", timeout_s=timeout_s)
        except KafkaError as err:
            print("error", type(err).__name__, flush=True)
        print("restarts", helper.restarts, "alive", helper._process.is_alive(), flush=True)
    """
)


def test_a_stop_signal_to_the_owners_process_group_leaves_its_helper_serving(
    tmp_path: Path,
) -> None:
    """``kill -TERM -<pgid>`` (a supervisor, a test harness, Ctrl-C's SIGINT from a terminal)
    must not kill the helper under the request in flight: the stopping owner would have to
    repeat it in a freshly spawned helper (CI: a replicator's final checkpoint round did, and
    its stop outlasted the 30 s it had)."""
    owner, _ = _owner_in_a_request(tmp_path, timeout_s=4.0)
    for signum in (signal.SIGTERM, signal.SIGINT):
        os.killpg(owner.pid, signum)
    output, _ = owner.communicate(timeout=60)
    # The request ended on its own deadline, answered by the helper it was sent to.
    assert "error RetriableKafkaError" in output or "error KafkaError" in output, output
    assert "restarts 0 alive True" in output, output


def test_a_helper_whose_owner_was_killed_exits_without_finishing_its_request(
    tmp_path: Path,
) -> None:
    """Its own process group keeps a helper out of its owner's killpg -9 too: it must notice
    it is orphaned and exit, not live on for its request's deadline (or forever, if hung)."""
    request_s = 600.0  # lived on for its request, the helper would run this long
    owner, helper_pid = _owner_in_a_request(tmp_path, timeout_s=request_s)
    os.killpg(owner.pid, signal.SIGKILL)
    owner.wait(10)
    # It exits within a second (it watches its owner); a tenth of the request's deadline is
    # only a hang guard (issue 51: not a speed).
    deadline = time.monotonic() + request_s / 10
    while time.monotonic() < deadline and _running(helper_pid):
        time.sleep(0.2)
    assert not _running(helper_pid), "the orphaned helper is still running"


def _owner_in_a_request(tmp_path: Path, timeout_s: float) -> tuple[subprocess.Popen[str], int]:
    script = tmp_path / "owner.py"
    script.write_text(OWNER)
    owner = subprocess.Popen(
        [sys.executable, str(script), str(timeout_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert owner.stdout is not None
    first = owner.stdout.readline()
    assert first.startswith("pid"), first + owner.stdout.read()
    time.sleep(1.0)  # the request is in flight
    return owner, int(first.split()[1])


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_request_is_not_queued_behind_bulk_work_in_another_helper_of_its_endpoint() -> None:
    """The monitor samples every group's offsets in a helper of its own: a probe's group
    request must be answered on its own deadline while that bulk work holds its helper (one
    helper serialises its requests; CI: the flow probe missed its budget behind it)."""
    endpoint = ClusterEndpoint.plain("nowhere-bulk", "127.0.0.1:1")
    bulk_s = 600.0  # the bulk request's deadline: a probe queued behind it waits this long
    bulk = KafkaAdmin(endpoint, bulk_s, helper="group-sampling")
    probe = KafkaAdmin(endpoint, 1.0)
    outcome: list[object] = []

    def sample() -> None:
        try:
            outcome.append(bulk.groups_offsets(["g1", "g2"]))
        except KafkaError as err:
            outcome.append(err)

    sampling = helper_for(KafkaAdmin, endpoint, bulk_s, "group-sampling")
    for helper in (sampling, helper_for(KafkaAdmin, endpoint, 1.0)):
        helper.start()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    wait_until(  # the bulk request is in flight: its helper holds its lock (for its 600 s)
        lambda: sampling._lock.locked(), 30, 0.05, what="the bulk request in its helper"
    )
    with contextlib.suppress(KafkaError):  # nothing listens: an error, on the probe's deadline
        probe.describe_groups(["g"])
    # Answered while the bulk request is still under way: queued behind it, the probe would
    # have come back only once the bulk request ended (issue 51: an order, not a clock).
    assert sampler.is_alive(), outcome

    def ended() -> bool:  # the bulk request ends with its helper (a retry's helper too)
        _close_all()
        return not sampler.is_alive()

    wait_until(ended, 60, 0.2, what="the bulk request ended")


def test_a_helper_lost_twice_in_a_row_is_not_started_again_at_once() -> None:
    """A request that aborts librdkafka every time (seen under load) must not respawn a Python
    process per call: after two losses in a row the next start waits (1 s, doubling)."""
    helper = helper_for(
        KafkaAdmin, ClusterEndpoint.plain("nowhere-loop", "127.0.0.1:1"), 20.0, "loop"
    )
    outcome: list[object] = []
    caller = threading.Thread(
        target=lambda: outcome.append(_call_catching(helper, timeout_s=20.0)), daemon=True
    )
    caller.start()
    killed: set[int] = set()
    deadline = time.monotonic() + 30.0
    while len(killed) < 2 and time.monotonic() < deadline:  # crash it under the request twice
        process = helper._process
        if process is not None and process.pid is not None and process.pid not in killed:
            time.sleep(1.0)  # the request is in flight
            process.kill()
            killed.add(process.pid)
        time.sleep(0.1)
    caller.join(30.0)
    assert len(killed) == 2 and outcome and isinstance(outcome[0], KafkaError), outcome
    assert helper.restarts == 2
    refused = _call_catching(helper, timeout_s=20.0)
    assert isinstance(refused, KafkaError) and "2 times in a row" in str(refused), refused
    assert helper._respawn_at - time.monotonic() <= 1.0  # the first pause: 1 s at most
    assert helper.restarts == 2 and not _alive(helper)  # refused without spawning one
    wait_until(  # the pause is over (its end, not a fixed sleep): it starts again
        lambda: time.monotonic() >= helper._respawn_at, 30, 0.05, what="the pause's end"
    )
    helper.start()
    assert _alive(helper)
    helper.kill()


def _alive(helper: AdminHelper) -> bool:
    return helper._process is not None and helper._process.is_alive()


def _call_catching(helper: AdminHelper, timeout_s: float) -> object:
    try:
        return helper.call("_direct_group_offsets", "g", timeout_s=timeout_s)
    except KafkaError as err:
        return err


# An owner that starts its first helper while its process group is being signalled (a
# replicator stopped the moment its checkpoint worker made its first group request).
STARTING_OWNER = textwrap.dedent(
    """
    import signal, sys
    from drkit.errors import KafkaError
    from drkit.kafka.admin import KafkaAdmin
    from drkit.kafka.clients import ClusterEndpoint
    from drkit.kafka.isolated import helper_for

    if __name__ == "__main__":
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: None)
        print("ready", flush=True)
        sys.stdin.readline()
        helper = helper_for(KafkaAdmin, ClusterEndpoint.plain("nowhere", "127.0.0.1:1"), 1.0)
        try:
            helper.call("_direct_group_offsets", "g", timeout_s=1.0)
            print("answered", flush=True)
        except KafkaError as err:
            print("error", type(err).__name__, err, flush=True)
        print("restarts", helper.restarts, flush=True)
    """
)


def test_signals_to_the_owners_group_while_its_first_helper_starts_lose_no_helper(
    tmp_path: Path,
) -> None:
    """The helpers' fork server starts with the owner's first helper, in the owner's process
    group: a SIGTERM to that group in that moment (CI: a replicator stopped just as its
    checkpoint worker began) must neither kill the server - the request then died with an
    EOFError traceback - nor the helper: the request gets its own answer, in the first helper."""
    script = tmp_path / "owner.py"
    script.write_text(STARTING_OWNER)
    owner = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert owner.stdin is not None and owner.stdout is not None
    assert owner.stdout.readline().startswith("ready")
    owner.stdin.write("go\n")
    owner.stdin.flush()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and owner.poll() is None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(owner.pid, signum)
        time.sleep(0.01)
    output, _ = owner.communicate(timeout=60)
    assert "error RetriableKafkaError" in output or "error KafkaError" in output, output
    assert "isolated helper" not in output, output  # the cluster's answer, not a lost helper
    assert "restarts 0" in output, output


def test_an_idle_helper_ends_itself_and_a_request_racing_its_end_is_answered_by_a_fresh_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A helper kept for every endpoint a process ever used would hold a client reconnecting
    to clusters long gone (a test session's, a drill's): one idle for ``idle_retire_s`` ends.
    A request sent just as it ends is not lost and not run twice: the retiring helper answers
    that it did not run it, and a fresh helper does - no helper counted lost, no warning."""
    helper = AdminHelper(
        KafkaAdmin, ClusterEndpoint.plain("nowhere", "127.0.0.1:1"), 5.0, "idle", 0.3
    )
    try:
        assert helper.call("_direct_delete_groups", [], timeout_s=5.0) == ()
        first = helper._process
        assert first is not None
        first.join(10.0)  # idle: it ends by itself
        assert first.exitcode == 0
        # Requests at random moments around the end of each fresh helper's idle time.
        rng = random.Random(7)
        for _ in range(20):
            time.sleep(rng.uniform(0.25, 0.35))
            assert helper.call("_direct_delete_groups", [], timeout_s=5.0) == ()
        assert helper.restarts == 0
        assert not [r for r in caplog.records if "helper lost" in r.getMessage()]
    finally:
        helper.close()
