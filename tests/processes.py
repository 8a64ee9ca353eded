"""Child processes the tests start beside drkit (MirrorMaker 2, a Kafka Streams application)."""

from __future__ import annotations

import subprocess


def stop_gracefully(process: subprocess.Popen[bytes] | None, grace_s: float) -> None:
    """SIGTERM ``process`` (it closes and commits), SIGKILL it after ``grace_s``; no-op when it
    was never started or has exited."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
