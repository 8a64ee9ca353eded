"""A flow probe is its checks, each owning its fields; a new check and its field reach the
observation's stored form, the monitor's gauges, the status document, readiness, the page and
``drkit status`` through the declarations alone (drkit.health.flow_checks, observations)."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from drkit.cli.monitor_cmd import _lines
from drkit.config import load_config_text
from drkit.config.model import DrkitConfig
from drkit.health.flow_checks import (
    FLOW_CHECKS,
    FlowCheck,
    LagCheck,
    Round,
    WorkersCheck,
)
from drkit.health.metrics import MonitorMetrics
from drkit.health.monitor import Monitor
from drkit.health.observations import (
    Bound,
    Cell,
    FlowGauge,
    FlowObservation,
    Shown,
    measure,
    measures,
)
from drkit.health.probes import FlowProber
from drkit.kafka.clients import ClusterEndpoint
from drkit.status import current_status
from drkit.status.web import render_page
from drkit.store import StateStore
from drkit.topology.flow import FlowTopology
from tests.fake_kafka import FakeCluster, FakeClusters

CONFIG = (
    "clusters: {dc1: {bootstrap_servers: 'a:1'}, dc2: {bootstrap_servers: 'b:1'}}\n"
    "flows: [{source: dc1, target: dc2}]\n"
)
# Filled beside the checks: the prober's errors, the monitor's group sampling (Burrow status).
NOT_A_CHECK_S = {"errors", "group_lag"}


def test_every_field_of_an_observation_is_one_check_s_or_named_beside_them() -> None:
    owned = [name for check in FLOW_CHECKS for name in check.owns]
    assert len(owned) == len(set(owned)), owned
    assert set(owned) | NOT_A_CHECK_S == {name for name, _known in measures()}
    assert not set(owned) & NOT_A_CHECK_S
    # The target's reads first: a target that fails leaves errors only, as a source that fails
    # leaves the target's fields; the drift, which answers for itself, last.
    assert [check.reads for check in FLOW_CHECKS] == [*["target"] * 3, *["source"] * 2, None]


class At(FakeCluster):
    """A fake cluster whose endpoint is a real address: the prober's TCP check reaches it."""

    def __init__(self, alias: str, port: int) -> None:
        super().__init__(alias)
        self.port = port

    @property
    def endpoint(self) -> ClusterEndpoint:
        return ClusterEndpoint.plain(self.alias, f"127.0.0.1:{self.port}")


@contextmanager
def _listening() -> Iterator[int]:
    with closing(socket.create_server(("127.0.0.1", 0))) as server:
        yield server.getsockname()[1]


def _prober(
    config: DrkitConfig,
    clusters: FakeClusters,
    checks: tuple[type[FlowCheck], ...],
    observed: type[FlowObservation] = FlowObservation,
) -> FlowProber:
    flow = config.flows[0]
    return FlowProber(
        FlowTopology.of(flow),
        config.clusters[flow.source],
        config.clusters[flow.target],
        config.health,
        clusters.connect,
        checks,
        observed,
    )


class _Read(FlowCheck):
    """A check reading one cluster (a call to the fake), measuring a constant."""

    reads: ClassVar[str | None] = "target"
    value: tuple[tuple[str, Any], ...] = ()  # what it measures
    call = "list_topics"
    seen = 0

    def observe(self, probe: Round) -> dict[str, Any]:
        type(self).seen += 1
        admin = self.flow.target if self.reads == "target" else self.flow.source
        admin.describe_groups(["g"]) if self.call == "describe_groups" else admin.list_topics()
        return dict(self.value)


class Beat(_Read):
    owns = ("heartbeat_age_s",)
    value = (("heartbeat_age_s", 1.5),)


class Points(_Read):
    owns = ("checkpoint_age_s",)
    value = (("checkpoint_age_s", 2.0),)
    call = "describe_groups"


class Drift(_Read):
    owns = ("drift", "drift_total")
    reads = None
    value = (("drift", ()), ("drift_total", 0))


