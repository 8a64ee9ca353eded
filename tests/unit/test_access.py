"""The ACL model (drkit.access): Kafka's authorization rules, the needs of each role, and the
doctor's findings - pure, no broker."""

from __future__ import annotations

import pytest

from drkit.access.doctor import (
    ClusterFacts,
    DoctorFinding,
    Status,
    bypass_findings,
    cluster_findings,
    installation_findings,
    message_size_findings,
)
from drkit.access.roles import role_needs
from drkit.acl.rules import (
    AclEntry,
    Need,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    authorized,
    missing,
    resource_for_pattern,
)
from drkit.config.model import DrkitConfig, Role
from drkit.errors import DrkitError

TOPIC = ResourceType.TOPIC


def _topic(name: str, prefixed: bool = False) -> Resource:
    return Resource(TOPIC, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)


def _need(resource: Resource, operation: Operation) -> Need:
    return Need(resource, operation, "test")


def _allow(principal: str, resource: Resource, operation: Operation) -> AclEntry:
    return AclEntry(principal, resource, operation)


def _deny(principal: str, resource: Resource, operation: Operation) -> AclEntry:
    return AclEntry(principal, resource, operation, Permission.DENY)


# -- Kafka's authorization rules ------------------------------------------------------------------


def test_a_literal_a_prefix_and_the_wildcard_each_grant_a_literal_need() -> None:
    need = _need(_topic("orders"), Operation.READ)
    for resource in (_topic("orders"), _topic("ord", True), _topic("*")):
        assert authorized("User:a", need, [_allow("User:a", resource, Operation.READ)])
    assert not authorized("User:a", need, [_allow("User:a", _topic("order"), Operation.READ)])
    assert not authorized("User:a", need, [_allow("User:b", _topic("orders"), Operation.READ)])
    assert authorized("User:a", need, [_allow("User:*", _topic("orders"), Operation.READ)])


def test_deny_wins_over_allow_and_a_super_user_over_both() -> None:
    need = _need(_topic("orders"), Operation.WRITE)
    entries = [
        _allow("User:a", _topic("orders"), Operation.WRITE),
        _deny("User:*", _topic("ord", True), Operation.WRITE),
    ]
    assert not authorized("User:a", need, entries)
    assert authorized("User:a", need, entries, super_users=["User:a"])
    # A DENY of another operation does not deny this one.
    assert authorized(
        "User:a", need, [entries[0], _deny("User:a", _topic("orders"), Operation.READ)]
    )


def test_implied_operations_follow_kafka() -> None:
    orders = _topic("orders")
    for granted in (Operation.READ, Operation.WRITE, Operation.ALTER, Operation.DELETE):
        assert authorized(
            "User:a", _need(orders, Operation.DESCRIBE), [_allow("User:a", orders, granted)]
        )
    assert not authorized(
        "User:a", _need(orders, Operation.DESCRIBE), [_allow("User:a", orders, Operation.CREATE)]
    )
    configs = _need(orders, Operation.DESCRIBE_CONFIGS)
    assert authorized("User:a", configs, [_allow("User:a", orders, Operation.ALTER_CONFIGS)])
    assert authorized("User:a", configs, [_allow("User:a", orders, Operation.ALL)])
    assert not authorized(
        "User:a", _need(orders, Operation.WRITE), [_allow("User:a", orders, Operation.READ)]
    )


def test_a_prefix_need_is_held_only_when_an_allow_covers_the_whole_prefix() -> None:
    need = _need(_topic("dc1.", True), Operation.WRITE)
    assert authorized("User:r", need, [_allow("User:r", _topic("dc1", True), Operation.WRITE)])
    assert authorized("User:r", need, [_allow("User:r", _topic("*"), Operation.WRITE)])
    # A literal under the prefix covers one topic of it, not all.
    assert not authorized("User:r", need, [_allow("User:r", _topic("dc1.orders"), Operation.WRITE)])
    assert not authorized(
        "User:r", need, [_allow("User:r", _topic("dc1.orders", True), Operation.WRITE)]
    )
    # A DENY on any part of it takes it away.
    entries = [
        _allow("User:r", _topic("dc1.", True), Operation.WRITE),
        _deny("User:*", _topic("dc1.orders"), Operation.WRITE),
    ]
    assert not authorized("User:r", need, entries)


