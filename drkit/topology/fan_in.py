"""Fan-in: the sources whose flows meet on one target (pure).

Two sources replicating into one aggregate cluster (``a -> agg``, ``b -> agg``) are two sets
of applications, not a primary and its standby: no flow carries ``a``'s data to ``b``.  A
cluster a source's data reaches through flows (directly or through another cluster) is one of
its standbys; a source of a flow into the same target that it never reaches is another
source's home - one a move of ``a``'s applications must leave alone.  drkit keeps one active
pointer per config, so such a move cannot (drkit.failover.plan blocks it, ``fan_in``): each
source of a fan-in runs under a config and state store of its own (docs/failover-safety.md,
"One writable primary").
"""

from __future__ import annotations

from collections.abc import Iterable

from drkit.config.model import FlowConfig


def reached_from(flows: Iterable[FlowConfig], source: str) -> frozenset[str]:
    """Every cluster ``source``'s data reaches through the flows (``source`` included)."""
    edges: dict[str, set[str]] = {}
    for flow in flows:
        edges.setdefault(flow.source, set()).add(flow.target)
    reached, frontier = {source}, [source]
    while frontier:
        for target in edges.get(frontier.pop(), ()):
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    return frozenset(reached)


def sources_left_behind(flows: Iterable[FlowConfig], source: str, target: str) -> tuple[str, ...]:
    """The other sources of flows into ``target`` that ``source``'s data never reaches: the
    homes of other applications, which a move from ``source`` to ``target`` must not take
    along.  Sorted; empty outside a fan-in."""
    listed = list(flows)
    reached = reached_from(listed, source)
    return tuple(
        sorted({f.source for f in listed if f.target == target and f.source not in reached})
    )
