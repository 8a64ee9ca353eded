"""What a running drill knows: its options, environment, workload, timeline and runs - and the
small helpers every part of it uses (endpoints under the drill's aliases, replica names,
progress, bounded waits).

:class:`RunningDrill` is what drills.runner drives and what drills.observe and drills.outcome
read once the move is over; it sits below all three, so the readers of a drill's end never
import the runner that calls them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from drkit.config.model import DrkitConfig, Role
from drkit.drills.environment import DrillEnvironment
from drkit.drills.report import RepointedStandby, StandbyChosen
from drkit.drills.sampler import Sampler
from drkit.drills.scenario import Scenario
from drkit.drills.timeline import Timeline
from drkit.drills.workload import GroupMember, Writer
from drkit.errors import DrillFailed
from drkit.failover.context import ProgressCallback
from drkit.failover.runs import RunRecord
from drkit.kafka import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.local import LocalKafka
from drkit.records import Record
from drkit.topology.flow import FlowTopology


@dataclass
class DrillOptions:
    base_config: DrkitConfig  # where the clusters are
    base_clusters: dict[str, Any]  # their raw config sections (copied into the drill config)
    drills_root: Path
    local: LocalKafka
    connect: AdminFactory  # how the drill reaches its clusters (drkit.kafka.ports)
    verify: bool = True
    progress: ProgressCallback = field(default=lambda _m, _f: None)
    spark_master: str | None = None


class RunningDrill:
    """One drill's state as it runs (its own directory, config and store: ``env``)."""

    def __init__(self, scenario: Scenario, options: DrillOptions) -> None:
        self.scenario, self.options = scenario, options
        self.timeline = Timeline()
        self.env = DrillEnvironment.create(scenario, options.base_clusters, options.drills_root)
        self.writers: list[Writer] = []
        self.source_members: list[GroupMember] = []
        self.target_members: list[GroupMember] = []
        self.notes: list[str] = []
        self.fault_how = ""
        self.run_record: RunRecord | None = None
        self.failback_record: RunRecord | None = None
        # Both clusters read back once the source returned and was fenced, before the failback:
        # the failover's loss and the groups' positions are recounted from it (the failback
        # replicates the divergent tail to the target afterwards, as it should).
        self.failover_records: tuple[list[Record], list[Record]] | None = None
        self.resumed: dict[str, float] = {}
        # With other standbys: the choice among them, and each re-pointed after the move.
        self.standby_choice: StandbyChosen | None = None
        self.repointed: tuple[RepointedStandby, ...] = ()
        self.sampler: Sampler | None = None
        self._last_said = ""

    def admin(self, cluster: str) -> ClusterAdmin:
        """An admin of ``cluster`` (the scenario's name), as the drill itself."""
        return self.options.connect(self.endpoint(cluster))

    def endpoint(self, cluster: str, role: Role | None = None) -> ClusterEndpoint:
        """A client endpoint of ``cluster`` (the scenario's name) under the drill's alias,
        connecting as ``role`` does (``role_security``; None: as the drill itself)."""
        alias = self.env.alias(cluster)
        config = self.env.config if role is None else self.env.config.as_role(role)
        return ClusterEndpoint(alias, config.clusters[alias])

    @property
    def src(self) -> str:
        """The source's alias in the drill's config, flows and store."""
        return self.env.alias(self.scenario.source)

    @property
    def dst(self) -> str:
        return self.env.alias(self.scenario.target)

    @cached_property
    def topology(self) -> FlowTopology:
        """The drill's one flow (its config never changes during the drill)."""
        return FlowTopology.of(self.env.flow)

    def replica(self, name: str) -> str:
        return self.topology.target_topic(self.env.topic(name))

    def say(self, message: str, fraction: float | None = None) -> None:
        """Progress: a bar for timed waits, one line per open-ended wait."""
        if fraction is None and message == self._last_said:
            return
        self._last_said = message
        self.options.progress(message, fraction)

    def wait(self, seconds: float, what: str) -> None:
        """Sleep ``seconds`` showing progress."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.say(what, 1 - left / seconds if seconds else 1.0)
            time.sleep(min(0.5, left))
        self.say(what, 1.0)

    def until(self, check: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline:
                raise DrillFailed(f"{what}: not within {timeout_s:.0f}s")
            self.say(what, None)
            time.sleep(0.5)
