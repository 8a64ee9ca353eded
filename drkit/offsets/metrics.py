"""Prometheus metrics of checkpointing and translation (labels: flow only).

Per-group detail (age, T, method) is not a label - group counts are unbounded - it is served
by ``drkit status`` / ``/api/status`` instead; here the distribution and the worst case.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from drkit.process_wide import ProcessWide


@dataclass(frozen=True)
class CheckpointMetrics:
    age: Histogram
    age_max: Gauge
    groups: Gauge
    written: Counter
    translations: Counter
    translations_kept: Counter
    untranslatable: Gauge
    rereads: Gauge
    unreplicated: Gauge
    active_skips: Gauge
    errors: Counter
    offset_sync_runs: Gauge
    offset_sync_trimmed: Counter
    commit_source: Gauge
    unverified: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> CheckpointMetrics:
        reg = registry if registry is not None else REGISTRY
        f = ("flow",)
        return cls(
            age=Histogram(
                "drkit_checkpoint_age_seconds",
                "Per group: time since its checkpoint was last verified current",
                f,
                buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900),
                registry=reg,
            ),
            age_max=Gauge(
                "drkit_checkpoint_age_max_seconds",
                "Oldest group checkpoint of the flow",
                f,
                registry=reg,
            ),
            groups=Gauge("drkit_checkpoint_groups", "Groups followed", f, registry=reg),
            written=Counter(
                "drkit_checkpoints_written", "Checkpoint records written", f, registry=reg
            ),
            translations=Counter(
                "drkit_checkpoint_translations",
                "Committed offsets translated by checkpoint rounds",
                f,
                registry=reg,
            ),
            translations_kept=Counter(
                "drkit_checkpoint_translations_kept",
                "Committed offsets whose previous answer a round kept: the group did not move "
                "and its partition's runs only grew after it",
                f,
                registry=reg,
            ),
            untranslatable=Gauge(
                "drkit_translation_untranslatable_partitions",
                "Committed partitions that cannot be translated",
                f,
                registry=reg,
            ),
            rereads=Gauge(
                "drkit_translation_expected_rereads",
                "Records groups would read again after failover (should be 0)",
                f,
                registry=reg,
            ),
            unreplicated=Gauge(
                "drkit_translation_unreplicated_records",
                "Records groups have not read that the target lacks (RPO)",
                f,
                registry=reg,
            ),
            active_skips=Gauge(
                "drkit_group_sync_active_groups_skipped",
                "Groups not synced because they are active on the target",
                f,
                registry=reg,
            ),
            errors=Counter("drkit_checkpoint_errors", "Failed checkpoint rounds", f, registry=reg),
            offset_sync_runs=Gauge(
                "drkit_offset_sync_runs",
                "Offset-sync runs held for translation (bounded by retention)",
                f,
                registry=reg,
            ),
            offset_sync_trimmed=Counter(
                "drkit_offset_sync_runs_trimmed",
                "Offset-sync runs tombstoned: no record left on either cluster",
                f,
                registry=reg,
            ),
            commit_source=Gauge(
                "drkit_checkpoint_commit_source",
                "1 for where the last round read the source's commits (admin_api: every "
                "group's offsets; offsets_topic: the commits logged since), 0 for the other",
                ("flow", "source"),
                registry=reg,
            ),
            unverified=Counter(
                "drkit_unverified_records",
                "Records of drkit's bookkeeping topics ignored because their drkit-mac did not "
                "verify (kind: offset_sync, control) - forged, or written before signing",
                ("flow", "kind"),
                registry=reg,
            ),
        )


# Looked up when first made (not bound at import), so a test can stand in for ``create``.
_DEFAULT: ProcessWide[CheckpointMetrics] = ProcessWide(lambda: CheckpointMetrics.create())


def default_metrics() -> CheckpointMetrics:
    """The process-wide metrics in the default registry (created once)."""
    return _DEFAULT.get()
