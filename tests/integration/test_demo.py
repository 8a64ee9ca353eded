"""``make demo`` runs ``drkit demo``: drkit's main job must work end to end on local clusters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.kafka_backends import ClusterUnderTest, backend, state_dir_for_tests

pytestmark = pytest.mark.spark


def test_demo_replicates_translates_exactly_and_proves_it_with_spark(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, tmp_path: Path
) -> None:
    # On the local backend the demo finds the session's dc1/dc2 running ('up' is a no-op);
    # elsewhere it starts its own pair in a scratch state dir and the test removes them.
    state_dir = state_dir_for_tests() if backend() == "local" else tmp_path / "state"
    command = [sys.executable, "-m", "drkit", "--state-dir", str(state_dir)]
    try:
        result = subprocess.run(
            [*command, "demo", "--records", "6000"],
            capture_output=True, text=True, timeout=280, check=False,
        )  # fmt: skip
    finally:
        if backend() != "local":
            subprocess.run([*command, "local", "down", "--purge"], check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    translated = [line.split() for line in lines if line.strip().endswith((" ok", "MISMATCH"))]
    assert len(translated) == 6 and all(row[-1] == "ok" and row[-2] == "0" for row in translated)
    proof = next(line for line in lines if "records checked" in line)
    assert "0 missing, 0 duplicated" in proof and "exact on 6 of 6 partitions" in proof