def test_allow_everyone_if_no_acl_holds_only_where_no_acl_applies() -> None:
    need = _need(_topic("orders"), Operation.WRITE)
    assert authorized("User:a", need, [], allow_everyone_if_no_acl=True)
    assert not authorized("User:a", need, [], allow_everyone_if_no_acl=False)
    others = [_allow("User:b", _topic("orders"), Operation.READ)]
    assert not authorized("User:a", need, others, allow_everyone_if_no_acl=True)
    elsewhere = [_allow("User:b", _topic("payments"), Operation.READ)]
    assert authorized("User:a", need, elsewhere, allow_everyone_if_no_acl=True)


def test_an_acl_for_one_host_is_not_counted_as_a_grant() -> None:
    need = _need(_topic("orders"), Operation.READ)
    only_there = AclEntry("User:a", _topic("orders"), Operation.READ, host="10.0.0.1")
    assert not authorized("User:a", need, [only_there])


@pytest.mark.parametrize(
    ("regex", "resource", "exact"),
    [
        (".*", Resource(TOPIC, "*"), True),
        ("orders", Resource(TOPIC, "orders"), True),
        ("orders\\.v1", Resource(TOPIC, "orders.v1"), True),
        ("orders.*", Resource(TOPIC, "orders", PatternType.PREFIXED), True),
        ("orders\\..*", Resource(TOPIC, "orders.", PatternType.PREFIXED), True),
        ("orders.v1", Resource(TOPIC, "orders.v1"), False),
        ("orders.v1.*", Resource(TOPIC, "orders.v1", PatternType.PREFIXED), False),
        ("(orders|payments)", Resource(TOPIC, "*"), False),
        ("ord[a-z]+", Resource(TOPIC, "*"), False),
    ],
)
def test_a_selection_regex_becomes_the_narrowest_acl_pattern(
    regex: str, resource: Resource, exact: bool
) -> None:
    assert resource_for_pattern(TOPIC, regex) == (resource, exact)


# -- what each role needs -------------------------------------------------------------------------


def _config(**flow: object) -> DrkitConfig:
    return DrkitConfig.model_validate(
        {
            "clusters": {
                "dc1": {"bootstrap_servers": "a:9092", "principals": {"replicator": "User:repl"}},
                "dc2": {"bootstrap_servers": "b:9092"},
            },
            "flows": [{"source": "dc1", "target": "dc2", **flow}],
        }
    )


def _has(needs: tuple[Need, ...], resource: Resource, operation: Operation) -> bool:
    return any(n.resource == resource and n.operation is operation for n in needs)


def test_the_replicator_reads_the_source_selection_and_writes_only_replicas_on_the_target() -> None:
    config = _config(topics={"include": ["orders.*"]}, exactly_once=True)
    source = role_needs(Role.REPLICATOR, "dc1", config).needs
    target = role_needs(Role.REPLICATOR, "dc2", config).needs
    orders = _topic("orders", True)
    assert _has(source, orders, Operation.READ)
    assert not any(n.operation is Operation.WRITE and n.resource == orders for n in source)
    assert _has(source, _topic("heartbeats"), Operation.WRITE)
    # Heartbeats are replicated like a selected topic: their configs are read too (a secured
    # failback's reverse flow stopped on exactly that).
    assert _has(source, _topic("heartbeats"), Operation.DESCRIBE_CONFIGS)
    assert _has(source, Resource(ResourceType.GROUP, "drkit-replicate.dc1.dc2"), Operation.READ)
    assert _has(target, _topic("dc1.", True), Operation.WRITE)
    assert _has(target, _topic("drkit-offset-syncs.dc1.internal"), Operation.WRITE)
    txn = Resource(ResourceType.TRANSACTIONAL_ID, "drkit-dc1-dc2-", PatternType.PREFIXED)
    assert _has(target, txn, Operation.WRITE)
    # Nothing on the source cluster's own application topics is writable by it.
    assert not any(n.resource == _topic("*") for n in source + target)


@pytest.mark.parametrize("commits_from", ["admin_api", "offsets_topic", "auto"])
def test_the_checkpointer_needs_the_offsets_topic_only_when_told_to_follow_the_log(
    commits_from: str,
) -> None:
    """``offsets_topic`` needs READ on the log; ``auto`` (the default) works without it - the
    grant is optional, listed apart and never among the needs; ``admin_api`` never reads it."""
    config = _config(checkpoint_commits_from=commits_from)
    found = role_needs(Role.CHECKPOINTER, "dc1", config)
    log = _topic("__consumer_offsets")
    assert _has(found.needs, log, Operation.READ) is (commits_from == "offsets_topic")
    assert _has(found.optional, log, Operation.READ) is (commits_from == "auto")
    assert _has(found.optional, log, Operation.DESCRIBE) is (commits_from == "auto")
    on_target = role_needs(Role.CHECKPOINTER, "dc2", config)
    assert not _has(on_target.needs + on_target.optional, log, Operation.READ)


