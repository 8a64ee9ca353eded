"""The flow-control channel: directives and acknowledgements on a compacted topic of the
flow's target cluster, beside the state store.

The state store is the authority for flow directives; this channel is how a replication worker
that cannot reach the store learns whether anything changed (Patroni's failsafe mode is the
model).  Every directive the failover engine writes to the store it also publishes here (with
the store's epoch); a worker whose store reads fail reads the channel instead, keeps its
directive while the channel confirms nothing newer exists, follows a newer one, and
acknowledges on the channel (at every poll: the ack's growing offset is its heartbeat).  A
worker that can reach neither the store nor the target pauses itself (drkit.control.gate).

Topic ``drkit-control.<source>.internal`` on the flow's target; keys ``directive/<flow>`` and
``ack/<flow>/<worker>``; values are small JSON documents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.control.model import DesiredState, FlowDirective
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.keyed_topic import KeyedTopic, KeyedValue
from drkit.replication.internal_topics import control_topic


@dataclass(frozen=True)
class ChannelAck:
    """A worker's latest acknowledgement on the channel; ``offset`` grows with every one."""

    worker: str
    epoch: int
    state: DesiredState
    offset: int


@dataclass(frozen=True)
class ChannelView:
    """What the channel holds for one flow: the newest directive published (None: never) and
    every worker's latest ack."""

    directive: FlowDirective | None
    acks: dict[str, ChannelAck] = field(default_factory=dict)


class ChannelPort(Protocol):
    """What the gate and the engine need of the channel (tests pass in-memory ones)."""

    def publish(self, directive: FlowDirective) -> None: ...

    def ack(self, worker: str, epoch: int, state: DesiredState) -> None: ...

    def read(self) -> ChannelView: ...

    def close(self) -> None: ...


ChannelFactory = Callable[[FlowConfig], ChannelPort]


def directive_key(flow: str) -> str:
    return f"directive/{flow}"


def ack_key(flow: str, worker: str) -> str:
    return f"ack/{flow}/{worker}"


def view_of(flow: str, latest: dict[str, KeyedValue]) -> ChannelView:
    """The channel's documents for ``flow`` as values (pure; malformed documents are skipped)."""
    directive: FlowDirective | None = None
    found = latest.get(directive_key(flow))
    if found is not None:
        directive = _directive(flow, found.value)
    prefix = ack_key(flow, "")
    acks: dict[str, ChannelAck] = {}
    for key, entry in latest.items():
        if key.startswith(prefix):
            worker = key[len(prefix) :]
            try:
                acks[worker] = ChannelAck(
                    worker, int(entry.value["epoch"]), DesiredState(entry.value["state"]),
                    entry.offset,
                )  # fmt: skip
            except (KeyError, ValueError, TypeError):
                continue
    return ChannelView(directive, acks)


def _directive(flow: str, value: dict[str, Any]) -> FlowDirective | None:
    try:
        return FlowDirective(
            flow, DesiredState(value["desired"]), int(value["epoch"]), str(value.get("reason", "")),
            value.get("run_id"),
        )  # fmt: skip
    except (KeyError, ValueError, TypeError):
        return None


class ControlChannel:
    """The channel of one flow on its target (Kafka)."""

    def __init__(self, endpoint: ClusterEndpoint, flow: str, topic: str) -> None:
        self.flow = flow
        self._topic = KeyedTopic(endpoint, topic)

    @classmethod
    def of(cls, config: DrkitConfig, flow: FlowConfig) -> ControlChannel:
        endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
        return cls(endpoint, flow.name, control_topic(flow.source))

    def publish(self, directive: FlowDirective) -> None:
        self._topic.put(
            directive_key(self.flow),
            {
                "desired": directive.desired.value,
                "epoch": directive.epoch,
                "reason": directive.reason,
                "run_id": directive.run_id,
            },
        )

    def ack(self, worker: str, epoch: int, state: DesiredState) -> None:
        self._topic.put(ack_key(self.flow, worker), {"epoch": epoch, "state": state.value})

    def read(self) -> ChannelView:
        return view_of(self.flow, self._topic.latest())

    def close(self) -> None:
        self._topic.close()


def kafka_channels(config: DrkitConfig) -> ChannelFactory:
    """The production factory: each flow's channel on its target."""
    return lambda flow: ControlChannel.of(config, flow)
