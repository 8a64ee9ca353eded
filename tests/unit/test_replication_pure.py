"""Pure replication logic: policies, topic selection, formats, topic-sync plans, transforms."""

from __future__ import annotations

import json
import struct

import pytest

from drkit.config.model import FlowConfig, NameFilter, ReplicationPolicyConfig, TransformConfig
from drkit.errors import ConfigError
from drkit.kafka.admin import ConfigValue
from drkit.replication.heartbeat import Heartbeat
from drkit.replication.provenance import Provenance
from drkit.replication.topic_sync import (
    EXCLUDED_CONFIGS,
    TopicState,
    differences,
    plan_topic_sync,
    replicable_configs,
)
from drkit.topology.policy import IdentityPolicy, PrefixPolicy, build_policy
from drkit.topology.topic_filter import TopicFilter
from drkit.topology.transforms import OutRecord, build_chain


def test_prefix_policy_round_trips_and_recognises_remote_topics() -> None:
    policy = PrefixPolicy()
    assert policy.target_topic("dc1", "orders") == "dc1.orders"
    assert policy.upstream("dc1", "dc1.orders") == "orders"
    assert policy.upstream("dc1", "dc2.orders") is None
    assert policy.is_remote_of("dc2", "dc2.orders")
    assert not policy.is_remote_of("dc2", "orders")


def test_identity_policy_keeps_names() -> None:
    assert build_policy(ReplicationPolicyConfig(kind="identity")) == IdentityPolicy()
    assert IdentityPolicy().target_topic("dc1", "orders") == "orders"


def test_unknown_policy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown policy"):
        build_policy(ReplicationPolicyConfig(kind="nope"))


def test_topic_filter_skips_internal_and_remote_topics_but_keeps_heartbeats() -> None:
    flow = FlowConfig(
        source="dc1", target="dc2", topics=NameFilter(include=("orders.*",), exclude=(".*tmp",))
    )
    selects = TopicFilter.of(flow, PrefixPolicy()).selects
    assert selects("orders") and selects("orders-eu")
    assert not selects("orders-tmp")
    assert not selects("payments")
    assert not selects("__consumer_offsets")
    assert not selects("drkit-progress.dc1.internal")
    assert not selects("dc2.orders"), "a replica of the target must not go back"
    assert selects("heartbeats")


def test_heartbeat_matches_mm2_layout() -> None:
    beat = Heartbeat("dc1", "dc2", 1_700_000_000_123)
    assert beat.key() == b"\x00\x03dc1\x00\x03dc2"
    assert beat.value() == struct.pack(">hq", 0, 1_700_000_000_123)
    assert Heartbeat.decode(beat.key(), beat.value()) == beat


def test_provenance_round_trips() -> None:
    provenance = Provenance("dc1", "orders.eu", 7, 123456789)
    assert provenance.encode() == b"dc1/orders.eu/7/123456789"
    assert Provenance.decode(provenance.encode()) == provenance
    with pytest.raises(ValueError):
        Provenance.decode(b"garbage")


def test_only_topic_level_configs_minus_broker_specific_ones_are_replicable() -> None:
    configs = {
        "retention.ms": ConfigValue("1000", False, False, False, "DYNAMIC_TOPIC_CONFIG"),
        "segment.bytes": ConfigValue("1", False, False, False, "STATIC_BROKER_CONFIG"),
        "min.insync.replicas": ConfigValue("2", False, False, False, "DYNAMIC_TOPIC_CONFIG"),
        "cleanup.policy": ConfigValue("delete", True, False, False, "DEFAULT_CONFIG"),
    }
    assert replicable_configs(configs) == {"retention.ms": "1000"}
    assert "min.insync.replicas" in EXCLUDED_CONFIGS


def test_plan_creates_grows_syncs_and_reports_drift_but_never_shrinks() -> None:
    sources = {
        "new": TopicState("new", 3, {"retention.ms": "10"}),
        "grown": TopicState("grown", 6, {}),
        "drifted": TopicState("drifted", 2, {"retention.ms": "10"}),
        "wider": TopicState("wider", 2, {}),
    }
    targets = {
        "dc1.grown": TopicState("dc1.grown", 4, {}),
        "dc1.drifted": TopicState("dc1.drifted", 2, {"retention.ms": "99"}),
        "dc1.wider": TopicState("dc1.wider", 5, {}),
    }
    plan = plan_topic_sync(sources, targets, lambda t: f"dc1.{t}", 3, sync_configs=True)
    (created,) = plan.create
    assert (created.name, created.partitions, created.replication_factor) == ("dc1.new", 3, 3)
    assert created.configs == {"retention.ms": "10"}
    assert plan.add_partitions == (("dc1.grown", 6),)
    assert plan.set_configs == (("dc1.drifted", {"retention.ms": "10"}),)
    assert [(d.topic, d.key, d.source_value, d.target_value) for d in plan.drift] == [
        ("dc1.drifted", "retention.ms", "10", "99")
    ]
    assert plan.wider_target == (("dc1.wider", 2, 5),)
    report_only = plan_topic_sync(sources, targets, lambda t: f"dc1.{t}", 3, sync_configs=False)
    assert report_only.set_configs == () and len(report_only.drift) == 1
    # What status and the drills' parity check show: one line per difference.
    assert differences(plan) == [
        "dc1.new missing",
        "dc1.grown has fewer partitions (source: 6)",
        "dc1.wider has more partitions (5; source: 2)",
        "dc1.drifted retention.ms=99 (source: 10)",
    ]
    assert differences(plan_topic_sync({}, {}, str, None, False)) == []


