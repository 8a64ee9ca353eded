"""ARCHITECTURE.md and drkit's docstrings name only files that exist (issue 47).

A map that points at a moved or deleted module, or a docstring that cites a test file nobody
wrote, drifts silently.  Checked: every ``drkit/...`` or ``tests/...`` path naming a ``.py``
file or a directory (ending in ``/``), and every bare ``test_*.py`` (some file under tests/ has
that name).  Other paths - ``drkit/_runbooks`` exists in a wheel only - are not checked."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATH = re.compile(r"(?<![\w./:-])(?:drkit|tests)/[\w./-]*")
TEST_FILE = re.compile(r"(?<![\w./-])test_\w+\.py\b")


@functools.cache
def _test_file_names() -> frozenset[str]:
    return frozenset(p.name for p in (ROOT / "tests").rglob("test_*.py"))


def missing(text: str) -> list[str]:
    """The paths ``text`` names that do not exist."""
    paths = {m.rstrip(".") for m in PATH.findall(text)}
    gone = [p for p in paths if p.endswith((".py", "/")) and not (ROOT / p).exists()]
    names = set(TEST_FILE.findall(text))
    return sorted(gone + [name for name in names if name not in _test_file_names()])


def docstrings() -> dict[str, str]:
    """Every docstring in drkit/ (modules, classes, functions), by ``path:line``."""
    found = {}
    for path in sorted((ROOT / "drkit").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    found[f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}"] = doc
    return found


def test_architecture_md_names_only_paths_that_exist() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "drkit/kafka/" in PATH.findall(text)  # the scan reads the paths it should
    assert missing(text) == []


def test_drkit_docstrings_cite_only_paths_that_exist() -> None:
    found = {where: gone for where, doc in docstrings().items() if (gone := missing(doc))}
    assert found == {}


def test_a_missing_path_is_found() -> None:
    text = "see tests/unit/test_nowhere.py, drkit/nowhere/ and test_elsewhere.py; drkit/kafka/"
    assert missing(text) == ["drkit/nowhere/", "test_elsewhere.py", "tests/unit/test_nowhere.py"]
