"""Fan-in: the sources whose flows meet on one target (pure).

Two sources replicating into one aggregate cluster (``a -> agg``, ``b -> agg``) are two sets
of applications, not a primary and its standby: no flow carries ``a``'s data to ``b``.  A
cluster a source's data reaches through flows (directly or through another cluster) is one of
its standbys, a cluster whose data reaches it is in its estate too (an old primary), and so
is a standby of the target (after the move it follows the target); a source of a flow into
the same target that is none of these is another source's home, one a move of ``a``'s
applications must leave alone.  drkit keeps one active pointer per config, so such a move
cannot (drkit.failover.plan blocks it, ``fan_in``): each source of a fan-in runs under a
config and state store of its own (docs/failover-safety.md, "One writable primary").
"""

from __future__ import annotations

from collections.abc import Iterable

from drkit.config.model import FlowConfig


def reached_from(
    flows: Iterable[FlowConfig], source: str, avoid: str | None = None
) -> frozenset[str]:
    """Every cluster ``source``'s data reaches through the flows (``source`` included), not
    going on through ``avoid`` (the aggregate: what it copies on is no longer one source's)."""
    edges: dict[str, set[str]] = {}
    for flow in flows:
        edges.setdefault(flow.source, set()).add(flow.target)
    reached, frontier = {source}, [source]
    while frontier:
        at = frontier.pop()
        for target in edges.get(at, ()) if at != avoid or at == source else ():
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    return frozenset(reached)


def sources_left_behind(flows: Iterable[FlowConfig], source: str, target: str) -> tuple[str, ...]:
    """The other sources of flows into ``target`` whose data and ``source``'s never reach one
    another but through ``target``, and that are no standby of ``target`` either: the homes of
    other applications, which a move from ``source`` to ``target`` must not take along.
    Sorted; empty outside a fan-in."""
    listed = list(flows)
    mine = reached_from(listed, source, target) | reached_from(listed, target)
    return tuple(
        sorted(
            {
                f.source
                for f in listed
                if f.target == target
                and f.source not in mine
                and source not in reached_from(listed, f.source, target)
            }
        )
    )


def other_standbys(flows: Iterable[FlowConfig], source: str, target: str) -> tuple[str, ...]:
    """The clusters ``source`` replicates to beside ``target`` (dc3 of dc1 -> dc2 and
    dc1 -> dc3): after a move from ``source`` to ``target`` they still copy ``source`` - until
    re-pointed (docs/three-dc.md).  Sorted; empty with one standby."""
    return tuple(sorted({f.target for f in flows if f.source == source} - {target}))