def test_a_grant_one_flow_needs_is_not_optional_because_another_only_wants_it() -> None:
    config = DrkitConfig.model_validate(
        {
            "clusters": {"dc1": {"bootstrap_servers": "a:9092"},
                         "dc2": {"bootstrap_servers": "b:9092"},
                         "dc3": {"bootstrap_servers": "c:9092"}},
            "flows": [{"source": "dc1", "target": "dc2", "checkpoint_commits_from": "auto"},
                      {"source": "dc1", "target": "dc3",
                       "checkpoint_commits_from": "offsets_topic"}],
        }
    )  # fmt: skip
    found = role_needs(Role.CHECKPOINTER, "dc1", config)
    assert _has(found.needs, _topic("__consumer_offsets"), Operation.READ)
    assert not found.optional


def test_identity_replicas_take_the_selection_and_unexpressible_selections_are_reported() -> None:
    config = _config(
        topics={"include": ["orders", "pay[a-z]+"]}, replication_policy={"kind": "identity"}
    )
    needs = role_needs(Role.REPLICATOR, "dc2", config)
    assert _has(needs.needs, _topic("orders"), Operation.WRITE)
    assert _has(needs.needs, _topic("*"), Operation.WRITE)
    assert any("pay[a-z]+" in note for note in needs.widened)


def test_a_cluster_in_no_flow_needs_nothing_of_the_replicator_but_the_fencer_still_fences() -> None:
    config = _config()
    config = config.model_copy(
        update={"clusters": {**config.clusters, "dc3": config.clusters["dc2"]}}
    )
    assert role_needs(Role.REPLICATOR, "dc3", config).needs == ()
    fencer = role_needs(Role.FENCER, "dc3", config).needs
    assert _has(fencer, Resource.cluster(), Operation.ALTER)


def test_principal_defaults_to_drkits_sasl_user_and_can_be_named_per_role() -> None:
    config = DrkitConfig.model_validate(
        {
            "clusters": {
                "dc1": {
                    "bootstrap_servers": "a:9092",
                    "security": {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                 "username": "drkit", "password": "x"},
                    "principals": {"monitor": "User:watcher"},
                }
            }
        }
    )  # fmt: skip
    cluster = config.clusters["dc1"]
    assert cluster.principal(Role.MONITOR) == "User:watcher"
    assert cluster.principal(Role.ENGINE) == "User:drkit"
    assert _config().clusters["dc2"].principal(Role.ENGINE) is None
    with pytest.raises(ValueError, match="not a principal"):
        DrkitConfig.model_validate(
            {"clusters": {"dc1": {"bootstrap_servers": "a:9092", "principals": {"engine": "bob"}}}}
        )


# -- the doctor's findings -----------------------------------------------------------------------


def _granted(config: DrkitConfig, cluster: str, role: Role, principal: str) -> set[AclEntry]:
    return {need.entry(principal) for need in role_needs(role, cluster, config).needs}


def _secured(config: DrkitConfig) -> DrkitConfig:
    clusters = {
        alias: cluster.model_copy(update={"allow_everyone_if_no_acl": False, "principals": {
            role: f"User:{role}" for role in Role}})
        for alias, cluster in config.clusters.items()
    }  # fmt: skip
    return config.model_copy(update={"clusters": clusters})


def test_the_doctor_names_the_one_missing_acl_and_the_role_that_needs_it() -> None:
    config = _secured(_config(topics={"include": ["orders.*"]}))
    acls: set[AclEntry] = set()
    for role in Role:
        acls |= _granted(config, "dc2", role, f"User:{role}")
    dropped = AclEntry("User:replicator", _topic("dc1.", True), Operation.WRITE)
    assert dropped in acls
    acls.discard(dropped)
    facts = ClusterFacts(
        "dc2", brokers=1, authorizer=True, acls=frozenset(acls), super_users=frozenset()
    )
    findings = cluster_findings(config, facts)
    failed = [f for f in findings if f.status is Status.FAIL]
    assert len(failed) == 1, [f.line() for f in findings]
    assert "User:replicator lacks ALLOW WRITE on topics prefixed 'dc1.'" in failed[0].line()
    assert "replicator ACLs" in failed[0].check and "replicas of dc1->dc2" in failed[0].detail
    # Everything else passes, role by role.
    assert {f.check for f in findings if f.status is Status.OK} >= {
        "reachable",
        "authorizer",
        "checkpointer ACLs",
        "monitor ACLs",
        "engine ACLs",
    }


