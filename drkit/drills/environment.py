"""A drill's own corner of the clusters: its directory, config, state store and processes.

A drill never touches the operator's flows, groups, pointer or fences: its topics and groups
carry a unique prefix, its flow replicates only them, and its state store (failover runs,
pointer, fences, health) lives in the drill's directory.  Only the drill's row and report go
to the main store.  The clusters themselves are shared - which is what makes it a drill.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from tenacity import retry, retry_if_result, stop_after_delay, wait_fixed

from drkit.config import load_config
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.config.secrets import literal_secrets
from drkit.config_checks import CONFIG_CHECKS
from drkit.drills.footprint import Footprint, footprint, read_manifest, write_manifest
from drkit.drills.scenario import DecisionMode, Scenario, require_clusters
from drkit.errors import ConfigError, Problem
from drkit.local.ports import free_port
from drkit.private_files import DIR_MODE, write_private
from drkit.store import StateStore

if TYPE_CHECKING:
    from drkit.kafka.ports import AdminFactory, ClusterAdmin


def refuse_literal_secrets(clusters: dict[str, Any], source: Path | None = None) -> None:
    """Raise ConfigError when a cluster section holds a secret written out: a drill copies
    these sections into its own config, and must never copy a secret (it would outlive the
    drill in its directory).  ``${VAR}`` references and ``*_file`` paths are copied instead."""
    found = [
        path
        for alias, section in clusters.items()
        for path in literal_secrets(section, f"clusters.{alias}")
    ]
    reason = (
        "a secret written out: a drill never copies one into its own config - give it as a "
        "${VAR} reference or a *_file (password_file, client_secret_file); nothing was done"
    )
    if found:
        raise ConfigError([Problem(path, reason) for path in found], str(source or ""))


def new_drill_id(name: str, now: datetime | None = None) -> str:
    at = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{at}-{name}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class DrillEnvironment:
    id: str
    directory: Path
    config_path: Path
    config: DrkitConfig
    store: StateStore

    @property
    def flow(self) -> FlowConfig:
        return self.config.flows[0]

    def alias(self, cluster: str) -> str:
        """The drill's own alias of a cluster: flows, internal topics and worker groups are
        named after aliases, so the drill's never mix with the operator's."""
        return f"{cluster}-{self.tag}"

    def cluster_of(self, text: str) -> str:
        """``text`` (an alias, or words naming aliases) with the scenario's cluster names."""
        return text.replace(f"-{self.tag}", "")

    @property
    def tag(self) -> str:
        """The drill id's random part: in its topic prefix and its cluster aliases."""
        return self.id.rsplit("-", 1)[-1]

    @property
    def prefix(self) -> str:
        """Of every topic and group the drill creates."""
        return f"drill{self.tag}"

    def topic(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def group(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    @classmethod
    def create(
        cls, scenario: Scenario, base_clusters: dict[str, Any], drills_root: Path
    ) -> DrillEnvironment:
        """Write the drill's config (its flow, fast health, its store) and the manifest of the
        names it may create (drkit.drills.footprint), then migrate its store."""
        require_clusters(scenario, base_clusters, "the config")
        refuse_literal_secrets({n: base_clusters[n] for n in scenario.clusters})
        ident = new_drill_id(scenario.name)
        directory = drills_root / ident
        drills_root.mkdir(parents=True, exist_ok=True)
        directory.mkdir(mode=DIR_MODE)  # exists already: another drill's - refused
        directory.chmod(DIR_MODE)  # its config names the clusters' credentials' files
        tag = ident.rsplit("-", 1)[-1]
        prefix = f"drill{tag}"
        pattern = f"{prefix}\\..*"
        source, target = f"{scenario.source}-{tag}", f"{scenario.target}-{tag}"
        flow = {
            "source": source,
            "target": target,
            "topics": {"include": [pattern]},
            "groups": {"include": [pattern]},
            "replication_policy": {"kind": "prefix"},
            "target_replication_factor": None,
        }
        reverse = {
            **flow,
            "source": target,
            "target": source,
            "standby": True,
        }
        # The source's other standbys: a flow to each, after the drill's own two (flows[0] is
        # the drill's flow), so a two-cluster drill's config is as it always was.
        standbys = [{**flow, "target": f"{standby.cluster}-{tag}"} for standby in scenario.standbys]
        automatic = scenario.move.decision is DecisionMode.AUTOMATIC
        document = {
            "version": 1,
            "clusters": {f"{name}-{tag}": base_clusters[name] for name in scenario.clusters},
            "flows": [flow, reverse, *standbys],
            "health": {
                "probe_interval_s": 1.0,
                "probe_timeout_s": 0.8,
                "failure_threshold": 3,
                "recovery_threshold": 2,
                "observer_quorum": 1,
                "observation_window_s": 10,
            },
            "failover": {
                "automatic": automatic,
                "allow_single_observer": automatic,
                "after_s": 3.0,
                "accept_any_rpo": True,
                "lease_ttl_s": 5.0,
                "worker_silence_s": 10.0,
                # Its own: the operator's applications follow the operator's pointer topic.
                "pointer_topic": f"drkit-pointer.{tag}.internal",
            },
            "state_store": {"url": f"sqlite:///{directory / 'drill.db'}"},
        }
        path = directory / "drkit.yaml"
        write_private(path, yaml.safe_dump(document, sort_keys=False))
        config = load_config(path, checks=CONFIG_CHECKS)
        write_manifest(directory, footprint(
            ident, config,
            [f"{prefix}.{topic.name}" for topic in scenario.workload.topics],
            [f"{prefix}.{group.name}" for group in scenario.workload.groups],
        ))  # fmt: skip
        store = StateStore(f"sqlite:///{directory / 'drill.db'}")
        store.ensure_current()
        return cls(ident, directory, path, config, store)


# The drill's consumers time out within 10 s (drkit.kafka.apps, the workers' settings); a
# member of one killed -9 - or restored with its cluster after the fault - holds its group
# until then, and the broker refuses to delete a group with members.
MEMBERS_GONE_S = 15.0


@dataclass(frozen=True)
class DrillDataRemoved:
    """What a drill's clean-up deleted, and what it had to leave (``cluster:group`` names of
    groups that still had members when the wait ran out; ``drkit drill cleanup`` removes
    them later)."""

    removed: tuple[str, ...]
    left: tuple[str, ...]


def remove_drill_data(
    env: DrillEnvironment, connect: AdminFactory, members_gone_s: float = MEMBERS_GONE_S
) -> DrillDataRemoved:
    """Delete the drill's topics (workload, replicas, its flows' bookkeeping) and consumer
    groups from every cluster of its config: exactly the names of its manifest
    (:func:`drkit.drills.footprint.read_manifest`) that exist there, nothing else.  A group
    that still has members is retried until they are gone or ``members_gone_s`` has passed,
    then left and named; nothing else here is left silently (a cluster that refuses raises).
    The report, the drill's store and its logs stay in its directory."""
    from drkit.kafka import ClusterEndpoint

    present = drill_data(env, connect)
    removed: list[str] = []
    left: list[str] = []
    for alias, (topics, groups) in present.items():
        admin = connect(ClusterEndpoint(alias, env.config.clusters[alias]))
        if topics:
            admin.delete_topics(list(topics))
        busy = _delete_when_empty(admin, list(groups), members_gone_s)
        removed += [f"{alias}:{name}" for name in (*topics, *groups) if name not in busy]
        left += [f"{alias}:{name}" for name in busy]
    return DrillDataRemoved(tuple(removed), tuple(left))


def drill_data(
    env: DrillEnvironment, connect: AdminFactory
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Per cluster alias of the drill's config: (topics, groups) of its manifest that exist
    there now - what :func:`remove_drill_data` would delete.  Raises ValueError when the
    drill's directory holds no valid manifest."""
    from drkit.kafka import ClusterEndpoint

    recorded: Footprint = read_manifest(env.directory)
    topics, groups = set(recorded.topics), set(recorded.groups)
    present: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for alias, cluster in env.config.clusters.items():
        admin = connect(ClusterEndpoint(alias, cluster))
        present[alias] = (
            tuple(sorted(topics.intersection(admin.list_topics()))),
            tuple(sorted(groups.intersection(admin.list_groups()))),
        )
    return present


def _delete_when_empty(admin: ClusterAdmin, groups: list[str], wait_s: float) -> tuple[str, ...]:
    """Delete ``groups``, retrying the ones that still have members for up to ``wait_s``;
    returns those that kept them."""

    @retry(
        retry=retry_if_result(bool),
        stop=stop_after_delay(wait_s),
        wait=wait_fixed(1.0),
        retry_error_callback=lambda state: state.outcome.result(),  # type: ignore[union-attr]
    )
    def attempt() -> tuple[str, ...]:
        nonlocal groups
        groups = list(admin.delete_groups(groups))
        return tuple(groups)

    return attempt()


class DrkitChild:
    """``python -m drkit ARGS`` in its own session, output to a log file in the drill dir."""

    def __init__(self, env: DrillEnvironment, label: str, *args: str) -> None:
        self.label = label
        self.log_path = env.directory / f"{label}.log"
        command = [sys.executable, "-m", "drkit", "--state-dir", str(env.directory), *args]
        # The drill's store is the one its config names: $DRKIT_DB_URL, which outranks a
        # config's, sent its replicator and monitor to the operator's store instead (a
        # scheduled drill in a monitor started with it failed so).
        environment = {k: v for k, v in os.environ.items() if k != "DRKIT_DB_URL"}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**environment, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns the exit code."""
        if self.running:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        return self.kill()

    def kill(self) -> int | None:
        if self.running:
            os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait(30)


def replicator(
    env: DrillEnvironment, flows: tuple[str, ...] = (), label: str = "replicate"
) -> DrkitChild:
    """``drkit replicate`` of the drill's config: every flow, or only ``flows`` (names) - a
    drill with standbys runs each standby's flow in a process of its own, so one can stop
    while the others copy on."""
    only = [arg for name in flows for arg in ("--flow", name)]
    return DrkitChild(
        env,
        label,
        "replicate",
        "--config",
        str(env.config_path),
        "--commit-interval",
        "0.5",
        *only,
    )


def monitor(env: DrillEnvironment) -> DrkitChild:
    port = free_port()
    return DrkitChild(
        env,
        "monitor",
        "monitor",
        "--config",
        str(env.config_path),
        "--observer",
        "drill",
        "--listen",
        f"127.0.0.1:{port}",
    )
