"""Protections as desired state (drkit.failover.protections): what each cluster should hold,
from the pointer, the unfinished runs' recorded steps and the flows - pure, over values."""

from __future__ import annotations

from drkit.acl.rules import Operation, PatternType, Permission
from drkit.config import load_config_text
from drkit.config.model import DrkitConfig
from drkit.failover.model import Direction, Procedure, RunState, StepName, StepState
from drkit.failover.protections import (
    READONLY,
    READWRITE,
    ProtectionFacts,
    RunIntent,
    desired,
    fence_topics,
)

CONFIG = """
clusters:
  dc1:
    bootstrap_servers: "127.0.0.1:9"
    principals: {replicator: "User:repl", app-producer: "User:app"}
    schema_registry: {url: "http://127.0.0.1:1/apis/ccompat/v7"}
  dc2:
    bootstrap_servers: "127.0.0.1:10"
    principals: {replicator: "User:repl", app-producer: "User:app"}
    schema_registry: {url: "http://127.0.0.1:2/apis/ccompat/v7"}
flows:
  - {source: dc1, target: dc2, topics: {include: ["orders.*"]}, schema_sync: {enabled: true}}
  - {source: dc2, target: dc1, standby: true, topics: {include: ["orders.*"]}}
"""


def _config(text: str = CONFIG) -> DrkitConfig:
    return load_config_text(text, env={})


def _intent(
    steps: dict[StepName, StepState],
    state: RunState = RunState.RUNNING,
    direction: Direction = Direction.FORWARD,
) -> RunIntent | None:
    return RunIntent.of(7, Procedure.SWITCHOVER, "dc1", "dc2", state, direction, steps)


STARTED, DONE = StepState.RUNNING, StepState.DONE


def test_before_any_move_nothing_is_fenced_and_the_first_sources_registry_is_writable() -> None:
    wanted = desired(_config(), ProtectionFacts(None))
    assert not wanted["dc1"].fenced and not wanted["dc2"].fenced
    assert (wanted["dc1"].registry, wanted["dc2"].registry) == (READWRITE, READONLY)
    # dc1 is where applications write: the flow into dc2 is guarded, the standby flow into
    # dc1 (held) may not write there.
    assert wanted["dc2"].guard and not wanted["dc1"].guard
    assert {
        e.principal for e in wanted["dc1"].replicator_fence if e.permission is Permission.DENY
    } == {"User:repl"}


def test_every_source_but_the_pointers_is_fenced_and_its_registry_read_only() -> None:
    wanted = desired(_config(), ProtectionFacts("dc2"))
    assert wanted["dc1"].fenced and not wanted["dc2"].fenced
    assert (wanted["dc1"].registry, wanted["dc2"].registry) == (READONLY, READWRITE)
    assert wanted["dc1"].guard and not wanted["dc2"].guard  # the reverse flow's replicas
    # The flow into the new primary is over (not running): its replicator may not write.
    fenced = {
        (e.resource.name, e.resource.pattern)
        for e in wanted["dc2"].replicator_fence
        if e.permission is Permission.DENY
    }
    assert ("dc1.", PatternType.PREFIXED) in fenced
    assert ("drkit-progress.dc1.internal", PatternType.LITERAL) in fenced
    # ... and on an open cluster everyone else keeps every right there.
    assert any(
        e.principal == "User:*" and e.operation is Operation.ALL
        for e in wanted["dc2"].replicator_fence
    )


def test_a_running_flow_into_the_primary_is_not_fenced() -> None:
    wanted = desired(_config(), ProtectionFacts("dc2", running_flows=frozenset({"dc1->dc2"})))
    assert not wanted["dc2"].replicator_fence


def test_a_runs_recorded_steps_are_its_intent() -> None:
    config = _config()
    fencing = _intent({StepName.FENCE_SOURCE: STARTED})
    assert fencing is not None
    wanted = desired(config, ProtectionFacts("dc1", (fencing,)))
    assert wanted["dc1"].fenced  # though it is still the pointer's
    opening = _intent({StepName.FENCE_SOURCE: DONE, StepName.UNFENCE_TARGET: STARTED})
    assert opening is not None
    after_failover = desired(config, ProtectionFacts("dc1", (opening,)))
    assert after_failover["dc1"].fenced and not after_failover["dc2"].fenced
    assert not after_failover["dc2"].guard  # the target takes writes from here on