def test_the_doctor_names_an_optional_grant_not_held_and_passes_without_it() -> None:
    config = _secured(_config())  # checkpoint_commits_from: auto, the default
    acls: set[AclEntry] = set()
    for role in Role:
        acls |= _granted(config, "dc1", role, f"User:{role}")

    def checkpointer_line(granted: set[AclEntry]) -> DoctorFinding:
        facts = ClusterFacts(
            "dc1", brokers=1, authorizer=True, acls=frozenset(granted), super_users=frozenset()
        )
        return next(f for f in cluster_findings(config, facts) if f.check == "checkpointer ACLs")

    without = checkpointer_line(acls)
    assert without.status is Status.OK, without.line()
    assert "optional, not held: READ on topic '__consumer_offsets'" in without.detail
    assert "every round reads every group's offsets" in without.detail
    log = _topic("__consumer_offsets")
    granted = acls | {AclEntry("User:checkpointer", log, Operation.READ)}
    held = checkpointer_line(granted)
    assert held.status is Status.OK and "optional" not in held.detail, held.line()


def test_the_doctor_fails_an_unreachable_cluster_and_a_missing_authorizer_when_fencing() -> None:
    config = _config()
    down = cluster_findings(config, ClusterFacts("dc1", error="no broker answered"))
    assert [(f.status, f.check) for f in down] == [(Status.FAIL, "reachable")]
    bare = cluster_findings(config, ClusterFacts("dc1", brokers=1, authorizer=False))
    assert (Status.FAIL, "authorizer") in [(f.status, f.check) for f in bare]
    assert "SECURITY_DISABLED" in bare[-1].detail


def test_a_role_that_is_a_super_user_is_flagged_and_a_plaintext_principal_is_unknown() -> None:
    """Issue 46, item 2: a drkit role whose principal is a super user was reported ok - it
    holds every grant, and far more (it may rewrite any ACL, write through any fence)."""
    config = _secured(_config())
    facts = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset(),
                         super_users=frozenset(f"User:{r}" for r in Role))  # fmt: skip
    roles = [f for f in cluster_findings(config, facts) if f.check.endswith(" ACLs")]
    assert roles and all(f.status is Status.WARN for f in roles), [f.line() for f in roles]
    assert "is a super user: far more than the engine needs" in " ".join(f.detail for f in roles)
    plain = _config()  # dc2 has no SASL user and no principals
    facts = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset())
    statuses = {f.check: f.status for f in cluster_findings(plain, facts)}
    assert statuses["role ACLs"] is Status.WARN and "engine ACLs" not in statuses


def test_a_target_that_refuses_bigger_records_than_the_source_fails() -> None:
    config = _config()
    facts = {
        "dc1": ClusterFacts("dc1", brokers=1, message_max_bytes=2_000_000),
        "dc2": ClusterFacts("dc2", brokers=1, message_max_bytes=1_048_588),
    }
    [finding] = message_size_findings(config, facts)
    assert finding.status is Status.FAIL and "1048588 < 2000000" in finding.detail
    facts["dc2"] = ClusterFacts("dc2", brokers=1, message_max_bytes=2_000_000)
    assert message_size_findings(config, facts)[0].status is Status.OK


def test_installation_findings_name_a_missing_java_and_a_store_from_a_newer_drkit() -> None:
    def no_java() -> str:
        raise DrkitError("'java' not found")

    findings = installation_findings(no_java, lambda: ("f00", "def", False))
    assert [f.status for f in findings] == [Status.FAIL, Status.FAIL]
    assert "newer drkit" in findings[1].detail
    revisions: list[tuple[str | None, str | None, bool]] = [
        (None, "def", True), ("abc", "def", True), ("def", "def", True)
    ]  # fmt: skip
    for revision in revisions:
        ok = installation_findings(lambda: "/usr/bin/java", lambda r=revision: r)  # type: ignore[misc]
        assert all(f.status is Status.OK for f in ok), revision

    def unreachable() -> tuple[str | None, str | None, bool]:
        raise DrkitError("cannot reach state store postgresql://drkit:***@db/drkit")

    assert installation_findings(lambda: "java", unreachable)[1].status is Status.FAIL


