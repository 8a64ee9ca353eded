"""Moved to :mod:`drkit.topology.flow` (issue 47): this alias stays only until its last two
importers, changed in parallel work, move too."""

from drkit.topology.flow import FlowTopology

__all__ = ["FlowTopology"]
