"""Drill scenarios: ``runbooks/drills/*.yaml``, one typed model.

A scenario says what to rehearse: the workload (topics, rate, keys, transactional or not,
consumer groups and their speeds), the fault and when, how the move is made (which procedure,
manual or automatic), and the policy the result is judged against (RTO, RPO).

Contract: :func:`load_scenario` returns a valid :class:`Scenario` or raises ConfigError naming
each bad key; a scenario name given without a path is looked up in the shipped drills.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from drkit.config.loader import parse_yaml, read_text_file, validation_problems
from drkit.config.model import FrozenModel
from drkit.errors import ConfigError, Problem
from drkit.failover.model import Procedure, StepName
from drkit.failover.runbook import runbooks_dir


class FaultKind(StrEnum):
    NONE = "none"  # planned moves: nothing breaks
    KILL_BROKERS = "kill_brokers"  # the source's brokers are killed (SIGKILL)
    NETWORK_CUT = "network_cut"  # the source is cut off (see faults.py for how)
    PAUSE = "pause"  # the source's brokers frozen (SIGSTOP): a GC pause, a hung host
    BLACKHOLE = "blackhole"  # iptables DROP both ways on the client ports (root, or refused)
    PARTIAL_CUT = "partial_cut"  # one way: the brokers' replies dropped (faults.REPLIES_ONLY)


class DecisionMode(StrEnum):
    MANUAL = "manual"  # an operator (the drill) starts the run once the source is declared down
    AUTOMATIC = "automatic"  # drkit's monitor decides and starts it


class TopicLoad(FrozenModel):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    partitions: int = Field(default=3, ge=1, le=64)
    records_per_s: float = Field(default=300.0, gt=0, le=50_000)
    keys: int = Field(default=100, ge=0, description="distinct keys; 0 writes records without keys")
    value_bytes: int = Field(default=100, ge=16, le=100_000)
    transactional: bool = False
    abort_every: int = Field(
        default=0, ge=0, description="transactional: abort every Nth transaction (0: never)"
    )


class GroupLoad(FrozenModel):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    topic: str
    records_per_s: float = Field(
        default=1000.0, gt=0, description="processing speed; below the write rate the group lags"
    )


class Workload(FrozenModel):
    topics: tuple[TopicLoad, ...] = Field(min_length=1)
    groups: tuple[GroupLoad, ...] = ()
    warmup_s: float = Field(default=8.0, ge=0, le=3600)

    @model_validator(mode="after")
    def _groups_read_declared_topics(self) -> Workload:
        for what, given in (("topics", self.topics), ("groups", self.groups)):
            seen: set[str] = set()
            for item in given:  # a second topic of one name failed the drill at its start
                if item.name in seen:
                    raise ValueError(f"{what[:-1]} {item.name!r} is given twice")
                seen.add(item.name)
        names = {t.name for t in self.topics}
        for group in self.groups:
            if group.topic not in names:
                raise ValueError(
                    f"group {group.name!r} reads {group.topic!r}, not a workload topic"
                )
        return self


class Fault(FrozenModel):
    kind: FaultKind = FaultKind.NONE
    at_s: float = Field(
        default=5.0, ge=0, allow_inf_nan=False, description="seconds after the warm-up"
    )
    divergent_records: int = Field(
        default=0,
        ge=0,
        description="records the source takes per partition after replication stopped and "
        "before the fault (a divergent tail for failback)",
    )


class Move(FrozenModel):
    procedure: Procedure = Procedure.FAILOVER
    decision: DecisionMode = DecisionMode.MANUAL
    decision_delay_s: float = Field(default=0.0, ge=0, le=3600)
    failback: bool = Field(
        default=False, description="after the move and the source's return, fail back to it"
    )
    engine_killed_after: StepName | None = Field(
        default=None, description="kill -9 the engine once this step is done, then resume the run"
    )


class Standby(FrozenModel):
    """Another standby of the source besides the scenario's ``target`` (a third data center):
    the drill replicates the source to it too, lets the failover choose among all standbys as
    ``drkit failover --from`` does, and re-points it onto the promoted cluster afterwards."""

    cluster: str = Field(min_length=1)
    stopped_before_fault_s: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="its replication stopped this many seconds before the fault (0: runs "
        "until the fault): it lags, so the choice among the standbys is known in advance",
    )

    @model_validator(mode="before")
    @classmethod
    def _by_name(cls, value: Any) -> Any:
        """``standbys: [dc3]``: a name alone is a standby that replicates until the fault."""
        return {"cluster": value} if isinstance(value, str) else value


class Policy(FrozenModel):
    rto_s: float = Field(gt=0, allow_inf_nan=False)  # .inf: a traceback drawing the chart
    rpo_records: int = Field(default=0, ge=0)
    rpo_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    reread_records: int = Field(
        default=0,
        ge=0,
        description="records groups may process twice in all: after an unplanned failover, "
        "what they committed on the source after the last checkpoint",
    )


class Scenario(FrozenModel):
    name: str = Field(min_length=1, pattern=r"^[a-z0-9-]+$")
    title: str
    description: str = ""
    source: str = "dc1"
    target: str = "dc2"
    standbys: tuple[Standby, ...] = Field(
        default=(),
        description="the source's other standbys besides target (a name, or {cluster, "
        "stopped_before_fault_s}); none: a two-cluster drill",
    )
    workload: Workload
    fault: Fault = Field(default_factory=Fault)
    move: Move = Field(default_factory=Move)
    policy: Policy
    verify: bool = Field(default=True, description="prove the result with drkit verify (Spark)")
    sample_interval_s: float = Field(default=1.0, gt=0, le=60)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        planned = self.move.procedure in (Procedure.SWITCHOVER, Procedure.CUTOVER)
        if planned and self.fault.kind is not FaultKind.NONE:
            raise ValueError(f"a {self.move.procedure.value} is planned: fault.kind must be none")
        if not planned and self.fault.kind is FaultKind.NONE:
            raise ValueError("an unplanned failover needs a fault")
        if self.move.procedure is Procedure.FAILBACK:
            raise ValueError("procedure failback: use procedure failover with failback: true")
        if self.move.decision is DecisionMode.AUTOMATIC and planned:
            raise ValueError("automatic decisions are for unplanned failovers")
        if self.source == self.target:
            raise ValueError("source and target must differ")
        if self.standbys:
            self._standbys_consistent()
        return self

    def _standbys_consistent(self) -> None:
        """Standbys make sense for an unplanned failover only: a planned move goes to its
        target, and the others follow the promoted cluster once the source is lost."""
        names = [standby.cluster for standby in self.standbys]
        if len(set(names)) != len(names):
            raise ValueError("standbys: a cluster is given twice")
        if {self.source, self.target} & set(names):
            raise ValueError("standbys: the source's other standbys, not source or target")
        if self.planned:
            raise ValueError("standbys are for an unplanned failover (a fault)")
        if self.move.failback or self.move.engine_killed_after is not None:
            raise ValueError("standbys: no failback and no engine killed in a three-cluster drill")
        if self.fault.divergent_records:
            raise ValueError("standbys: no divergent tail in a three-cluster drill")
        late = [s.cluster for s in self.standbys if s.stopped_before_fault_s > self.fault.at_s]
        if late:
            raise ValueError(
                f"standbys: {', '.join(late)} stopped before the workload runs - "
                "stopped_before_fault_s must be at most fault.at_s"
            )

    @property
    def planned(self) -> bool:
        return self.fault.kind is FaultKind.NONE

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster the drill uses: source, target, then the other standbys."""
        return (self.source, self.target, *(standby.cluster for standby in self.standbys))