def test_missing_keeps_the_order_of_the_needs() -> None:
    needs = [_need(_topic(name), Operation.READ) for name in ("c", "a", "b")]
    held = [_allow("User:x", _topic("a"), Operation.READ)]
    assert [n.resource.name for n in missing("User:x", needs, held)] == ["c", "b"]


def test_the_doctor_says_whether_a_standbys_replicas_are_guarded() -> None:
    from drkit.access.doctor import standby_findings
    from drkit.access.standby import guard_of

    config = _secured(_config())
    guard = guard_of(config.flows[0], config)
    facts = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset(guard.entries))
    [found] = standby_findings(config, facts, None)
    assert found.status is Status.OK and "read-only standby" in found.check
    bare = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset())
    [found] = standby_findings(config, bare, None)
    assert found.status is Status.WARN and "missing" in found.detail
    assert standby_findings(config, bare, "dc2") == []  # dc2 is the primary: no guard


# -- drkit's own topics (issue 46, item 7) ------------------------------------------------------


def _own_topic_lines(config: DrkitConfig, facts: ClusterFacts) -> list[str]:
    from drkit.access.doctor import own_topic_findings

    return [f.line() for f in own_topic_findings(config, facts)]


def test_the_doctor_says_who_besides_drkit_may_write_its_own_topics() -> None:
    """A forged offset sync makes a failover commit wrong positions; a forged directive pauses
    or stops a flow - silently. The doctor names every way a client that is not drkit could
    write the control, offset-sync, progress and checkpoint topics of a flow's target."""
    config = _secured(_config())
    acls: set[AclEntry] = set()
    for role in Role:
        acls |= _granted(config, "dc2", role, f"User:{role}")
    closed = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset(acls))
    [line] = _own_topic_lines(config, closed)
    assert line.startswith("ok") and "only drkit's roles" in line
    # An application granted WRITE on every topic could forge them.
    wide = AclEntry("User:app", _topic("*"), Operation.WRITE)
    lines = _own_topic_lines(config, ClusterFacts("dc2", brokers=1, authorizer=True,
                                                  acls=frozenset(acls | {wide})))  # fmt: skip
    syncs = "drkit-offset-syncs.dc1.internal"
    assert any(line.startswith("warn") and "User:app" in line and syncs in line
               for line in lines), lines  # fmt: skip
    # An open cluster (allow.everyone.if.no.acl.found) where drkit's topics carry no ACL.
    open_config = _config()
    lines = _own_topic_lines(open_config, ClusterFacts("dc2", brokers=1, authorizer=True,
                                                       acls=frozenset()))  # fmt: skip
    assert any("any client may write" in line for line in lines), lines
    # No authorizer at all.
    lines = _own_topic_lines(open_config, ClusterFacts("dc2", brokers=1, authorizer=False))
    assert len(lines) == 1 and "no authorizer" in lines[0] and lines[0].startswith("warn")
    # The source of a flow holds none of them: nothing to say.
    assert _own_topic_lines(config, ClusterFacts("dc1", brokers=1, authorizer=True,
                                                 acls=frozenset())) == []  # fmt: skip


# -- who writes through the fence and the standby guard (issue 46, item 2) ------------------------


def _facts(alias: str, acls: set[AclEntry], supers: set[str] | None = None) -> ClusterFacts:
    known = frozenset(supers) if supers is not None else None
    return ClusterFacts(alias, brokers=1, authorizer=True, acls=frozenset(acls), super_users=known)


def test_an_application_producer_that_is_a_super_user_fails_and_other_super_users_are_named() -> (
    None
):
    config = _secured(_config())
    findings = bypass_findings(
        config, _facts("dc1", set(), {"User:app-producer", "User:admin"}), None
    )
    failed = [f for f in findings if f.status is Status.FAIL]
    assert [f.check for f in failed] == ["super users"], [f.line() for f in findings]
    assert "User:app-producer, the applications' principal, is a super user" in failed[0].detail
    assert "two writable primaries" in failed[0].detail
    named = [f for f in findings if f.status is Status.OK and f.check == "super users"]
    assert named and named[0].detail.startswith("User:admin: each writes through any fence")
    # Brokers that hide super.users: said, not assumed empty.
    hidden = bypass_findings(config, _facts("dc1", set(), None), None)
    assert [(f.status, f.check) for f in hidden] == [(Status.WARN, "super users")]
    assert bypass_findings(config, _facts("dc1", set(), set()), None) == []


