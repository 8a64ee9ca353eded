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

Signed (drkit/signing.py): every record carries the MAC of its key and value under the flow's
key from the state store (kind ``control``) in its ``drkit-mac`` header, and a record of this
flow whose MAC fails is ignored - never a directive or an ack, never the latest document of its
key - and counted (``rejected``).  So a foreign client on an open cluster cannot pause or start
a flow through the channel, nor fake a worker's ack; it can still replay an older record drkit
wrote (an older epoch changes nothing: a worker follows only a newer one) or flood the topic.
The key is read from the store on first use and kept: a worker that never reached its store
cannot read the channel at all (it pauses itself, drkit.control.gate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.control.model import DesiredState, FlowDirective
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.keyed_topic import Accept, KeyedTopic, KeyedTopicPort, KeyedValue, Sign
from drkit.records import Headers
from drkit.signing import Kind, Signer
from drkit.topology.internal_topics import control_topic


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
    rejected: int = 0  # records of this flow ignored so far: their MAC did not verify


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


def ours(flow: str, key: bytes) -> bool:
    """Whether a channel record's key is one of ``flow``'s."""
    text = key.decode(errors="replace")
    return text == directive_key(flow) or text.startswith(ack_key(flow, ""))


class ControlChannel:
    """The channel of one flow on its target (Kafka).

    ``key``: the flow's key (drkit/store/flow_keys.py), asked for on first use - a StateStoreError
    then is a failed publish or read."""

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        flow: str,
        topic: str,
        key: Callable[[], bytes],
        *,
        make_topic: Callable[[Sign, Accept], KeyedTopicPort] | None = None,
    ) -> None:
        """``make_topic(sign, accept)``: the keyed topic to use (tests: an in-memory one);
        by default the Kafka topic ``topic`` on ``endpoint``."""
        self.flow = flow
        self._key = key
        self._signer: Signer | None = None
        self.rejected = 0
        if make_topic is None:
            self._topic: KeyedTopicPort = KeyedTopic(
                endpoint, topic, sign=self._sign, accept=self._accept
            )
        else:
            self._topic = make_topic(self._sign, self._accept)

    @classmethod
    def of(cls, config: DrkitConfig, flow: FlowConfig, key: Callable[[], bytes]) -> ControlChannel:
        endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
        return cls(endpoint, flow.name, control_topic(flow.source), key)

    def _signed(self) -> Signer:
        if self._signer is None:
            self._signer = Signer(self._key(), Kind.CONTROL, self.flow)
        return self._signer

    def _sign(self, key: bytes, value: bytes) -> list[tuple[str, str | bytes | None]]:
        return [self._signed().header(key, value)]

    def _accept(self, key: bytes, value: bytes | None, headers: Headers) -> bool:
        if not ours(self.flow, key):
            return False  # another flow's: not for this view (and not ours to judge)
        if self._signed().accepts(key, value, headers):
            return True
        self.rejected += 1
        return False

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
        self._signed()  # the key first: without it nothing on the channel can be trusted
        latest = self._topic.latest()
        view = view_of(self.flow, latest)
        return ChannelView(view.directive, view.acks, self.rejected)

    def close(self) -> None:
        self._topic.close()


def kafka_channels(config: DrkitConfig, keys: Callable[[str], bytes]) -> ChannelFactory:
    """The production factory: each flow's channel on its target, signed with ``keys(flow)``
    (drkit/store/flow_keys.py ``control_keys``: the store's own key, never derived)."""
    return lambda flow: ControlChannel.of(config, flow, lambda: keys(flow.name))
