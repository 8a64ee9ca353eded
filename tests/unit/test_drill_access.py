"""A drill's role principals get the ACLs the drill's own flows need (drkit.drills.access)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drkit.access.standby import guard_entries
from drkit.acl.rules import (
    AclEntry,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
)
from drkit.config import load_config_text
from drkit.config.model import Role
from drkit.drills.access import RECORD, drill_grants, read_record, write_record
from drkit.drills.cleanup import DrillStillRunning, clean_up, drill_directory
from drkit.drills.footprint import Footprint, footprint, write_manifest
from drkit.drills.repo import DrillRepository
from drkit.errors import ConfigError
from drkit.store import StateStore
from tests.fake_kafka import FakeClusters

SECURITY = "{protocol: SASL_PLAINTEXT, sasl_mechanism: SCRAM-SHA-512, username: %s, password: x}"
DRILL = f"""
clusters:
  dc1-ab12:
    bootstrap_servers: "127.0.0.1:1"
    security: {SECURITY % "drkit"}
    principals: {{app-producer: "User:app", app-consumer: "User:app"}}
    role_security:
      replicator: {SECURITY % "replicator"}
      app-producer: {SECURITY % "app"}
      app-consumer: {SECURITY % "app"}
  dc2-ab12:
    bootstrap_servers: "127.0.0.1:2"
    security: {SECURITY % "drkit"}
    principals: {{app-producer: "User:app", app-consumer: "User:app"}}
    role_security:
      replicator: {SECURITY % "replicator"}
      app-consumer: {SECURITY % "app"}
flows:
  - {{source: dc1-ab12, target: dc2-ab12, topics: {{include: ["drillab12\\\\..*"]}},
     groups: {{include: ["drillab12\\\\..*"]}}}}
  - {{source: dc2-ab12, target: dc1-ab12, topics: {{include: ["drillab12\\\\..*"]}},
     groups: {{include: ["drillab12\\\\..*"]}}, standby: true}}