def test_a_broad_allow_write_past_the_standby_guard_is_named() -> None:
    """Deny by default: the guard DENYs WRITE to the applications' principal only; a broad
    ALLOW WRITE for anyone else reaches the standby's replicas - doctor said ok."""
    config = _secured(_config(topics={"include": ["orders.*"]}))
    replicas = _topic("dc1.", True)
    guard = {_deny("User:app-producer", replicas, Operation.WRITE)}
    broad = {
        _allow("User:etl", _topic("*"), Operation.WRITE),
        _allow("User:app-producer", _topic("*"), Operation.ALL),  # the guard denies it
        _allow("User:replicator", replicas, Operation.WRITE),  # the replicator's own
        # drkit's checkpoints topic shares the replicas' prefix: bookkeeping, not a replica
        _allow("User:checkpointer", _topic("dc1.checkpoints.internal"), Operation.WRITE),
    }
    findings = bypass_findings(config, _facts("dc2", guard | broad, set()), None)
    warned = [f for f in findings if f.check == "standby guard"]
    assert len(warned) == 1 and warned[0].status is Status.WARN, [f.line() for f in findings]
    assert warned[0].detail.startswith("User:etl may write topics prefixed 'dc1.'")
    narrow = {_allow("User:etl", _topic("etl.", True), Operation.WRITE)}
    clean = bypass_findings(config, _facts("dc2", guard | narrow, set()), None)
    assert not [f for f in clean if f.check == "standby guard"], [f.line() for f in clean]
    # Once dc2 is the primary its replicas are no longer guarded: nothing to bypass.
    moved = bypass_findings(config, _facts("dc2", guard | broad, set()), "dc2")
    assert not [f for f in moved if f.check == "standby guard"]


def test_a_fence_that_names_one_principal_is_bypassed_by_another_writer() -> None:
    config = _secured(_config(topics={"include": ["orders.*"]}))
    narrow = config.failover.model_copy(update={"fence_principal": "User:app-producer"})
    config = config.model_copy(update={"failover": narrow})
    acls = {_allow("User:etl", _topic("ord", True), Operation.WRITE),
            _allow("User:app-producer", _topic("orders", True), Operation.WRITE)}  # fmt: skip
    findings = bypass_findings(config, _facts("dc1", acls, set()), None)
    [fence] = [f for f in findings if f.check == "fence"]
    assert fence.detail.startswith("User:etl may write topics prefixed 'orders'"), fence.line()
    assert "denies only User:app-producer" in fence.detail
    # The default fence (User:*) denies every principal Kafka checks ACLs for.
    default = _secured(_config(topics={"include": ["orders.*"]}))
    assert not [f for f in bypass_findings(default, _facts("dc1", acls, set()), None)
                if f.check == "fence"]  # fmt: skip


# -- nobody but the fencer may change ACLs (issue 46, item 1) -----------------------------------


def test_only_the_fencer_holds_alter_on_the_cluster() -> None:
    """Kafka's one grant for ACL changes (ALTER on the cluster) also lets its holder rewrite
    every ACL and reset every SCRAM credential: the monitor and the engine held it."""
    config = _config(topics={"include": ["orders.*"]})
    cluster_alter = (Resource.cluster(), Operation.ALTER)
    for alias in ("dc1", "dc2"):
        holders = {
            role for role in Role
            if cluster_alter in {(n.resource, n.operation)
                                 for n in role_needs(role, alias, config).needs}
        }  # fmt: skip
        assert holders == {Role.FENCER}, (alias, holders)
    fencer = role_needs(Role.FENCER, "dc1", config).needs
    assert _has(fencer, _topic("orders", True), Operation.DESCRIBE)  # sees what it fences
    assert not _has(fencer, _topic("orders", True), Operation.WRITE)
    assert _has(role_needs(Role.FENCER, "dc2", config).needs, _topic("dc1.", True),
                Operation.DESCRIBE)  # fmt: skip


def test_the_doctor_warns_a_role_holding_alter_on_the_cluster_it_does_not_need() -> None:
    config = _secured(_config())
    acls: set[AclEntry] = set()
    for role in Role:
        acls |= _granted(config, "dc1", role, f"User:{role}")
    acls.add(_allow("User:monitor", Resource.cluster(), Operation.ALTER))
    facts = ClusterFacts("dc1", brokers=1, authorizer=True, acls=frozenset(acls),
                         super_users=frozenset())  # fmt: skip
    findings = cluster_findings(config, facts)
    warned = [f for f in findings if f.status is Status.WARN]
    assert [f.check for f in warned] == ["monitor ACLs"], [f.line() for f in findings]
    assert "User:monitor holds ALTER on the cluster, which the monitor does not need" in (
        warned[0].detail
    )
    fencer = next(f for f in findings if f.check == "fencer ACLs")
    assert fencer.status is Status.OK and "User:fencer holds all" in fencer.detail


