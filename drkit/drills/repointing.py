"""A drill's other standbys after the move (three data centers): which standby was chosen, each
other standby re-pointed onto the promoted cluster, and what each holds then - the I/O behind
drills.standbys' recount and checks.

Runs once the applications resumed on the promoted cluster (the recovery is over: the re-point's
time is reported on its own, never inside the RTO) and before the drill stops what it started.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from drkit.automation.journal import StoredDecision
from drkit.drills.report import Recounted, RepointedStandby, StandbyChosen, StandbyPartition
from drkit.drills.running import RunningDrill
from drkit.drills.scenario import Standby
from drkit.drills.standbys import recount
from drkit.errors import DrkitError
from drkit.failover.runs import RunRecord
from drkit.failover.standby_choice import StandbyChoice
from drkit.kafka.io import consume_all
from drkit.offsets.follow_on import Copied, follow_standby
from drkit.records import Record, TopicPartition
from drkit.repoint import CannotTell, FollowFrom, Repointed, StandbyAhead
from drkit.store.flow_keys import keys_of
from drkit.topology.flow import FlowTopology

# The timeline's events of the re-point (after clients_resumed: outside the RTO).
REPOINT_STARTED = "repoint_started"
REPOINT_FINISHED = "repoint_finished"


def manual_choice(
    choice: StandbyChoice, promoted: str, named: Callable[[str], str] = str
) -> StandbyChosen:
    """The drill's own choice, made as ``drkit failover --from`` without ``--to`` makes it;
    ``named`` turns the drill's aliases (in names and words) into the scenario's names."""
    chosen = named(choice.chosen.target) if choice.chosen is not None else None
    candidates = tuple(_named(verdict.to_json(), named) for verdict in choice.verdicts)
    return StandbyChosen("manual", chosen, named(promoted), named(choice.summary()), candidates)


def _named(document: dict[str, Any], named: Callable[[str], str]) -> dict[str, Any]:
    return {k: named(v) if isinstance(v, str) else v for k, v in document.items()}


def automatic_choice(
    run: RunRecord, decisions: Sequence[StoredDecision], named: Callable[[str], str] = str
) -> StandbyChosen:
    """The monitor's choice, read back from its stored decisions (newest first): the one that
    started ``run`` carries the ``standby`` check saying which standby it chose and every
    candidate's figures; without one (a single pair acted, the others held) the latest held
    decision of each other standby of the source says why it did not act."""
    acted = next((d for d in decisions if d.run_id == run.id), None)
    checks = acted.evidence.get("checks", []) if acted is not None else []
    check = next((c for c in checks if c.get("name") == "standby"), None)
    held: dict[str, StoredDecision] = {}
    for decision in decisions:
        if decision.source == run.source and decision.target != run.target and not decision.act:
            held.setdefault(decision.target, decision)
    candidates = [{"cluster": run.target, "outcome": "chosen", "why": "its decision acted"}]
    candidates += [
        {"cluster": target, "outcome": "held", "why": d.summary} for target, d in held.items()
    ]
    if check is not None:
        summary = str(check.get("detail", ""))
    else:
        others = "; ".join(f"{target}: {d.summary}" for target, d in held.items())
        summary = f"{run.target}'s decision acted" + (
            f", the others held ({others})" if others else ""
        )
    return StandbyChosen(
        "automatic",
        named(run.target),
        named(run.target),
        named(summary),
        tuple(_named(c, named) for c in candidates),
    )


def repoint_others(runner: RunningDrill) -> tuple[RepointedStandby, ...]:
    """Every other standby of the scenario re-pointed onto the promoted cluster, one after
    another, each recounted; a standby whose re-point fails is reported with why (the check
    standby_has_every_record fails on it), never raised."""
    out: list[RepointedStandby] = []
    for standby in runner.scenario.standbys:
        out.append(_repoint_one(runner, standby))
    return tuple(out)


def _repoint_one(runner: RunningDrill, standby: Standby) -> RepointedStandby:
    env, src, dst = runner.env, runner.src, runner.dst
    alias = env.alias(standby.cluster)
    origins = _origins(runner)
    theirs = runner.topology  # the promoted cluster's replicas: the drill's own flow
    ours = FlowTopology.of(env.config.flow(f"{src}->{alias}"))
    replica_on = {tp: TopicPartition(ours.target_topic(tp.topic), tp.partition) for tp in origins}
    promoted_on = {
        tp: TopicPartition(theirs.target_topic(tp.topic), tp.partition) for tp in origins
    }
    runner.say(f"re-pointing {standby.cluster} onto {runner.scenario.target}", None)
    took: float | None = None
    try:
        before = runner.admin(standby.cluster).list_offsets(list(replica_on.values()), "latest")
        runner.timeline.add(REPOINT_STARTED, f"{standby.cluster} follows {runner.scenario.target}")
        started = time.monotonic()
        # What `drkit flows repoint --from SRC --to DST --standby ALIAS` runs, in process.
        report, copied = follow_standby(env.config, src, dst, alias,
                                        connect=runner.options.connect,
                                        keys=keys_of(env.config, env.store))  # fmt: skip
        took = round(time.monotonic() - started, 3)
        runner.timeline.add(REPOINT_FINISHED, copied_event(standby.cluster, copied, replica_on))
        promoted = _read(runner, runner.scenario.target, {r.topic for r in promoted_on.values()})
        held = _read(runner, standby.cluster, {r.topic for r in replica_on.values()})
    except (DrkitError, KeyError) as err:
        done = "not re-pointed" if took is None else "re-pointed, not read back"
        return RepointedStandby(standby.cluster, standby.stopped_before_fault_s, took,
                                error=f"{done}: {type(err).__name__}: {err}")  # fmt: skip
    partitions = []
    for origin in sorted(origins, key=lambda tp: (tp.topic, tp.partition)):
        counted = recount(
            src,
            origin,
            _of(promoted, promoted_on[origin]),
            _of(held, replica_on[origin]),
            before.get(replica_on[origin], 0),
        )
        partitions.append(_partition(runner, origin, report.results.get(origin),
                                     copied.get(origin), counted))  # fmt: skip
    return RepointedStandby(standby.cluster, standby.stopped_before_fault_s, took,
                            tuple(partitions))  # fmt: skip


def copied_event(
    cluster: str, copied: Mapping[TopicPartition, Copied], workload: Iterable[TopicPartition]
) -> str:
    """The re-point's event: the workload's records copied, as the report counts them, and
    apart those of drkit's own replicated topics (heartbeats)."""
    ours = set(workload)
    mine = sum(c.copied for tp, c in copied.items() if tp in ours)
    others = sum(c.copied for tp, c in copied.items() if tp not in ours)
    extra = f" (and {others} of drkit's own topics)" if others else ""
    return f"{cluster}: {mine} records of the workload copied{extra}"


