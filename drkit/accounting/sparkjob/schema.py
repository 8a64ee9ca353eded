"""The job's input (the spec) and output (the ``drkit.verify/v2`` summary) as typed JSON.

Plain TypedDicts: the spec is written by ``drkit verify`` (drkit/accounting/spec.py) and read
by the job, possibly under spark-submit on another machine; the summary is written by the job
and read by ``drkit verify`` and ``--import-summary``.  Fields are only ever added.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

SCHEMA = "drkit.verify/v2"
# v1 wrote ``checked_at`` as epoch seconds; v2 as ISO-8601 UTC.  ``--import-summary`` reads both.
SCHEMAS = (SCHEMA, "drkit.verify/v1")


# -- spec ---------------------------------------------------------------------------------


class PartitionSpec(TypedDict):
    """One source partition: the checked range ``[source_start, source_end)`` (log start to
    last stable offset) and every partition of its replica topic (``"topic:partition"`` ->
    ``[start, end)``)."""

    source_topic: str
    partition: int
    source_start: int
    source_end: int
    target_topic: str
    target_ranges: dict[str, list[int]]


class GroupSpec(TypedDict):
    """One group on one partition: committed source offset S and target position T."""

    group: str
    source_topic: str
    partition: int
    target_topic: str
    source_offset: int
    target_offset: int
    target_kind: str  # "target-commit" or drkit's translation method


class LostRange(TypedDict):
    from_offset: int
    to_offset: int
    records: int


class LostPartition(TypedDict):
    """Records of one source partition lost before replication (drkit/accounting/losses.py)."""

    src_topic: str
    src_partition: int
    records: int
    recorded: int  # covered by the flow's loss events
    unrecorded: int  # found by verify alone: stored progress below the source log start
    reasons: list[str]  # "truncated", "recreated", "unrecorded"
    ranges: list[LostRange]


class Spec(TypedDict):
    flow: str
    source_alias: str
    source_cluster_id: str
    target_cluster_id: str
    offset_syncs_topic: str
    checkpoints_topic: str
    source_options: dict[str, str]
    target_options: dict[str, str]
    partitions: list[PartitionSpec]
    groups: list[GroupSpec]
    filters: list[dict[str, Any]]
    notes: list[str]
    lost_before_replication: list[LostPartition]
    # Secrets the options name as ${NAME} placeholders (name -> what it is), filled from the
    # job's environment (sparkjob/secrets.py); absent or empty: the options hold them inline.
    secret_env: NotRequired[dict[str, str]]


# -- summary ------------------------------------------------------------------------------


class Totals(TypedDict):
    records: int
    replicated_once: int
    duplicated_records: int
    extra_copies: int
    missing: int
    filtered: int
    unreplicated_tail: int
    order_violations: int
    unmapped_replicas: int
    mismatched_replicas: int
    skipped_by_groups: int
    read_again_by_groups: int
    lost_before_replication: int


class PartitionRow(TypedDict):
    src_topic: str
    src_partition: int
    records: int
    replicated_once: int
    duplicated_records: int
    extra_copies: int
    missing: int
    filtered: int
    unreplicated_tail: int
    order_violations: int
    unmapped_replicas: int
    mismatched_replicas: int
    first_offset: int
    last_offset: int
    last_replicated: int | None


class GroupRow(TypedDict):
    group: str
    src_topic: str
    src_partition: int
    s: int
    t: int
    t_kind: str
    skipped: int
    read_again: int
    exact: bool


class MissingRange(TypedDict):
    src_topic: str
    src_partition: int
    from_offset: int
    to_offset: int
    records: int


class Unmapped(TypedDict):
    """Replicas of one source partition in one target partition that no offset-sync run
    describes (failover translation cannot see them)."""

    src_topic: str
    src_partition: int
    dst_topic: str
    dst_partition: int
    replicas: int
    first_src_offset: int
    last_src_offset: int


class Summary(TypedDict):
    schema: str
    flow: str
    checked_at: str  # ISO-8601 UTC (v1: epoch seconds)
    elapsed_s: float
    ok: bool
    totals: Totals
    partitions: list[PartitionRow]
    groups: list[GroupRow]
    missing_ranges: list[MissingRange]
    lost_before_replication: list[LostPartition]
    unmapped: list[Unmapped]
    notes: list[str]
    output: str
    # How the tables were accounted: "copy-runs" (a healthy flow, from its copy runs) or
    # "per-record" (record by record); absent from summaries of earlier versions.
    method: NotRequired[str]
