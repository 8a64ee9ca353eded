"""Runbooks: each procedure's ordered step list, read from ``runbooks/<procedure>.yaml``.

The YAML is what the engine executes (step order, per-step timeouts, rollback steps, the
point before which a failure rolls back, hooks); the Markdown page next to it is what an
operator reads.  A test holds the YAML step names equal to the engine's step implementations.

Packaged as ``drkit/_runbooks`` in a wheel, ``runbooks/`` in a checkout; an operator may point
``failover.runbooks_dir`` at their own copies.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, SecretStr, ValidationError

from drkit.config.model import FrozenModel
from drkit.errors import ConfigError, Problem
from drkit.failover.model import PlannedStep, Procedure, StepName


class RunbookHook(FrozenModel):
    """A command run before or after a step, with the run's JSON context on stdin."""

    when: Literal["before", "after"]
    step: str = "*"  # a step name, or * for every step
    command: tuple[str, ...] = Field(min_length=1)
    timeout_s: float = Field(default=30.0, gt=0)
    env: dict[str, SecretStr] = Field(default_factory=dict)  # for its process only


class RunbookStep(FrozenModel):
    name: StepName
    timeout_s: float | None = Field(default=None, gt=0)
    rollback: StepName | None = None


class Runbook(FrozenModel):
    procedure: Procedure
    summary: str = ""
    rollback_before: StepName | None = None
    steps: tuple[RunbookStep, ...] = Field(min_length=1)
    hooks: tuple[RunbookHook, ...] = ()

    def planned_steps(
        self, timeouts: dict[StepName, float] | None = None
    ) -> tuple[PlannedStep, ...]:
        """The steps numbered from 1; ``timeouts`` override the runbook's."""
        overrides = timeouts or {}
        return tuple(
            PlannedStep(
                seq,
                step.name,
                overrides.get(step.name, step.timeout_s),
                step.rollback if self.may_roll_back(step.name) else None,
            )
            for seq, step in enumerate(self.steps, start=1)
        )

    def may_roll_back(self, name: StepName) -> bool:
        """Whether a failure at or after ``name``'s completion still rolls the run back."""
        if self.rollback_before is None:
            return False
        order = [step.name for step in self.steps]
        return name in order and order.index(name) < order.index(self.rollback_before)


def runbooks_dir(configured: Path | None = None) -> Path:
    """Where runbooks are read from: the configured directory, the package, or the checkout."""
    if configured is not None:
        return configured
    packaged = Path(__file__).resolve().parent.parent / "_runbooks"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "runbooks"


def load_runbook(procedure: Procedure, directory: Path | None = None) -> Runbook:
    """Parse and validate ``<directory>/<procedure>.yaml``; ConfigError names what is wrong.
    The file is read every time; a text parsed before is not parsed again (a monitor's
    automation and every engine read the same few runbooks over and over)."""
    path = runbooks_dir(directory) / f"{procedure.value}.yaml"
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError([Problem(str(path), f"cannot read runbook: {err.strerror}")]) from None
    return _parsed(procedure, str(path), text)


@functools.lru_cache(maxsize=64)
def _parsed(procedure: Procedure, path: str, text: str) -> Runbook:
    """``text`` (the runbook at ``path``) parsed and validated: a pure function of its
    arguments, so cached (a Runbook is frozen)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError([Problem(str(path), f"not valid YAML: {err}")]) from None
    try:
        runbook = Runbook.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(
            [
                Problem(".".join(str(p) for p in e["loc"]), e["msg"])
                for e in err.errors(include_url=False)
            ],
            str(path),
        ) from None
    if runbook.procedure is not procedure:
        raise ConfigError(
            [Problem("procedure", f"is {runbook.procedure.value}, expected {procedure.value}")],
            str(path),
        )
    names = [step.name for step in runbook.steps]
    if runbook.rollback_before is not None and runbook.rollback_before not in names:
        raise ConfigError(
            [Problem("rollback_before", f"{runbook.rollback_before.value} is not a step here")],
            str(path),
        )
    return runbook