def _origins(runner: RunningDrill) -> list[TopicPartition]:
    """The workload's partitions on the source (under the drill's topic names)."""
    return [
        TopicPartition(runner.env.topic(load.name), p)
        for load in runner.scenario.workload.topics
        for p in range(load.partitions)
    ]


def _of(records: list[Record], tp: TopicPartition) -> list[Record]:
    return [r for r in records if r.topic == tp.topic and r.partition == tp.partition]


def _read(runner: RunningDrill, cluster: str, topics: set[str]) -> list[Record]:
    """Every committed record of ``topics`` on ``cluster`` (the scenario's name), to the end."""
    out: list[Record] = []
    for topic in sorted(topics):
        out += consume_all(runner.endpoint(cluster), topic, timeout_s=60, complete=True)
    return out


def _partition(
    runner: RunningDrill,
    origin: TopicPartition,
    result: Repointed | None,
    copied: Copied | None,
    counted: Recounted,
) -> StandbyPartition:
    """One partition's line of the report: the re-point's answer and figures, the recount."""
    name = origin.topic.removeprefix(runner.env.prefix + ".")
    to_copy: int | None = None
    done: int | None = None
    holes: int | None = None
    unreachable: int | None = None
    ahead: int | None = None
    if isinstance(result, FollowFrom):
        outcome = "follow"
        detail = f"from {result.start} (frontier {result.frontier}, {result.evidence.value})"
        to_copy, holes, unreachable, ahead = result.to_copy, result.holes, result.unreachable, 0
        done = copied.copied if copied is not None else 0
    elif isinstance(result, StandbyAhead):
        outcome = "ahead"
        detail = f"ahead by {result.records} (origin offsets [{result.first}, {result.end}))"
        to_copy, done, ahead = 0, 0, result.records
    else:
        outcome = "cannot_tell"
        detail = result.reason if isinstance(result, CannotTell) else "not in the re-point"
    return StandbyPartition(
        **asdict(counted), topic=name, partition=origin.partition, outcome=outcome,
        detail=detail, to_copy=to_copy, copied=done, holes=holes, unreachable=unreachable,
        ahead=ahead,
    )  # fmt: skip
