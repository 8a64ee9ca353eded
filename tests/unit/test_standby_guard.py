"""Read-only standby (drkit.access.standby): which ACLs guard a standby's replicas, which
exist for a given primary, and how move_pointer and the monitor's duty change them - pure and
on in-memory clusters."""

from __future__ import annotations

from pathlib import Path

from drkit.access.standby import guard_of, guarded_flows, plan_guards
from drkit.acl.rules import (
    AclEntry,
    Need,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    authorized,
)
from drkit.config import load_config_text
from drkit.config.model import DrkitConfig
from drkit.control import ControlRepository, DesiredState
from drkit.failover.maintenance import FailoverMaintenance
from drkit.failover.model import RunState, StepName
from drkit.failover.pointer import PointerRepository
from drkit.failover.steps.promotion import move_pointer
from tests.unit.test_failover_steps import World
from tests.unit.test_failover_steps import _plan as world_plan

OPEN = """
clusters:
  dc1:
    bootstrap_servers: "127.0.0.1:9"
    principals: {replicator: "User:repl", app-producer: "User:app"}
  dc2:
    bootstrap_servers: "127.0.0.1:10"
    principals: {replicator: "User:repl", app-producer: "User:app"}
flows:
  - {source: dc1, target: dc2}
  - {source: dc2, target: dc1, standby: true}
"""

REPLICAS_OF_DC1 = Resource(ResourceType.TOPIC, "dc1.", PatternType.PREFIXED)


def _config(text: str = OPEN, **cluster_changes: object) -> DrkitConfig:
    config = load_config_text(text, env={})
    if not cluster_changes:
        return config
    clusters = {a: c.model_copy(update=cluster_changes) for a, c in config.clusters.items()}
    return config.model_copy(update={"clusters": clusters})


def _may(principal: str, operation: Operation, entries: set[AclEntry], open_: bool) -> bool:
    need = Need(Resource(ResourceType.TOPIC, "dc1.orders"), operation, "test")
    return authorized(principal, need, entries, allow_everyone_if_no_acl=open_)


def test_on_an_open_cluster_only_the_replicator_may_write_a_guarded_replica() -> None:
    guard = guard_of(_config().flows[0], _config())
    assert guard.cluster == "dc2" and guard.note is None
    entries = set(guard.entries)
    assert _may("User:repl", Operation.WRITE, entries, True)
    assert _may("User:repl", Operation.CREATE, entries, True)
    assert _may("User:repl", Operation.ALTER_CONFIGS, entries, True)
    assert not _may("User:app", Operation.WRITE, entries, True)
    assert not _may("User:someone", Operation.WRITE, entries, True)
    # Everyone still reads (and without the guard, everyone could write).
    assert _may("User:someone", Operation.READ, entries, True)
    assert _may("User:app", Operation.WRITE, set(), True)
    # drkit's own topics on dc2 are not touched.
    assert all(e.resource == REPLICAS_OF_DC1 for e in entries)


def test_on_a_deny_by_default_cluster_the_guard_denies_the_applications_writes() -> None:
    config = _config(allow_everyone_if_no_acl=False)
    guard = guard_of(config.flows[0], config)
    assert guard.entries == {
        AclEntry("User:app", REPLICAS_OF_DC1, Operation.WRITE, Permission.DENY)
    }
    broad = {AclEntry("User:app", Resource(ResourceType.TOPIC, "*"), Operation.WRITE)}
    assert _may("User:app", Operation.WRITE, broad, False)
    assert not _may("User:app", Operation.WRITE, broad | set(guard.entries), False)


def test_no_guard_where_the_replicator_cannot_be_told_apart_or_replicas_are_every_topic() -> None:
    plain = load_config_text(
        'clusters:\n  dc1: {bootstrap_servers: "a:1"}\n  dc2: {bootstrap_servers: "b:1"}\n'
        "flows:\n  - {source: dc1, target: dc2}\n",
        env={},
    )
    guard = guard_of(plain.flows[0], plain)
    assert not guard.entries and guard.note and "principals.replicator" in guard.note
    same = _config(principals={"replicator": "User:drkit", "app-producer": "User:drkit"})
    assert "one principal" in (guard_of(same.flows[0], same).note or "")
    identity = _config(
        OPEN.replace("{source: dc1, target: dc2}",
                     "{source: dc1, target: dc2, replication_policy: {kind: identity}}")
    )  # fmt: skip
    assert "literal or prefixed" in (guard_of(identity.flows[0], identity).note or "")
    closed = _config(allow_everyone_if_no_acl=False, principals={})
    assert "app-producer" in (guard_of(closed.flows[0], closed).note or "")