def require_clusters(scenario: Scenario, clusters: Iterable[str], config_name: str) -> None:
    """ConfigError naming every cluster ``scenario`` uses (source, target, standbys) that is
    not among ``clusters`` (those of ``config_name``) - a three-cluster drill on the two
    clusters of a plain ``drkit local up`` among them; nothing was done."""
    known = set(clusters)
    missing = [name for name in scenario.clusters if name not in known]
    if not missing:
        return
    hint = ""
    if scenario.standbys:
        hint = (
            "; a drill with standbys needs every cluster it names: `drkit local up --clusters "
            f"{','.join(scenario.clusters)}` writes such a config"
        )
    raise ConfigError([Problem("scenario", (
        f"{scenario.name} names {', '.join(missing)}, not a cluster of {config_name} "
        f"(clusters: {', '.join(sorted(known))}){hint}; nothing was done"
    ))])  # fmt: skip


def drills_dir() -> Path:
    """The shipped scenarios (``runbooks/drills`` in a checkout, packaged in a wheel)."""
    return runbooks_dir() / "drills"


def shipped() -> list[Path]:
    return sorted(drills_dir().glob("*.yaml"))


def resolve(name_or_path: str) -> Path:
    """A path as given, or a shipped scenario by name (``unplanned-loss-of-dc1``)."""
    if not name_or_path.strip():  # Path("") is ".": "is a directory, not a file" misled
        names = ", ".join(p.stem for p in shipped())
        raise ConfigError([Problem("SCENARIO", f"cannot be empty: give a file or one of {names}")])
    path = Path(name_or_path)
    if not path.exists() and path.parent == Path() and (drills_dir() / path.name).exists():
        why = f"no such file here; the shipped scenario is named {path.stem!r} (without .yaml)"
        raise ConfigError([Problem("SCENARIO", f"{name_or_path}: {why}")])
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    candidate = drills_dir() / f"{name_or_path}.yaml"
    if candidate.exists():
        return candidate
    names = ", ".join(p.stem for p in shipped())
    raise ConfigError([Problem("SCENARIO", f"no scenario {name_or_path!r} (shipped: {names})")])


def load_scenario(name_or_path: str) -> Scenario:
    path = resolve(name_or_path)
    # One line naming the file, line, column and problem, as drkit.yaml's errors are - PyYAML's
    # own message spanned five lines (issue 45).
    raw = parse_yaml(read_text_file(path), str(path))
    try:
        return Scenario.model_validate(raw)
    except ValidationError as err:
        # In words, as drkit.yaml's errors are: not pydantic's ("a valid dictionary or instance
        # of Scenario", "Tuple should have ...", a regex) - issue 45, sixth trial.
        problems = [
            Problem(problem.path or "scenario", problem.reason)
            for problem in validation_problems(err)
        ]
        raise ConfigError(problems, source=str(path)) from None
