"""Run a drill and keep it: the one entry point for ``drkit drill run``, ``drkit demo`` and
scheduled drills.

The drill's row goes to the main state store before anything is touched (state "running"),
and is finished with the report - or failed with the cause - whatever happens, so a drill is
never left "running" and every drill, passed or not, is listed by ``drkit drill list``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what runs a drill (and draws its page) is imported once one runs: a bad
    # argument or scenario is told in well under a second, not after seconds of imports
    from drkit.config.model import DrkitConfig
    from drkit.drills.report import DrillReport
    from drkit.drills.scenario import Scenario
    from drkit.failover.context import ProgressCallback
    from drkit.kafka.ports import AdminFactory
    from drkit.local import LocalKafka
    from drkit.store import StateStore


@dataclass(frozen=True)
class DrillOutcome:
    drill_id: int
    report: DrillReport
    html: Path
    json: Path
    # ``cluster:group`` names the clean-up had to leave (members still there after its wait);
    # ``drkit drill cleanup <the report's directory>`` removes them later.
    left_on_clusters: tuple[str, ...] = ()


def raw_clusters(config_path: Path) -> dict[str, Any]:
    """The ``clusters`` section as written (``${VAR}`` references and ``*_file`` paths kept),
    for a drill's own config.  Raises ConfigError when a secret is written out in it: a drill
    never copies a secret into its directory."""
    import yaml

    from drkit.drills.environment import refuse_literal_secrets

    document = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    clusters = dict(document.get("clusters") or {})
    refuse_literal_secrets(clusters, config_path)
    return clusters


def run_drill(
    scenario: Scenario,
    config: DrkitConfig,
    config_path: Path,
    store: StateStore,
    state_dir: Path,
    verify: bool = True,
    progress: ProgressCallback | None = None,
    spark_master: str | None = None,
    local: LocalKafka | None = None,
    keep: bool = False,
    *,
    connect: AdminFactory,
) -> DrillOutcome:
    """Run ``scenario`` and store it; ``keep`` leaves the drill's topics and groups on the
    clusters (default: deleted once the report is written); ``connect``: how the drill
    reaches its clusters (drkit.kafka.ports)."""
    from drkit.drills.environment import remove_drill_data
    from drkit.drills.html import write_report
    from drkit.drills.repo import DrillRepository
    from drkit.drills.runner import DrillRunner
    from drkit.drills.running import DrillOptions
    from drkit.drills.scenario import require_clusters
    from drkit.kafka.clients import ClusterEndpoint, require_answering
    from drkit.local import LocalKafka

    repository = DrillRepository(store)
    flow = f"{scenario.source}->{scenario.target}"
    base_clusters = raw_clusters(config_path)  # refused before anything is stored or touched
    require_clusters(scenario, base_clusters, str(config_path))
    for alias in scenario.clusters:  # a cluster down: told in seconds
        require_answering(ClusterEndpoint(alias, config.clusters[alias]))
    drill_id = repository.start(scenario.name, flow)
    try:
        options = DrillOptions(
            base_config=config,
            base_clusters=base_clusters,
            drills_root=state_dir / "drills",
            local=local or LocalKafka(state_dir, connect=connect),
            connect=connect,
            verify=verify,
            progress=progress or (lambda _m, _f: None),
            spark_master=spark_master,
        )
        runner = DrillRunner(scenario, options)
        repository.place(drill_id, str(runner.env.directory))
        report = runner.run()
    except BaseException as err:
        repository.fail(drill_id, f"{type(err).__name__}: {err}")
        raise
    # Stored before the page is written: a report is never lost to a rendering problem.
    repository.finish(drill_id, report, str(runner.env.directory))
    html, json_path = write_report(report, runner.env.directory)
    left = () if keep else remove_drill_data(runner.env, connect).left
    return DrillOutcome(drill_id, report, html, json_path, left)


def run_readiness(
    config: DrkitConfig,
    store: StateStore,
    state_dir: Path,
    source: str,
    target: str,
    *,
    connect: AdminFactory,
) -> DrillOutcome:
    """The non-disruptive drill on the operator's own flow ``source->target``, stored - unless
    the request itself is bad (an unknown cluster, the same one twice, no such flow): that is
    refused before the drill's row is written, and nothing is stored."""
    from drkit.config.loader import flow_between

    flow_between(config, source, target)  # ConfigError naming --from/--to and the flows
    from drkit.drills.environment import new_drill_id
    from drkit.drills.html import write_report
    from drkit.drills.readiness import readiness
    from drkit.drills.repo import DrillRepository

    repository = DrillRepository(store)
    drill_id = repository.start("readiness", f"{source}->{target}")
    ident = new_drill_id(f"readiness-{source}-{target}")
    directory = state_dir / "drills" / ident
    try:
        report = readiness(config, source, target, store, state_dir, ident, connect)
    except BaseException as err:
        repository.fail(drill_id, f"{type(err).__name__}: {err}")
        raise
    repository.finish(drill_id, report, str(directory))
    html, json_path = write_report(report, directory)
    return DrillOutcome(drill_id, report, html, json_path)