def test_the_guard_follows_the_primary() -> None:
    config = _config()
    assert [f.name for f in guarded_flows(config, None)] == ["dc1->dc2"]  # not the standby flow
    assert [f.name for f in guarded_flows(config, "dc1")] == ["dc1->dc2"]
    assert [f.name for f in guarded_flows(config, "dc2")] == ["dc2->dc1"]
    before = {p.cluster: p for p in plan_guards(config, "dc1", {"dc1": set(), "dc2": set()})}
    assert before["dc2"].create and not before["dc1"].create
    on_dc2 = set(before["dc2"].create)
    operator = AclEntry("User:ops", REPLICAS_OF_DC1, Operation.READ)  # not drkit's: kept
    after = {
        p.cluster: p for p in plan_guards(config, "dc2", {"dc1": set(), "dc2": on_dc2 | {operator}})
    }
    assert after["dc2"].delete == on_dc2 and not after["dc2"].create
    dc2_prefix = Resource(ResourceType.TOPIC, "dc2.", PatternType.PREFIXED)
    assert {e.resource for e in after["dc1"].create} == {dc2_prefix}


def _world(tmp_path: Path) -> World:
    world = World(tmp_path)
    world.config = _config()
    return world


def _guards(acls: set[AclEntry]) -> set[str]:
    """The resources of the prefixed (guard-kind) ALLOWs and DENYs among ``acls``."""
    return {e.resource.name for e in acls if e.resource.pattern is PatternType.PREFIXED}


def _maintenance(world: World) -> FailoverMaintenance:
    return FailoverMaintenance(
        world.config, world.store, world.state_dir, connect=world.clusters.connect
    )


def test_move_pointer_lifts_the_new_primarys_guard_and_guards_the_old_one(tmp_path: Path) -> None:
    world = _world(tmp_path)
    dc1, dc2 = world.clusters["dc1"], world.clusters["dc2"]
    maintenance = _maintenance(world)
    world.runs.finish(world.run_id, RunState.SUCCEEDED)
    # A fresh set-up: dc1 replicates to dc2, whose replicas are guarded; the standby flow
    # into dc1 holds, so its replicator may not write there.
    assert maintenance.reconcile_protections().changed == ["dc1", "dc2"]
    assert _guards(dc2.acls) == {"dc1."} and _guards(dc1.acls) == {"dc2."}
    assert not dc1.writable("dc2.orders", "User:repl") and dc1.writable("orders", "User:app")
    assert maintenance.reconcile_protections().changed == []  # idempotent
    world.run_id = world.runs.create(world_plan(), "test", "unit").id
    ControlRepository(world.store).set("dc1->dc2", DesiredState.STOPPED, "stop_replication")
    world.runs.step_started(world.run_id, StepName.MOVE_POINTER)  # the intent, as recorded
    outcome = move_pointer(world.context(), None)
    assert PointerRepository(world.store).get().cluster == "dc2"  # type: ignore[union-attr]
    # The new primary takes writes (its guard gone); drkit's flow into it is over: its
    # replicator may not write there any more.
    assert dc2.writable("dc1.orders", "User:app") and dc2.writable("orders", "User:app")
    assert not dc2.writable("dc1.orders", "User:repl")
    assert not guard_of(world.config.flows[0], world.config).entries & dc2.acls
    assert _guards(dc1.acls) == {"dc2."}  # the reverse flow's replicas on the old primary ...
    assert dc1.writable("dc2.orders", "User:repl")  # ... which its replicator may write now
    detail = {p["cluster"]: p for p in outcome.detail["protections"]}
    assert detail["dc2"]["acls_deleted"] > 0 and detail["dc1"]["acls_created"] > 0
    world.runs.finish(world.run_id, RunState.SUCCEEDED)
    assert maintenance.reconcile_protections().changed == []  # the monitor agrees


def test_a_guard_the_monitor_finds_missing_is_restored_but_not_while_a_run_holds_the_lease(
    tmp_path: Path,
) -> None:
    from drkit.failover.lease import LeaseRepository

    world = _world(tmp_path)
    dc2 = world.clusters["dc2"]
    maintenance = _maintenance(world)
    world.runs.finish(world.run_id, RunState.SUCCEEDED)
    maintenance.tick()
    assert _guards(dc2.acls) == {"dc1."}
    dc2.acls.clear()  # someone deleted it
    held = LeaseRepository(world.store).acquire("engine:elsewhere", 60)
    maintenance.tick()  # a run's engine holds the lease: it reconciles, the monitor waits
    assert not dc2.acls
    LeaseRepository(world.store).release(held)
    maintenance.tick()
    assert _guards(dc2.acls) == {"dc1."}


def test_read_only_standby_can_be_switched_off(tmp_path: Path) -> None:
    world = _world(tmp_path)
    world.config = world.config.model_copy(
        update={"failover": world.config.failover.model_copy(update={"read_only_standby": False})}
    )
    world.runs.finish(world.run_id, RunState.SUCCEEDED)
    assert "dc2" not in _maintenance(world).reconcile_protections().changed
    assert not world.clusters["dc2"].acls
