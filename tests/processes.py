"""Child processes the tests start beside drkit (MirrorMaker 2, a Kafka Streams application)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def is_stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): state T in /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


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
