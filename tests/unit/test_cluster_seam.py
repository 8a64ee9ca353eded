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


def test_the_engine_prewarms_through_the_factory_it_was_given() -> None:
    """The engine names no adapter: it asks its factory to start the target's helper process
    (the adapter's ``prewarm``); a factory without one - the in-memory clusters - is left be."""
    from drkit.config.model import ClusterConfig
    from drkit.kafka.clients import ClusterEndpoint
    from drkit.kafka.ports import prewarm
    from tests.fake_kafka import FakeClusters

    warmed: list[str] = []

    class Warming:
        @staticmethod
        def prewarm(endpoint: ClusterEndpoint) -> None:
            warmed.append(endpoint.alias)

    endpoint = ClusterEndpoint("dc2", ClusterConfig(bootstrap_servers="127.0.0.1:1"))
    prewarm(Warming, endpoint)  # type: ignore[arg-type]
    assert warmed == ["dc2"]
    prewarm(FakeClusters("dc1", "dc2").connect, endpoint)  # nothing to start, nothing raised
    from drkit.kafka.admin import KafkaAdmin

    assert callable(KafkaAdmin.prewarm)  # the adapter's, which the engine reaches this way