def test_the_doctor_warns_a_role_that_logs_in_as_the_fencer() -> None:
    """Security review 8, L2: a monitor and an engine mapped to the fencer's principal hold
    ALTER on the cluster through it - the doctor said 'ok' (the fencer's principal was exempt
    from the ALTER warning whatever role used it)."""
    config = _secured(_config())
    principals = {role: f"User:{role}" for role in Role}
    principals[Role.MONITOR] = principals[Role.ENGINE] = "User:fencer"
    config = config.model_copy(update={"clusters": {
        alias: cluster.model_copy(update={"principals": principals})
        for alias, cluster in config.clusters.items()}})  # fmt: skip
    acls: set[AclEntry] = set()
    for role in Role:
        acls |= _granted(config, "dc1", role, principals[role])
    facts = ClusterFacts("dc1", brokers=1, authorizer=True, acls=frozenset(acls),
                         super_users=frozenset())  # fmt: skip
    warned = [f for f in cluster_findings(config, facts) if f.status is Status.WARN]
    assert [f.check for f in warned] == ["monitor ACLs"], [f.line() for f in warned]
    assert "monitor, engine connect as User:fencer, the fencer's principal" in warned[0].detail


def test_with_acl_sync_the_replicator_still_needs_no_alter_and_the_doctor_warns_an_old_grant() -> (
    None
):
    """Security review 6, M3: acl_sync made the replicator ALTER the target cluster - every ACL
    and SCRAM credential. The fencer writes the copies now: a replicator still holding the
    old grant (an upgraded install) is warned about."""
    config = _secured(_config(topics={"include": ["orders.*"]}, acl_sync={"enabled": True}))
    cluster_alter = (Resource.cluster(), Operation.ALTER)
    for alias in ("dc1", "dc2"):
        holders = {
            role for role in Role
            if cluster_alter in {(n.resource, n.operation)
                                 for n in role_needs(role, alias, config).needs}
        }  # fmt: skip
        assert holders == {Role.FENCER}, (alias, holders)
    acls: set[AclEntry] = set()
    for role in Role:
        acls |= _granted(config, "dc2", role, f"User:{role}")
    acls.add(_allow("User:replicator", Resource.cluster(), Operation.ALTER))  # the old grant
    facts = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset(acls),
                         super_users=frozenset())  # fmt: skip
    warned = [f for f in cluster_findings(config, facts) if f.status is Status.WARN]
    assert [f.check for f in warned] == ["replicator ACLs"], [f.line() for f in warned]
    assert "User:replicator holds ALTER on the cluster" in warned[0].detail


def test_an_exclusion_the_acls_cannot_express_is_reported_as_widened() -> None:
    """Issue 46: ``exclude`` was ignored without a word - with ``include: .*`` the replicator
    may read the excluded topics on the source (an ALLOW cannot leave a name out)."""
    config = _config(topics={"include": [".*"], "exclude": ["secret\\..*"]})
    needs = role_needs(Role.REPLICATOR, "dc1", config)
    assert any("exclude 'secret\\\\..*' -> still covered by every topic" in note
               for note in needs.widened), needs.widened  # fmt: skip
    apart = _config(topics={"include": ["orders\\..*"], "exclude": ["secret\\..*"]})
    assert not role_needs(Role.REPLICATOR, "dc1", apart).widened


def test_the_doctor_warns_about_weakened_security_settings_of_the_clusters_it_checks() -> None:
    """Issue 46, item 3: plaintext SASL, unchecked certificates and clear-text secrets were
    warned by ``config validate`` only; the doctor said nothing."""
    from drkit.access.doctor import setting_findings

    config = DrkitConfig.model_validate({"clusters": {
        "dc1": {"bootstrap_servers": "a:9092", "security": {
            "protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "username": "u",
            "password": "pw-7f3a-distinct"}},
        "dc2": {"bootstrap_servers": "b:9092", "security": {
            "protocol": "SSL", "ssl_endpoint_identification": False}},
    }})  # fmt: skip
    findings = setting_findings(config, ["dc1"])
    assert findings and all(f.status is Status.WARN and f.cluster == "dc1" for f in findings)
    assert any("clusters.dc1.security" in f.detail for f in findings), findings
    both = setting_findings(config, ["dc1", "dc2"])
    assert {f.cluster for f in both} == {"dc1", "dc2"}
    assert not any("pw-7f3a-distinct" in f.detail for f in both)  # never the secret itself


