"""Helper scripts behave on a fresh machine: quiet, correct output, from any directory."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.optional_tools import unavailable

REPO = Path(__file__).resolve().parents[2]


def test_ensure_postgres_is_quiet_from_a_directory_postgres_cannot_enter(tmp_path: Path) -> None:
    # A checkout under a private home: the postgres user may not enter the caller's cwd.
    if not shutil.which("pg_lsclusters") or (os.geteuid() != 0 and not shutil.which("sudo")):
        unavailable(
            "PG", "no PostgreSQL cluster tools", "apt install postgresql (and be root or sudo)"
        )
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    done = subprocess.run(
        [str(REPO / "scripts" / "ensure-postgres")],
        cwd=private,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "DRKIT_INSTALL_PG": "0"},
    )
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        pytest.skip("no PostgreSQL cluster on this machine")
    assert done.stdout.startswith("postgresql+psycopg://"), done.stdout
    assert done.stdout.count("\n") == 1
    # Starting a stopped server may say so on stderr; postgres refused entry never does.
    assert "could not change directory" not in done.stderr, done.stderr
    assert "Permission denied" not in done.stderr, done.stderr
