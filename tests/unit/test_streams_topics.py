"""Kafka Streams applications in a flow: changelogs replicated under their own names,
repartition topics never (drkit.topology.streams)."""

from __future__ import annotations

import pytest

from drkit.config.loader import load_config_text
from drkit.errors import ConfigError
from drkit.topology.flow import FlowTopology
from drkit.topology.streams import StreamsTopic, streams_topic

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "localhost:9092"}
  dc2: {bootstrap_servers: "localhost:9093"}
flows:
  - source: dc1
    target: dc2
    topics: {include: ["orders.*", "wordcount-.*"]}
    kafka_streams: [wordcount, fraud.v2]
"""


def test_streams_internal_topics_are_told_apart_by_application_and_suffix() -> None:
    apps = ("wordcount", "fraud.v2")
    assert streams_topic("wordcount-counts-store-changelog", apps) is StreamsTopic.CHANGELOG
    assert streams_topic("fraud.v2-KSTREAM-AGGREGATE-0000000003-repartition", apps) is (
        StreamsTopic.REPARTITION
    )
    for join in (
        "wordcount-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic",
        "wordcount-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000008-topic",
        "wordcount-by-customer-subscription-registration-topic",  # a named join
    ):
        assert streams_topic(join, apps) is StreamsTopic.REPARTITION, join
    assert streams_topic("wordcount-input", apps) is None  # an ordinary topic of the app
    assert streams_topic("other-counts-changelog", apps) is None  # another application


def test_a_flow_replicates_changelogs_under_their_names_and_never_repartition_topics() -> None:
    topology = FlowTopology.of(load_config_text(CONFIG).flows[0])
    # Selected whatever the include list says, and named as on the source.
    assert topology.selects("fraud.v2-scores-changelog")
    assert topology.target_topic("fraud.v2-scores-changelog") == "fraud.v2-scores-changelog"
    # Never replicated, even though "wordcount-.*" includes it.
    assert not topology.selects("wordcount-KSTREAM-AGGREGATE-0000000003-repartition")
    # Everything else keeps the flow's policy.
    assert topology.selects("wordcount-input")
    assert topology.target_topic("wordcount-input") == "dc1.wordcount-input"
    assert topology.target_topic("orders") == "dc1.orders"


def test_an_application_id_that_is_a_pattern_is_refused() -> None:
    with pytest.raises(ConfigError, match="kafka_streams"):
        load_config_text(CONFIG.replace("[wordcount, fraud.v2]", '["word.*"]'))


def test_the_replicator_may_read_and_write_the_applications_changelogs_by_their_prefix() -> None:
    from drkit.access.roles import role_needs
    from drkit.acl.rules import Operation, PatternType, Resource, ResourceType
    from drkit.config.model import Role

    config = load_config_text(CONFIG)
    prefix = Resource(ResourceType.TOPIC, "wordcount-", PatternType.PREFIXED)
    on_source = role_needs(Role.REPLICATOR, "dc1", config)
    on_target = role_needs(Role.REPLICATOR, "dc2", config)
    assert {Operation.READ, Operation.DESCRIBE} <= {
        n.operation for n in on_source.needs if n.resource == prefix
    }
    assert {Operation.CREATE, Operation.WRITE} <= {
        n.operation for n in on_target.needs if n.resource == prefix
    }
    assert any("Kafka Streams application wordcount" in note for note in on_target.widened)