def test_the_engine_and_the_monitor_write_only_the_control_topics_of_drkits_own() -> None:
    """Security review 6, L5: both could write every ``drkit-`` topic - the monitor's
    principal could forge the unsigned progress records. They publish directives on the
    control topic and the active pointer on the pointer topic (signed, on every cluster), and
    only read the rest (acks, offset syncs, progress, adopted ranges)."""
    config = _config(topics={"include": ["orders.*"]})
    control = _topic("drkit-control.dc1.internal")
    pointer = _topic(config.failover.pointer_topic)
    own = _topic("drkit-", True)
    for role in (Role.ENGINE, Role.MONITOR):
        target = role_needs(role, "dc2", config).needs
        written = {n.resource for n in target if n.resource.type is TOPIC
                   and n.operation in (Operation.WRITE, Operation.CREATE)}  # fmt: skip
        assert written - {_topic("__drkit_canary")} == {control, pointer}, (role, written)
        assert _has(target, own, Operation.READ)  # the acks, and translation's topics
        source = role_needs(role, "dc1", config).needs
        written = {n.resource for n in source if n.operation is Operation.WRITE
                   and n.resource.type is TOPIC
                   and n.resource.name.startswith("drkit-")}  # fmt: skip
        assert written == {pointer}, (role, written)


def test_applications_read_the_pointer_topic_on_every_cluster_and_write_none_of_drkits() -> None:
    """drkit.client follows the pointer topic on every cluster it knows - a standby's before any
    move, since the primary may be gone when it matters; without READ there the secured drills'
    applications never saw the move (issue 48). Reading is all they may do with it: a writer
    of the topic could publish a record compaction keeps over the engine's."""
    config = _config(topics={"include": ["orders.*"]})
    pointer = _topic(config.failover.pointer_topic)
    for role in (Role.APP_CONSUMER, Role.APP_PRODUCER):
        for cluster in ("dc1", "dc2"):
            needs = role_needs(role, cluster, config).needs
            assert _has(needs, pointer, Operation.READ) and _has(needs, pointer, Operation.DESCRIBE)
            assert not any(n.resource == pointer and n.operation is not Operation.READ
                           and n.operation is not Operation.DESCRIBE for n in needs)  # fmt: skip


def test_the_doctor_warns_an_engine_or_monitor_that_may_write_drkits_bookkeeping() -> None:
    config = _secured(_config())
    acls: set[AclEntry] = set()
    for role in Role:
        acls |= _granted(config, "dc2", role, f"User:{role}")
    facts = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset(acls),
                         super_users=frozenset())  # fmt: skip
    assert not [f for f in cluster_findings(config, facts) if f.status is Status.WARN]
    # The old grant (an upgraded install): WRITE on every drkit- topic.
    acls.add(_allow("User:monitor", _topic("drkit-", True), Operation.WRITE))
    facts = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset(acls),
                         super_users=frozenset())  # fmt: skip
    warned = [f for f in cluster_findings(config, facts) if f.status is Status.WARN]
    assert [f.check for f in warned] == ["monitor ACLs"], [f.line() for f in warned]
    assert "User:monitor may write drkit-adopted.dc1.internal, " in warned[0].detail
    assert "drkit-progress.dc1.internal" in warned[0].detail
    assert "which the monitor does not need" in warned[0].detail
    # One principal for every role: the replicator's grant, not wider than needed.
    shared = config.model_copy(update={"clusters": {
        alias: c.model_copy(update={"principals": dict.fromkeys(Role, "User:drkit")})
        for alias, c in config.clusters.items()}})  # fmt: skip
    acls = set()
    for role in Role:
        acls |= _granted(shared, "dc2", role, "User:drkit")
    facts = ClusterFacts("dc2", brokers=1, authorizer=True, acls=frozenset(acls),
                         super_users=frozenset())  # fmt: skip
    # ... said once for the cluster: every role may change ACLs through the fencer's login.
    warned = [f for f in cluster_findings(shared, facts) if f.status is Status.WARN]
    assert [f.check for f in warned] == ["replicator ACLs"], [f.line() for f in warned]
    assert warned[0].detail.startswith(
        "replicator, checkpointer, monitor, engine, verifier "
        "connect as User:drkit, the fencer's principal"
    )
