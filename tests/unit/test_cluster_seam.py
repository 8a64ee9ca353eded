"""One cluster-access seam (issue 47): below the edges, nothing builds the Kafka adapter.

Code reaches a cluster's admin API through an ``AdminFactory`` (drkit/kafka/ports.py) it is
given.  Only the adapter itself (drkit/kafka/) and the CLI commands (drkit/cli/), where each
command builds its factory and passes it in, construct ``KafkaAdmin``.  An AST scan: a
``KafkaAdmin(`` in a comment or a docstring is no construction."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Where constructing the adapter is allowed: the adapter, and the commands that build factories.
EDGES = ("drkit/kafka/", "drkit/cli/")

# The modules below the CLI that name the adapter at all - none constructs it - and why.
NAMED_BELOW = {
    # The `drkit replicate` process's start (also its spawned workers' main): an edge, it
    # passes the adapter to its flow workers and checkpoint workers as their factory.
    "drkit/replication_service.py": "the replication process's start",
    # `KafkaAdmin.prewarm`: starts the target's helper process for group requests while the
    # plan is read (drkit.kafka.isolated); it builds no admin.
    "drkit/failover/engine.py": "prewarm",
}


@functools.cache
def _modules() -> tuple[tuple[str, ast.Module], ...]:
    return tuple(
        (path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted((ROOT / "drkit").rglob("*.py"))
    )


def _names_adapter(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "KafkaAdmin") or (
        isinstance(node, ast.Attribute) and node.attr == "KafkaAdmin"
    )


def constructions() -> list[str]:
    """``path:line`` of every ``KafkaAdmin(...)`` call in drkit/."""
    return [
        f"{path}:{node.lineno}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _names_adapter(node.func)
    ]


def naming_modules() -> set[str]:
    """Every module of drkit/ that imports or uses the name ``KafkaAdmin``."""
    return {
        path
        for path, tree in _modules()
        for node in ast.walk(tree)
        if _names_adapter(node)
        or (
            isinstance(node, ast.ImportFrom)
            and any(alias.name == "KafkaAdmin" for alias in node.names)
        )
    }


def test_only_the_adapter_and_the_cli_construct_the_adapter() -> None:
    found = constructions()
    below = [site for site in found if not site.startswith(EDGES)]
    assert below == [], "construct KafkaAdmin at an edge and pass a factory (AdminFactory) in"
    # The scan sees constructions where they are: it is not finding nothing by mistake.
    assert any(site.startswith("drkit/cli/") for site in found)
    assert any(site.startswith("drkit/kafka/") for site in found)


def test_below_the_cli_only_the_places_named_here_name_the_adapter() -> None:
    below = {path for path in naming_modules() if not path.startswith(EDGES)}
    assert below == set(NAMED_BELOW), "take an AdminFactory (drkit/kafka/ports.py) instead"
