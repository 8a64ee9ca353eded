"""The Docker image's build, without Docker: the files the Dockerfile copies, and nothing else,
build a wheel that holds drkit, its migrations and its runbooks (hatchling's force-include stops
the build when one of them is missing - which is how the image failed to build)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _copied_by_dockerfile() -> list[str]:
    """The sources of the Dockerfile's COPY lines (each relative to the build context)."""
    sources: list[str] = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        match = re.match(r"COPY\s+(.+)\s+\S+$", line.strip())
        if match:
            sources += match.group(1).split()
    return sources


def test_the_files_the_dockerfile_copies_build_a_complete_wheel(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    for source in _copied_by_dockerfile():
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(origin, context / source)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path / "dist"), str(context)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("drkit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "drkit/cli/__init__.py" in names
    assert "drkit/_runbooks/failover.yaml" in names
    assert "drkit/_runbooks/drills/unplanned-loss-of-dc1.yaml" in names
    assert any(n.startswith("drkit/_migrations/versions/") for n in names)
    assert "drkit/templates/drill-report.html.j2" in names
