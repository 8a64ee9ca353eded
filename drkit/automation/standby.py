"""The standby an operator's unplanned failover of a source promotes: every standby's plan and
the choice among them - what ``drkit failover --from X`` without ``--to`` runs, and what a
drill with several standbys decides by (drkit/drills/runner.py), so the two never differ.

I/O at this edge only (the engine's plans, the observer states in the store); the choice itself
is :func:`drkit.failover.standby_choice.choose`, pure.
"""

from __future__ import annotations

import time

from drkit.automation.decision import standby_health
from drkit.automation.runner import candidate_of, observer_views, rpo_of
from drkit.config.loader import known_cluster
from drkit.errors import ConfigError, KafkaError, Problem
from drkit.failover.engine import Engine
from drkit.failover.model import Plan, Procedure
from drkit.failover.run_result import RunOptions
from drkit.failover.standby_choice import StandbyCandidate, StandbyChoice, choose
from drkit.store.health_repo import HealthRepository


def best_standby(
    engine: Engine, source: str, options: RunOptions
) -> tuple[dict[str, Plan], StandbyChoice]:
    """The unplanned failover's plan to every standby of ``source`` and the choice among them
    (drkit.failover.standby_choice): each target's health by the monitors' quorum (the
    observer states in the store, judged as automation's ``target_healthy`` check judges
    them), its RPO by the plan (``rpo_of``, as automation estimates it), evidence aged to one
    moment.  ConfigError (exit 2) when no flow replicates ``source``."""
    config = engine.config
    known_cluster(config, source, "--from")
    targets = tuple(sorted({f.target for f in config.flows if f.source == source}))
    if not targets:
        why = (
            f"no flow replicates {source}: no standby to promote (flows: "
            + (", ".join(f.name for f in config.flows) or "none")
            + ")"
        )
        raise ConfigError([Problem("--from", why)])
    health = HealthRepository(engine.store)
    views = observer_views(health.all_observer_states(), targets)
    store_now = health.now()
    plans: dict[str, Plan] = {}
    estimates = {}
    failed: dict[str, str] = {}
    for target in targets:
        try:
            plans[target] = engine.plan(Procedure.FAILOVER, source, target, options)
        except KafkaError as err:  # this standby cannot even be planned: the others can
            failed[target] = f"its plan failed: {err}"
            continue
        estimates[target] = rpo_of(plans[target], time.monotonic())
    now = time.monotonic()
    candidates = []
    for target in targets:
        state = standby_health(target, views[target], config.health, store_now)
        if target in failed:
            candidates.append(StandbyCandidate(target, state.healthy, state.detail, None, None,
                                        failed[target]))  # fmt: skip
        else:
            candidates.append(candidate_of(plans[target], estimates[target], state, now))
    return plans, choose(source, candidates)
