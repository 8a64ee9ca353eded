"""drkit's packages stand in layers, and no import runs upward - counting every import
statement (at the top, inside functions, under ``TYPE_CHECKING``), read from the source with
``ast`` as tests/unit/test_import_graph.py reads it.

A "part" is a package under drkit/ (``drkit.replication``) or a top-level module
(``drkit.translation``).  A part may import parts of its own layer or of lower ones; parts of
one layer importing each other round a loop are refused too (no circle between parts).
ARCHITECTURE.md shows this table; a new part must be placed in it before it can land.
"""

from __future__ import annotations

from tests.unit.test_import_graph import _circles, _graph, _modules

# Lowest first.  Why each part stands where it does is in ARCHITECTURE.md's layer table.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: value types and helpers that import nothing of drkit's
    ("drkit", "errors", "records", "timestamps", "json_codec", "private_files", "logs",
     "gc_pause", "process_wide", "signing", "acl"),
    ("clock", "failpoints", "listening", "config"),  # the typed config and process-wide seams
    ("topology",),  # a flow's names: policies, topic filters, transforms, internal topics
    # adapters, the store; ``client``: what applications import to follow the pointer
    ("kafka", "store", "schemas", "notifications", "tracing_export", "client"),
    ("access", "control", "lag", "tracing"),  # roles and ACLs, flow control, counting records
    ("replication", "local"),  # the data plane; local clusters
    # offsets across clusters; ``repoint``: where a remaining standby follows the promoted from
    ("translation", "adoption", "offsets", "repoint"),
    ("accounting", "replication_service"),  # record proofs; the `drkit replicate` process
    ("failover",),
    ("health", "config_checks"),  # monitoring; the loader's checks the edges hand in
    ("automation", "drills"),
    ("status",),
    ("cli", "__main__"),
)  # fmt: skip


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "drkit"


def _layer_of() -> dict[str, int]:
    return {part: index for index, layer in enumerate(LAYERS) for part in layer}


def _part_edges(edges: dict[str, set[str]]) -> dict[str, set[tuple[str, str]]]:
    """Per pair of parts (``a->b``), the module imports that tie them."""
    ties: dict[str, set[tuple[str, str]]] = {}
    for source, targets in edges.items():
        for target in targets:
            if _part(source) != _part(target):
                ties.setdefault(f"{_part(source)}->{_part(target)}", set()).add((source, target))
    return ties


def upward_imports(edges: dict[str, set[str]], layer_of: dict[str, int]) -> list[str]:
    """Every import from a part to a part of a higher layer, as ``module -> module``."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in edges.items()
        for target in targets
        if layer_of[_part(target)] > layer_of[_part(source)]
    )


def part_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    graph: dict[str, set[str]] = {_part(module): set() for module in edges}
    for pair in _part_edges(edges):
        source, target = pair.split("->")
        graph[source].add(target)
    return _circles(graph)


def test_every_part_of_drkit_has_a_layer() -> None:
    parts = {_part(module) for module in _modules()}
    placed = set(_layer_of())
    assert parts - placed == set(), "place the new part in LAYERS (and ARCHITECTURE.md)"
    assert placed - parts == set(), "LAYERS names a part that no longer exists"
    assert len(placed) == sum(len(layer) for layer in LAYERS)  # no part in two layers


def test_no_import_runs_up_a_layer_lazy_ones_included() -> None:
    edges = _graph(_modules())
    assert sum(len(targets) for targets in edges.values()) > 500  # the graph was read
    assert upward_imports(edges, _layer_of()) == []


def test_no_two_parts_import_each_other_round_a_loop() -> None:
    assert part_circles(_graph(_modules())) == []


def test_the_checks_find_an_upward_import_and_a_loop_between_parts() -> None:
    """The checks themselves, on a made-up graph: a lazy import from the config loader up to
    the failover package is upward; two parts of one layer importing each other are a loop."""
    edges = {
        "drkit.config.loader": {"drkit.failover.model"},
        "drkit.failover.model": set(),
        "drkit.kafka.admin": {"drkit.store.db"},
        "drkit.store.db": {"drkit.kafka.ports"},
        "drkit.kafka.ports": set(),
    }
    assert upward_imports(edges, _layer_of()) == ["drkit.config.loader -> drkit.failover.model"]
    assert part_circles(edges) == [["kafka", "store"]]
