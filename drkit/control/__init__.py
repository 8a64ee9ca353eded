"""Control of running replication: a desired state per flow, with an epoch, in the state store.

The failover engine pauses, stops, or starts flows by writing a :class:`FlowDirective`; every
``drkit replicate`` worker - on any host - watches it and acknowledges the epoch it acted on
(drkit.control.gate).  Directives are also published on each flow's control channel on its
target (drkit.control.channel), which a worker cut off from the store reads instead.  A worker
that can read neither for ``failover.worker_silence_s`` stops writing on its own, so the engine
may treat a worker silent on both as fenced once that much time has passed.
"""

from drkit.control.model import DesiredState, FlowDirective, WorkerAck
from drkit.control.repo import ControlRepository

__all__ = ["ControlRepository", "DesiredState", "FlowDirective", "WorkerAck"]
