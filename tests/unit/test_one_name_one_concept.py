"""One name, one concept: no class name is defined twice in drkit/ (issue 47). Two classes
called ``Finding`` or ``Lease`` in different packages meant a reader - and an import - could
take the one for the other; the second of each now says what it is (``DoctorFinding``,
``LeaseRow``, ``LocalClusterState``, ``UnreplicatedPartition``, ``CommittingConsumer``), and
the three copies of the frozen pydantic base are one (``drkit.config.model.FrozenModel``)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "drkit"


def test_no_class_name_is_defined_twice() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(ROOT.parent)))
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert twice == {}, twice
