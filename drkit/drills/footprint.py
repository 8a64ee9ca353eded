"""The exact topic and group names a drill may create, recorded before it touches a cluster.

A drill shares the operator's clusters, so what removes its leftovers must never take anything
else: not by a look-alike name, not from a directory that merely holds a ``drkit.yaml``.  When
a drill's directory is created its :class:`Footprint` is computed from its config (the flows'
replicas, bookkeeping topics and worker groups, as :class:`FlowTopology` names them) and its
workload, and written to :data:`MANIFEST` with the drill's id.  Removal - the drill's own at its
end, or ``drkit drill cleanup`` after a kill - deletes only names listed there, on the
clusters of the drill's config.  A directory without a valid manifest is not a drill.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drkit.config.model import DrkitConfig
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import HEARTBEATS, POINTER_TOPIC

MANIFEST = "drill-manifest.json"
KIND = "drkit.drill.manifest/v1"
_EARLIER_KIND = "drkit.drill-manifest/v1"  # written before names were all dot-separated; read


@dataclass(frozen=True)
class Footprint:
    """Names one drill may have created (on any cluster of its config), sorted."""

    drill: str
    topics: tuple[str, ...]
    groups: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": KIND, "drill": self.drill,
                "topics": list(self.topics), "groups": list(self.groups)}  # fmt: skip

    @classmethod
    def from_json(cls, document: object) -> Footprint:
        """Raises ValueError unless ``document`` is a manifest this drkit wrote."""
        if not isinstance(document, dict) or document.get("kind") not in (KIND, _EARLIER_KIND):
            raise ValueError(f"not a drill manifest (no kind {KIND!r})")
        drill = document.get("drill")
        topics, groups = document.get("topics"), document.get("groups")
        if not isinstance(drill, str) or not drill:
            raise ValueError("the manifest names no drill")
        for field, names in (("topics", topics), ("groups", groups)):
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise ValueError(f"the manifest's {field} are not a list of names")
        assert isinstance(topics, list) and isinstance(groups, list)
        return cls(drill, tuple(sorted(topics)), tuple(sorted(groups)))


def footprint(
    drill: str, config: DrkitConfig, topics: Iterable[str], groups: Iterable[str]
) -> Footprint:
    """Every name the drill of ``config`` (its own flows, forward and standby reverse) may
    create for a workload of ``topics`` and ``groups``: those names, their replicas through
    each flow (and replicas of replicas, as many hops as there are flows), each flow's
    heartbeats replica, bookkeeping topics and worker groups, and its own pointer topic.  The
    source clusters' ``heartbeats`` and the default pointer topic are the operator's too and
    never listed.  Pure."""
    flows = [FlowTopology.of(flow) for flow in config.flows]
    names = set(topics)
    for _hop in flows:
        names |= {flow.target_topic(name) for flow in flows
                  for name in (*names, HEARTBEATS) if flow.selects(name)}  # fmt: skip
    for flow in flows:
        names |= {flow.progress_topic, flow.offset_syncs_topic, flow.control_topic,
                  flow.adopted_topic, flow.checkpoints_topic}  # fmt: skip
    if config.failover.pointer_topic != POINTER_TOPIC:  # the drill's own, never the operator's
        names.add(config.failover.pointer_topic)
    names.discard(HEARTBEATS)
    owned_groups = set(groups) | {g for f in flows for g in (f.replicate_group, f.checkpoint_group)}
    return Footprint(drill, tuple(sorted(names)), tuple(sorted(owned_groups)))


def write_manifest(directory: Path, recorded: Footprint) -> None:
    """Write the manifest (whole or not at all: a temporary file renamed over it)."""
    part = directory / f"{MANIFEST}.part"
    part.write_text(json.dumps(recorded.to_json(), indent=1), encoding="utf-8")
    part.replace(directory / MANIFEST)


def read_manifest(directory: Path) -> Footprint:
    """The drill's recorded footprint; ValueError naming what is wrong when ``directory``
    holds none, an unreadable one, or one of another drill (its id is the directory's name)."""
    path = directory / MANIFEST
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(
            f"no {MANIFEST}: not a drill's directory (or one of a drkit older than its "
            "manifests, whose leftovers must be removed by hand)"
        ) from None
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} cannot be read: {err}") from None
    recorded = Footprint.from_json(document)
    if recorded.drill != directory.name:
        raise ValueError(f"{path} is drill {recorded.drill!r}'s, not {directory.name!r}'s")
    return recorded