"""


def test_each_role_with_its_own_credentials_gets_what_the_drills_flows_need() -> None:
    config = load_config_text(DRILL, env={})
    grants = drill_grants(config)
    replicas = Resource(ResourceType.TOPIC, "dc1-ab12.", PatternType.PREFIXED)
    workload = Resource(ResourceType.TOPIC, "drillab12.", PatternType.PREFIXED)
    # The replicator writes the drill's replicas on the target and reads its topics at the source.
    assert AclEntry("User:replicator", replicas, Operation.WRITE) in grants["dc2-ab12"]
    assert AclEntry("User:replicator", workload, Operation.READ) in grants["dc1-ab12"]
    # The application writes the workload on the source and, moved, reads the replicas.
    assert AclEntry("User:app", workload, Operation.WRITE) in grants["dc1-ab12"]
    assert AclEntry("User:app", replicas, Operation.READ) in grants["dc2-ab12"]
    assert AclEntry("User:app", replicas, Operation.WRITE) not in grants["dc2-ab12"]
    # drkit's own principal (no role credentials) is granted nothing: it sets the drill up.
    assert not any(e.principal == "User:drkit" for entries in grants.values() for e in entries)
    # A config without role credentials: nothing to grant.
    plain = config.model_copy(
        update={"clusters": {a: c.model_copy(update={"role_security": {}})
                             for a, c in config.clusters.items()}}
    )  # fmt: skip
    assert drill_grants(plain) == {}
    assert config.as_role(Role.REPLICATOR).clusters["dc1-ab12"].security.username == "replicator"
    assert config.as_role(Role.ENGINE).clusters["dc1-ab12"].security.username == "drkit"


def test_the_drill_takes_away_the_standby_guards_of_both_its_flows_and_nothing_else() -> None:
    """A drill ends by deleting its grants and every guard its flows can hold (the monitor and
    move_pointer place them on whichever side is standby then) - all inside its own prefix."""
    config = load_config_text(DRILL, env={})
    guards = guard_entries(config)
    assert set(guards) == {"dc1-ab12", "dc2-ab12"}
    for cluster, other in (("dc2-ab12", "dc1-ab12"), ("dc1-ab12", "dc2-ab12")):
        replicas = Resource(ResourceType.TOPIC, f"{other}.", PatternType.PREFIXED)
        assert {e.resource for e in guards[cluster]} == {replicas}
        # Open cluster: only the replicator may write; everyone may still read.
        writers = {e.principal for e in guards[cluster] if e.operation is Operation.WRITE}
        assert writers == {"User:replicator"}
    closed = config.model_copy(
        update={"clusters": {a: c.model_copy(update={"allow_everyone_if_no_acl": False})
                             for a, c in config.clusters.items()}}
    )  # fmt: skip
    replicas = Resource(ResourceType.TOPIC, "dc1-ab12.", PatternType.PREFIXED)
    deny = AclEntry("User:app", replicas, Operation.WRITE, Permission.DENY)
    assert guard_entries(closed)["dc2-ab12"] == {deny}


def test_the_record_of_a_drills_grants_reads_back_exactly_and_a_damaged_one_is_refused(
    tmp_path: Path,
) -> None:
    prefix = Resource(ResourceType.TOPIC, "drillab12.", PatternType.PREFIXED)
    odd = AclEntry("User:app", prefix, Operation.WRITE, Permission.DENY, "10.0.0.1")
    granted = {
        "dc1-ab12": frozenset(drill_grants(load_config_text(DRILL))["dc1-ab12"]),
        "dc2-ab12": frozenset({odd}),
    }
    assert read_record(tmp_path) is None  # never granted, or released
    write_record(tmp_path, granted)
    recorded = read_record(tmp_path)
    assert recorded is not None
    assert recorded.grants == granted and recorded.pid == os.getpid()
    (tmp_path / RECORD).write_text('{"grants": {"dc1": [{"principal": "User:x"}]}}')
    with pytest.raises(ValueError, match="not a record of a drill's grants"):
        read_record(tmp_path)


def _recorded(tmp_path: Path, directory: Path) -> tuple[DrillRepository, int]:
    """A main store in which ``directory`` is recorded as a drill's; the drill's number."""
    store = StateStore(f"sqlite:///{tmp_path / 'main.db'}")
    store.ensure_current()
    drills = DrillRepository(store)
    number = drills.start("x", "dc1-ab12->dc2-ab12")
    drills.place(number, str(directory))
    return drills, number


def test_drill_cleanup_names_an_unknown_drill_and_refuses_while_the_drill_runs(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "drills" / "20261127-000000-x-ab12"
    directory.mkdir(parents=True)
    (directory / "drkit.yaml").write_text(DRILL)
    drills, number = _recorded(tmp_path, directory)
    with pytest.raises(ConfigError, match="'nope': no drill directory"):
        drill_directory(tmp_path, "nope", drills)
    with pytest.raises(ConfigError, match=r"no drill-manifest\.json: not a drill's directory"):
        drill_directory(tmp_path, directory.name, drills)
    write_manifest(directory, footprint(directory.name, load_config_text(DRILL, env={}),
                                        ["drillab12.orders"], []))  # fmt: skip
    assert drill_directory(tmp_path, directory.name, drills) == directory
    assert drill_directory(tmp_path, str(directory), drills) == directory
    assert drill_directory(tmp_path, str(number), drills) == directory
    with pytest.raises(ConfigError, match="'99': no such drill in the state store"):
        drill_directory(tmp_path, "99", drills)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (directory / RECORD).write_text(json.dumps({"pid": sleeper.pid, "grants": {}}))
        with pytest.raises(DrillStillRunning, match=f"process {sleeper.pid}"):
            clean_up(directory, FakeClusters().connect)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_drill_cleanup_refuses_a_directory_no_drill_was_recorded_in(tmp_path: Path) -> None:
    """A directory that holds a drkit.yaml - even a drill's manifest - is not a drill unless
    the state store recorded it as one; a manifest copied from another drill does not count."""
    live = tmp_path / "prod-orders"
    live.mkdir()
    (live / "drkit.yaml").write_text(DRILL)
    other = tmp_path / "drills" / "20261127-000000-x-cd34"
    other.mkdir(parents=True)
    (other / "drkit.yaml").write_text(DRILL)
    drills, _ = _recorded(tmp_path, other)
    with pytest.raises(ConfigError, match=r"recorded no drill in .*prod-orders"):
        drill_directory(tmp_path, str(live), drills)
    write_manifest(live, footprint("20261127-000000-x-cd34", load_config_text(DRILL, env={}),
                                   [], []))  # fmt: skip
    drills.place(drills.start("y", "a->b"), str(live))
    with pytest.raises(ConfigError, match=r"is drill '\S+x-cd34''s, not 'prod-orders'"):
        drill_directory(tmp_path, str(live), drills)


def test_a_drills_footprint_is_its_exact_names_and_never_the_shared_heartbeats() -> None:
    """Every name a drill of ``DRILL`` may create (its workload, the replicas both ways, each
    flow's bookkeeping and worker groups) - each carrying its tag - and nothing else."""
    config = load_config_text(DRILL, env={})
    found = footprint("d", config, ["drillab12.orders"], ["drillab12.readers"])
    assert "heartbeats" not in found.topics
    assert {"drillab12.orders", "dc1-ab12.drillab12.orders", "dc1-ab12.heartbeats",
            "dc2-ab12.heartbeats", "drkit-offset-syncs.dc1-ab12.internal",
            "dc2-ab12.checkpoints.internal",
            "drkit-progress.dc2-ab12.internal"} <= set(found.topics)  # fmt: skip
    assert set(found.groups) == {
        "drillab12.readers", "drkit-replicate.dc1-ab12.dc2-ab12",
        "drkit-replicate.dc2-ab12.dc1-ab12", "drkit-checkpoints.dc1-ab12.dc2-ab12",
        "drkit-checkpoints.dc2-ab12.dc1-ab12",
    }  # fmt: skip
    assert all("ab12" in name for name in (*found.topics, *found.groups))
    assert Footprint.from_json(json.loads(json.dumps(found.to_json()))) == found
    for broken in ({}, {"kind": "drkit.drill-manifest/v1", "drill": "d", "topics": "x",
                        "groups": []}):  # fmt: skip
        with pytest.raises(ValueError):
            Footprint.from_json(broken)


def test_release_takes_the_recorded_grants_too_when_grant_failed_half_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grant() records, then creates; when a create fails its caller holds nothing, yet some
    ACLs exist: release() must take what the record names (then drop the record)."""
    from drkit.drills import access

    config = load_config_text(DRILL)
    recorded = {"dc1-ab12": frozenset(drill_grants(config)["dc1-ab12"])}
    write_record(tmp_path, recorded)
    revoked: list[dict[str, frozenset[AclEntry]]] = []
    monkeypatch.setattr(access, "revoke", lambda _c, added, _connect: revoked.append(dict(added)))
    monkeypatch.setattr(access, "lift_fences", lambda _c, _s, _connect: [])
    access.release(config, {}, None, tmp_path, FakeClusters().connect)  # type: ignore[arg-type]
    assert revoked == [recorded]
    assert read_record(tmp_path) is None
