"""What a recorded health transition is about (stored as ``health_transitions.subject_kind``)."""

from __future__ import annotations

from enum import StrEnum


class SubjectKind(StrEnum):
    CLUSTER = "cluster"  # one observer's state of a cluster (subject: the cluster alias)
    QUORUM = "quorum"  # the state the observers agree on (subject: the cluster alias)
    GROUP = "group"  # a consumer group's lag status (subject: "<source>/<group>")
