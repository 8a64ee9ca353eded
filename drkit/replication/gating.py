"""Keeping a replication worker in the state its flow's gate wants (drkit.control.gate).

The worker calls :meth:`GateKeeper.follow` once per loop iteration; it compares the gate's
decision with the state the worker is in and carries out the transition:

=========  ==========  ============================================================
from       to          what the worker does, then acks (epoch, new state)
=========  ==========  ============================================================
RUNNING    PAUSED      settle (in-flight records delivered, progress durable; exactly
                       once: the open transaction committed), pause every assigned
                       partition; it keeps consuming, so it keeps its group membership
PAUSED     RUNNING     resume every assigned partition
RUNNING    STOPPED     settle, pause; the worker then ends (leaves the group) and its
                       process idles until the next directive (drkit.replication_service)
PAUSED     STOPPED     nothing to settle; the worker ends, the process idles
any        same state  a new epoch only: ack it
between    STOPPED     a session torn down on an error (source session expired...)
sessions               left nothing in flight, what the target acknowledged stored:
                       ack at once (:meth:`GateKeeper.stop_if_wanted`), without
                       waiting for its consumer's close or the restart
=========  ==========  ============================================================

A self-fenced worker (the store silent for ``failover.worker_silence_s``) is PAUSED the same
way; it resumes when the store answers again with a RUNNING directive.  Partitions assigned
while the worker is not RUNNING are paused at once (:attr:`GateKeeper.holding`).  Without a
gate (no state store configured) the worker is always RUNNING.

Worker thread only, except :attr:`GateKeeper.state`, which the heartbeat thread reads.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from drkit.control.gate import FlowGate, GateReason
from drkit.control.model import DesiredState
from drkit.replication.metrics import ReplicationMetrics, show_flow_state

log = logging.getLogger(__name__)

ADMIT_PATIENCE_S = 5.0  # waiting this long for the store's first answer is worth a warning


class Holdable(Protocol):
    """The worker, as far as pausing and stopping it goes."""

    def settle_all(self) -> None:
        """Deliver everything in flight and make the progress of every partition durable."""

    def pause_partitions(self) -> None:
        """Stop fetching every assigned partition (consuming goes on: group membership)."""

    def resume_partitions(self) -> None:
        """Fetch every assigned partition again, from where it was paused."""


class GateKeeper:
    """See the module docstring."""

    def __init__(self, gate: FlowGate | None, flow: str, metrics: ReplicationMetrics) -> None:
        self.gate = gate
        self.flow = flow
        self.metrics = metrics
        # Held until the first decision is applied: a worker replicates only once it has read
        # its directive (without a gate it always runs).
        self.state = DesiredState.RUNNING if gate is None else DesiredState.PAUSED
        self._acked: tuple[int, DesiredState] | None = None
        self._show()

    @property
    def holding(self) -> bool:
        """Whether newly assigned partitions must be paused at once."""
        return self.state is not DesiredState.RUNNING

    def admit(self, stop: threading.Event) -> bool:
        """Before the flow starts: wait for the gate's first read.  False when the flow must not
        start - it is STOPPED (acked here: the worker ends without consuming) or ``stop`` is set.
        """
        if self.gate is None:
            return True
        if not self.gate.wait_read(stop, ADMIT_PATIENCE_S):
            if stop.is_set():
                return False
            log.warning(
                "flow control: waiting for the state store before replicating",
                extra={"flow": self.flow, "waited_s": ADMIT_PATIENCE_S},
            )
            if not self.gate.wait_read(stop):
                return False
        return not self.stop_if_wanted()

    def new_session(self) -> None:
        """A new consumer pauses nothing: the next :meth:`follow` (before anything is consumed)
        applies the decision again."""
        if self.state is not DesiredState.STOPPED:
            self.state = DesiredState.RUNNING
        self._acked = None

    def stop_if_wanted(self) -> bool:
        """Before the first session or between sessions - nothing assigned, nothing in flight,
        the progress of what the target acknowledged stored: enter STOPPED (and ack it) when
        the gate wants it.  True
        when it did; the worker then ends."""
        if self.gate is None:
            return False
        decision = self.gate.wanted()
        if decision.state is not DesiredState.STOPPED:
            return False
        self._enter(DesiredState.STOPPED, decision.epoch, decision.reason)
        return True

    def follow(self, worker: Holdable) -> DesiredState:
        """Bring ``worker`` into the state the gate wants; returns the state it is in now."""
        if self.gate is None:
            return self.state
        decision = self.gate.wanted()
        if decision.state is self.state and self._acked == (decision.epoch, decision.state):
            return self.state
        if decision.state is DesiredState.RUNNING:
            if self.state is not DesiredState.RUNNING:
                worker.resume_partitions()
        elif self.state is DesiredState.RUNNING:
            worker.settle_all()
            worker.pause_partitions()
        self._enter(decision.state, decision.epoch, decision.reason)
        return self.state

    def _enter(self, state: DesiredState, epoch: int, reason: GateReason) -> None:
        assert self.gate is not None
        if state is not self.state or reason is not GateReason.DIRECTIVE:
            log.log(
                logging.WARNING if reason is GateReason.STORE_SILENT else logging.INFO,
                "flow control: %s -> %s",
                self.state.value,
                state.value,
                extra={"flow": self.flow, "epoch": epoch, "reason": reason.value},
            )
        self.state = state
        self._show()
        self.gate.acted(epoch, state)
        self._acked = (epoch, state)

    def _show(self) -> None:
        show_flow_state(self.metrics, self.flow, self.state.value)
