"""Moved to :mod:`drkit.topology.internal_topics` (issue 47): this alias stays only until its
last two importers, changed in parallel work, move too."""

from drkit.topology.internal_topics import control_topic, offset_syncs_topic

__all__ = ["control_topic", "offset_syncs_topic"]