def test_filter_drops_or_keeps_by_key_and_header() -> None:
    drop_tests = build_chain([TransformConfig(type="filter", options={"key_regex": "^test-"})])
    assert drop_tests.apply(OutRecord(b"test-1", b"v", ())) is None
    assert drop_tests.apply(OutRecord(b"real", b"v", ())) is not None
    keep_eu = build_chain(
        [
            TransformConfig(
                type="filter", options={"header": "region", "header_regex": "^eu", "action": "keep"}
            )
        ]
    )
    assert keep_eu.apply(OutRecord(b"k", b"v", (("region", b"eu-west"),))) is not None
    assert keep_eu.apply(OutRecord(b"k", b"v", (("region", b"us"),))) is None
    assert keep_eu.apply(OutRecord(b"k", b"v", ())) is None


def test_json_field_transforms_leave_non_json_alone() -> None:
    masked = build_chain(
        [
            TransformConfig(type="mask_json_fields", options={"fields": ["card.number"]}),
            TransformConfig(type="drop_json_fields", options={"fields": ["ssn"]}),
        ]
    )
    value = json.dumps({"card": {"number": "4111", "exp": "01/30"}, "ssn": "x", "n": 1}).encode()
    out = masked.apply(OutRecord(b"k", value, ()))
    assert out is not None and json.loads(out.value or b"") == {
        "card": {"number": "****", "exp": "01/30"},
        "n": 1,
    }
    assert masked.apply(OutRecord(b"k", b"\xff not json", ())) == OutRecord(
        b"k", b"\xff not json", ()
    )


def test_route_renames_target_topics() -> None:
    routed = build_chain(
        [
            TransformConfig(
                type="route", options={"pattern": "^dc1\\.(.*)$", "replacement": "mirror.\\1"}
            )
        ]
    )
    assert routed.rename("dc1.orders") == "mirror.orders"
    assert routed.steps == ()


def test_bad_transform_options_name_the_transform() -> None:
    with pytest.raises(ConfigError) as caught:
        build_chain(
            [
                TransformConfig(type="filter", options={}),
                TransformConfig(type="teleport", options={}),
            ]
        )
    paths = [p.path for p in caught.value.problems]
    assert paths == ["transforms[0]", "transforms[1]"]


def test_forwarded_origin_headers_are_not_loops_only_copies_in_place_are() -> None:
    from drkit.replication.provenance import Origin, is_loop, origin_header, origin_of_record

    copy = origin_header(b"DC2", b"DC1", "orders")  # dc2's record, copied by drkit to dc1/orders
    assert Origin.decode(copy) == Origin("DC2", ("DC1", "orders"))
    # Read back from where drkit wrote it: a true loop for the flow dc1 -> dc2.
    assert is_loop(copy, "DC1", "orders", "DC2")
    # The same header copied by an application into dc1/invoices: native to dc1, not a loop.
    assert not is_loop(copy, "DC1", "invoices", "DC2")
    assert origin_of_record(copy, "DC1", "invoices") == "DC1"
    # A chain dc2 -> dc1 -> dc3: the copy on dc1 keeps dc2 as its origin and goes on to dc3.
    assert not is_loop(copy, "DC1", "orders", "DC3")
    assert origin_of_record(copy, "DC1", "orders") == "DC2"
    # Legacy values (bare cluster id): a copy when drkit-src names the topic it sits in
    # (identity-named replica), forwarded when it names another; garbage is native.
    assert is_loop(b"DC2", "DC1", "orders", "DC2", src=b"dc2/orders/0/7")
    assert not is_loop(b"DC2", "DC1", "invoices", "DC2", src=b"dc2/orders/0/7")
    assert is_loop(b"DC2", "DC1", "anything", "DC2")  # no drkit-src: keep the old meaning
    assert origin_of_record(b"a/b", "DC1", "t") == "DC1"
    assert origin_of_record(None, "DC1", "t") == "DC1"