def test_a_run_rolling_back_or_ended_wants_nothing() -> None:
    steps = {StepName.FENCE_SOURCE: DONE, StepName.UNFENCE_TARGET: DONE}
    for state, direction in (
        (RunState.ROLLING_BACK, Direction.ROLLBACK),
        (RunState.FAILED, Direction.ROLLBACK),
        (RunState.ROLLED_BACK, Direction.ROLLBACK),
        (RunState.ABANDONED, Direction.FORWARD),
        (RunState.SUCCEEDED, Direction.FORWARD),
    ):
        assert _intent(steps, state, direction) is None, state
    # A rollback therefore fences again a target that an earlier move had fenced (finding 1).
    before = desired(_config(), ProtectionFacts("dc1"))
    assert not before["dc1"].fenced and before["dc2"].fenced
    assert before["dc1"].registry == READWRITE and before["dc2"].registry == READONLY


def test_an_operators_opening_holds_for_the_cluster_or_some_of_its_topics() -> None:
    config = _config()
    whole = desired(config, ProtectionFacts("dc2", opened={"dc1": None}))
    assert not whole["dc1"].fenced
    some = desired(config, ProtectionFacts("dc2", opened={"dc1": frozenset({"orders.a"})}))
    assert some["dc1"].fenced and some["dc1"].open_topics == {"orders.a"}


def test_a_failback_holds_its_original_primary_fenced_until_it_opens_it_openings_or_not() -> None:
    """Issue 44, finding 9: after a failover to dc2 an operator opened dc1 (``fences lift
    --even-if-standby``); main's failback captured dc1's divergent tail while dc1 still took
    writes - lost, while the run said the tail was captured.  From its start until its
    unfence_target a failback wants its target fenced whole, whatever an opening says."""
    config = _config()
    opened = {"dc1": None}
    assert not desired(config, ProtectionFacts("dc2", opened=opened))["dc1"].fenced
    capturing = RunIntent.of(
        8, Procedure.FAILBACK, "dc2", "dc1", RunState.RUNNING, Direction.FORWARD,
        {StepName.CAPTURE_DIVERGENT_TAIL: STARTED},
    )  # fmt: skip
    assert capturing is not None
    held = desired(config, ProtectionFacts("dc2", (capturing,), opened=opened))["dc1"]
    assert held.fenced
    some = {"dc1": frozenset({"orders.a"})}
    assert (
        desired(config, ProtectionFacts("dc2", (capturing,), opened=some))["dc1"].open_topics
        == set()
    )
    opening = RunIntent.of(
        8, Procedure.FAILBACK, "dc2", "dc1", RunState.RUNNING, Direction.FORWARD,
        {StepName.CAPTURE_DIVERGENT_TAIL: DONE, StepName.UNFENCE_TARGET: STARTED},
    )  # fmt: skip
    assert opening is not None
    assert not desired(config, ProtectionFacts("dc2", (opening,), opened=opened))["dc1"].fenced


def test_the_fence_covers_what_the_flows_select_now_not_heartbeats_nor_replicas() -> None:
    config = _config()
    listed = ["orders.a", "orders.b", "heartbeats", "dc2.orders.a", "payments"]
    assert fence_topics(config, "dc1", listed) == {"orders.a", "orders.b"}
    # A topic created since the plan is fenced at the next reconcile, from the listing.
    assert "orders.new" in fence_topics(config, "dc1", [*listed, "orders.new"])


IDENTITY = """
clusters:
  dc1:
    bootstrap_servers: "127.0.0.1:9"
    principals: {replicator: "User:repl", app-producer: "User:app"}
  dc2:
    bootstrap_servers: "127.0.0.1:10"
    principals: {replicator: "User:repl", app-producer: "User:app"}
flows:
  - {source: dc1, target: dc2, topics: {include: ["orders"]}, replication_policy: {kind: identity}}
  - {source: dc2, target: dc1, topics: {include: ["orders"]}, replication_policy: {kind: identity},
     standby: true}
"""


def test_identity_replicas_a_running_flow_writes_are_the_guards_not_the_fences() -> None:
    """Failback replicates back into the old primary under the topics' own names: a fence there
    would stop the replicator too; with a guard in its place only the replicator writes."""
    config = _config(IDENTITY)
    held = desired(config, ProtectionFacts("dc2"))
    assert held["dc1"].fenced and not held["dc1"].guarded_writers
    assert fence_topics(config, "dc1", ["orders"], held["dc1"].guarded_writers) == {"orders"}
    back = desired(config, ProtectionFacts("dc2", running_flows=frozenset({"dc2->dc1"})))
    assert back["dc1"].guarded_writers == {"dc2->dc1"}
    assert fence_topics(config, "dc1", ["orders"], back["dc1"].guarded_writers) == set()
    assert back["dc1"].guard  # only the replicator may write them
