"""A long-running drkit process stops within a deadline, and shows where it waited.

Real processes and real signals: a stop that hangs (here: a thread that never looks at the stop
event, holding the process open) must end at the deadline with every thread's stack in the log,
and SIGUSR1 must print the stacks of a process that goes on running.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

HUNG_STOP = textwrap.dedent(
    """
    import threading, time
    from drkit import logs
    from drkit.replication.service import install_stop_signals

    logs.configure()
    stop = threading.Event()
    install_stop_signals(stop, grace_s=1.5)

    def waits_on_something_that_never_answers():
        while True:
            time.sleep(0.1)

    worker = threading.Thread(target=waits_on_something_that_never_answers)
    worker.start()
    print("ready", flush=True)
    worker.join()
    """
)

GOES_ON = textwrap.dedent(
    """
    import time
    from drkit import logs

    logs.dump_stacks_on_sigusr1()

    def busy_with_a_long_request():
        time.sleep(30)

    print("ready", flush=True)
    busy_with_a_long_request()
    """
)


def _started(source: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", source], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def test_a_stop_that_hangs_ends_at_the_deadline_with_every_threads_stack() -> None:
    process = _started(HUNG_STOP)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    took = time.monotonic() - sent
    assert process.returncode == 1
    assert 1.4 <= took < 20, took
    assert "stopping on SIGTERM (forced after 2s)" in stderr
    assert "waits_on_something_that_never_answers" in stderr  # where it waited


def test_a_stop_that_completes_in_time_is_not_forced() -> None:
    source = HUNG_STOP.replace("while True:", "while not stop.is_set():")
    process = _started(source)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "waits_on_something_that_never_answers" not in stderr


def test_sigusr1_prints_the_stacks_and_the_process_goes_on() -> None:
    process = _started(GOES_ON)
    try:
        time.sleep(0.3)
        process.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        assert process.poll() is None  # still running
    finally:
        process.kill()
        _, stderr = process.communicate(timeout=30)
    assert "busy_with_a_long_request" in stderr
