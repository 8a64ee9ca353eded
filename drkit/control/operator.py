"""The operator's hand on a flow: which changes ``drkit flows`` makes and which it refuses (pure).

An operator pauses, stops, resumes and starts flows through the same directives the failover
engine writes (drkit.control), under the same lease, so a change never lands in the middle of
a run.  Refused, each with its remedy:

* any change while a failover run is unfinished - the run owns the flows until it ends (resume
  or abandon it first);
* ``resume`` of a flow that is not paused, ``start`` of one that is not stopped - the verb says
  what the operator believes; a mismatch is a wrong belief worth hearing about;
* letting a flow run (resume, start) whose source is not the active cluster: after a failover
  the old primary may hold records the new one never got (its divergent tail); replicating it
  would copy them onto the new primary behind the applications' backs - ``drkit failback``
  captures that tail first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from drkit.control.model import DesiredState


class FlowVerb(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"
    START = "start"

    @property
    def desired(self) -> DesiredState:
        return _WANTS[self]


_WANTS = {
    FlowVerb.PAUSE: DesiredState.PAUSED,
    FlowVerb.RESUME: DesiredState.RUNNING,
    FlowVerb.STOP: DesiredState.STOPPED,
    FlowVerb.START: DesiredState.RUNNING,
}
# The state each verb starts from (pause and stop apply to any other state).
_FROM = {FlowVerb.RESUME: DesiredState.PAUSED, FlowVerb.START: DesiredState.STOPPED}


@dataclass(frozen=True)
class FlowChangeFacts:
    """What the decision needs: the flow, its current directive, where applications write."""

    flow: str
    source: str
    current: DesiredState
    active_cluster: str | None
    unfinished_runs: Sequence[int] = ()


def change_blockers(verb: FlowVerb, facts: FlowChangeFacts) -> list[str]:
    """Why ``verb`` must not be applied to the flow now (empty: it may)."""
    out: list[str] = []
    if facts.unfinished_runs:
        run = facts.unfinished_runs[0]
        out.append(
            f"failover run {run} is unfinished and owns the flows until it ends: "
            f"'drkit failover --resume {run}' or 'drkit failover abandon {run}' first"
        )
    origin = _FROM.get(verb)
    if origin is not None and facts.current not in (origin, DesiredState.RUNNING):
        other = FlowVerb.START if verb is FlowVerb.RESUME else FlowVerb.RESUME
        out.append(
            f"{facts.flow} is {facts.current.value}, not {origin.value}: "
            f"'drkit flows {other.value}' lets it run"
        )
    if (
        verb.desired is DesiredState.RUNNING
        and facts.active_cluster is not None
        and facts.source != facts.active_cluster
    ):
        out.append(
            f"{facts.flow} replicates from {facts.source}, but the applications write to "
            f"{facts.active_cluster} (the active pointer): running it would copy what "
            f"{facts.source} holds that {facts.active_cluster} never got onto "
            f"{facts.active_cluster} - use 'drkit failback --to {facts.source}', which captures "
            "that divergent tail first"
        )
    return out


def unchanged(verb: FlowVerb, facts: FlowChangeFacts) -> bool:
    """The flow is already where ``verb`` would put it: nothing to write."""
    return facts.current is verb.desired
