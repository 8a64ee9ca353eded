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


def _pins() -> dict[str, str]:
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_every_dependency_is_pinned_in_the_constraints_and_the_pin_satisfies_pyproject() -> None:
    """Issue 46, item 8: the README's set-up, CI and the image install the versions CI ran
    (``-c constraints.txt``); a dependency added to pyproject.toml without a pin, or a pin its
    range excludes, fails here rather than on a newcomer's machine."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pins = _pins()
    for text in declared:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (text, pins[name])
    for file, command in (
        ("Makefile", "-c constraints.txt -e"),
        ("Dockerfile", "-c constraints.txt"),
    ):
        assert command in (ROOT / file).read_text(), file


def test_the_floors_exclude_releases_with_known_advisories() -> None:
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = {Requirement(text).name.lower(): Requirement(text) for text in project["dependencies"]}
    for name, vulnerable in (("jinja2", "3.1.5"), ("cryptography", "44.0.0"),
                             ("orjson", "3.9.14"), ("waitress", "3.0.0")):  # fmt: skip
        assert not floors[name].specifier.contains(vulnerable), (name, vulnerable)