def test_a_cluster_that_fails_a_check_leaves_the_fields_of_those_that_answered() -> None:
    """As one long probe did: the target's reads all answer or none of its fields is kept;
    the source failing keeps the target's; a target refusing TCP ends the probe at once."""
    config = load_config_text(CONFIG, env={})
    checks = (Beat, Points, LagCheck, WorkersCheck, Drift)
    with _listening() as port:
        clusters = FakeClusters("dc1", "dc2", make=lambda alias: At(alias, port))
        source, target = clusters["dc1"], clusters["dc2"]
        source.add_topic("orders", 1)
        source.append("orders", 0, 4)
        source.activate(FlowTopology.of(config.flows[0]).replicate_group, members=2)
        prober = _prober(config, clusters, checks)
        seen = prober.probe()
        assert (seen.heartbeat_age_s, seen.checkpoint_age_s, seen.workers) == (1.5, 2.0, 2)
        assert (seen.lag_records, seen.lag_by_topic, seen.drift, seen.errors) == (
            4, {"orders": 4}, (), ()
        )  # fmt: skip
        source.go_down()
        seen = prober.probe()
        assert (seen.heartbeat_age_s, seen.checkpoint_age_s) == (1.5, 2.0)
        assert (seen.lag_records, seen.workers, seen.drift) == (None, None, None)
        assert seen.errors == ("source: dc1: list_topics: timed out (cluster down)",)
        source.come_back()
        target.before_next("describe_groups", target.go_down)  # the second target read
        seen = prober.probe()
        assert seen == FlowObservation(
            seen.flow, seen.at, errors=("target: dc2: describe_groups: timed out (cluster down)",)
        )
        target.come_back()
        Drift.seen = 0
    seen = prober.probe()  # nothing listens there now: no check is asked
    assert seen.errors[0].startswith("target: no bootstrap server accepts connections")
    assert seen.heartbeat_age_s is None and Drift.seen == 0


# -- a new probe, added the way ARCHITECTURE.md says: its field, declared once, and its check --


def _missing_cell(stored: Mapping[str, Any]) -> Cell:
    value = stored.get("missing_replicas")
    return Cell("-" if value is None else str(value), state="DEGRADED" if value else None)


@dataclass(frozen=True)
class WithReplicas(FlowObservation):
    """FlowObservation and one more field - in drkit it would be declared in FlowObservation."""

    # Judged with the records bound only to show readiness reading a field's bound.
    missing_replicas: int | None = measure(
        gauge=FlowGauge("drkit_flow_missing_replicas", "Selected topics with no replica"),
        bound=Bound("failover.max_rpo_records"),
        shown=Shown("missing replicas", _missing_cell, _missing_cell, label="missing"),
    )


class MissingReplicasCheck(FlowCheck):
    """How many topics the flow selects have no replica on the target yet."""

    owns = ("missing_replicas",)
    reads = "source"

    def observe(self, probe: Round) -> dict[str, Any]:
        topology = self.flow.topology
        selected = [name for name in self.flow.source.list_topics() if topology.selects(name)]
        replicas = self.flow.target.list_topics()
        missing = [name for name in selected if topology.target_topic(name) not in replicas]
        return {"missing_replicas": len(missing)}


def test_a_new_check_s_field_reaches_every_reader_without_another_file(tmp_path: Path) -> None:
    config = load_config_text(CONFIG, env={})
    topology = FlowTopology.of(config.flows[0])
    with _listening() as port:
        clusters = FakeClusters("dc1", "dc2", make=lambda alias: At(alias, port))
        for name in ("orders", "payments"):
            clusters["dc1"].add_topic(name, 1)
        clusters["dc2"].add_topic(topology.target_topic("orders"), 1)
        prober = _prober(config, clusters, (MissingReplicasCheck, WorkersCheck), WithReplicas)
        seen = prober.probe()
    assert isinstance(seen, WithReplicas) and seen.missing_replicas == 1, seen
    stored = seen.to_json()  # the observation's stored form (flow_status.data)
    assert stored["missing_replicas"] == 1
    assert WithReplicas.from_json(seen.flow, seen.at, stored) == seen
    assert WithReplicas.from_json(seen.flow, seen.at, {}).missing_replicas is None  # older rows

    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    registry = CollectorRegistry()
    metrics = MonitorMetrics.create(registry, WithReplicas)
    Monitor(config, "o1", store, metrics, {}, connect=clusters.connect).record_flow(seen)
    gauge = registry.get_sample_value("drkit_flow_missing_replicas", {"flow": seen.flow})
    assert gauge == 1.0
    assert registry.get_sample_value("drkit_flow_workers", {"flow": seen.flow}) == 0.0

    picture = current_status(config, store, WithReplicas)
    flow = picture.to_json()["flows"][seen.flow]
    assert flow["missing_replicas"] == 1
    checks = {(c["measure"], c["bound"]): c["ok"] for c in flow["failover"]["checks"]}
    assert checks[("missing_replicas", "failover.max_rpo_records")] is False
    assert "missing_replicas 1 exceeds failover.max_rpo_records 0" in flow["failover"]["reasons"]

    page = render_page(picture.to_json(), WithReplicas)
    assert "<th>missing replicas</th>" in page
    cell = '<td data-testid="missing_replicas-dc1-&gt;dc2"><span class="state DEGRADED">1</span>'
    assert cell in page
    line = next(text for text in _lines(picture) if text.startswith("  dc1->dc2"))
    assert line.endswith("workers 0  missing 1"), line
    # A flow nobody observed has the field too, unknown.
    empty = StateStore(f"sqlite:///{tmp_path / 'new.db'}")
    empty.upgrade()
    unseen = current_status(config, empty, WithReplicas)
    assert unseen.to_json()["flows"][seen.flow]["missing_replicas"] is None
